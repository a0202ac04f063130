// FilterBank (SPEC parsing, trained weights, channel arrangement), the effects, and
// FilterBankStream: the concatenation of everything a stream returns equals the offline
// decode(effect(encode(x))), for random chunk sequences, every effect and both channel modes.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "convbank/filterbank.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/presets.hpp"
#include "test_files.hpp"

namespace {

using test_files::error_of;

using convbank::BandLayout;
using convbank::ChannelMode;
using convbank::FilterBank;
using convbank::FilterBankSource;
using convbank::FilterBankStream;
using convbank::Shape;
using convbank::Status;
using convbank::Tensor;

const std::string kModel = std::string(CONVBANK_DATA_DIR) + "/model/tasnet_small.safetensors";

Tensor random_audio(Shape shape, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 0.3f);
  Tensor t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = d(rng);
  return t;
}

// SNR in dB of `got` against `want` over frames [from, to) of every (batch, channel).
double snr_db(const Tensor& want, const Tensor& got, std::int64_t from, std::int64_t to) {
  REQUIRE(want.shape().batch == got.shape().batch);
  REQUIRE(want.shape().channels == got.shape().channels);
  double s = 0, e = 0;
  for (std::int64_t b = 0; b < want.shape().batch; ++b) {
    for (std::int64_t c = 0; c < want.shape().channels; ++c) {
      for (std::int64_t t = from; t < to; ++t) {
        const double w = want(b, c, t), g = got(b, c, t);
        s += w * w;
        e += (w - g) * (w - g);
      }
    }
  }
  return e == 0 ? 400.0 : 10.0 * std::log10(s / e);
}

// Streams x (batch 1, C channels) through a fresh FilterBankStream in random chunks.
Tensor stream_all(const std::shared_ptr<FilterBank>& bank, const std::string& effect,
                  const Tensor& x, std::int64_t max_frames, std::mt19937_64& rng) {
  FilterBankStream stream(bank, convbank::make_effect(effect, *bank, 16000));
  const std::int64_t channels = x.shape().channels;
  stream.prepare(max_frames, channels);
  Tensor out(Shape{1, channels,
                   std::max(stream.max_output_frames(max_frames), stream.max_flush_frames())});
  std::vector<std::vector<float>> got(static_cast<std::size_t>(channels));
  const auto append = [&](std::int64_t n) {
    for (std::int64_t c = 0; c < channels; ++c) {
      got[static_cast<std::size_t>(c)].insert(got[static_cast<std::size_t>(c)].end(),
                                              out.view().channel(0, c),
                                              out.view().channel(0, c) + n);
    }
  };
  std::uniform_int_distribution<std::int64_t> len(1, max_frames);
  for (std::int64_t at = 0; at < x.shape().frames;) {
    const std::int64_t n = std::min(len(rng), x.shape().frames - at);
    std::int64_t produced = 0;
    REQUIRE(stream.process(x.view().slice_frames(at, n), out.view(), &produced) == Status::kOk);
    append(produced);
    at += n;
  }
  std::int64_t produced = 0;
  REQUIRE(stream.flush(out.view(), &produced) == Status::kOk);
  append(produced);
  Tensor r(Shape{1, channels, static_cast<std::int64_t>(got[0].size())});
  for (std::int64_t c = 0; c < channels; ++c) {
    std::copy(got[static_cast<std::size_t>(c)].begin(), got[static_cast<std::size_t>(c)].end(),
              r.view().channel(0, c));
  }
  return r;
}

Tensor offline(const FilterBank& bank, const std::string& effect, const Tensor& x) {
  Tensor f = bank.encode(x);
  if (auto e = convbank::make_effect(effect, bank, 16000)) {
    e->prepare(f.shape().batch, f.shape().channels, f.shape().frames);
    e->process(f.view());
  }
  return bank.decode(f, x.shape().channels);
}

// The largest elementwise difference over the largest magnitude of `want`.
double max_error_over_peak(const Tensor& got, const Tensor& want) {
  double worst = 0, peak = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got.data()[i] - want.data()[i])));
    peak = std::max(peak, static_cast<double>(std::abs(want.data()[i])));
  }
  return worst / peak;
}

}  // namespace

TEST_CASE("filterbank: stft spec folds channels into the batch and reconstructs") {
  std::mt19937_64 rng(1);
  const FilterBank bank = FilterBank::from_spec("stft:n_fft=256,hop=64,window=hann");
  CHECK(bank.n_filters() == 2 * 129);
  CHECK(bank.kernel_size() == 256);
  CHECK(bank.stride() == 64);
  CHECK(bank.layout() == BandLayout::kComplexPairs);
  CHECK(bank.bands() == 129);
  CHECK(bank.channel_mode() == ChannelMode::kShared);
  const Tensor x = random_audio(Shape{2, 3, 4096}, rng);
  const Tensor f = bank.encode(x);
  CHECK(f.shape() == Shape{6, 258, 4096 / 64 + 1});
  // Each folded row is the encoding of that (batch, channel) alone.
  Tensor one(Shape{1, 1, 4096});
  std::copy(x.view().channel(1, 2), x.view().channel(1, 2) + 4096, one.data());
  const Tensor f1 = bank.encode(one);
  for (std::int64_t k = 0; k < 258; k += 37) {
    for (std::int64_t t = 0; t < f.shape().frames; t += 7) CHECK(f(5, k, t) == f1(0, k, t));
  }
  const Tensor y = bank.decode(f, 3);
  REQUIRE(y.shape() == x.shape());
  CHECK(snr_db(x, y, 256, 4096 - 256) >= 100.0);
}

TEST_CASE("filterbank: every computed preset builds from a spec, with pinv synthesis") {
  std::mt19937_64 rng(2);
  const Tensor x = random_audio(Shape{1, 1, 6000}, rng);
  const FilterBankSource at16k{16000, ""};
  struct Case {
    const char* spec;
    std::int64_t filters;
    bool reconstructs;  // pinv reconstructs only when the bank has full column rank
  };
  // Hamming, not Hann: a periodic Hann window's first tap is 0, so that tap's column of the
  // analysis matrix is zero and no pseudo-inverse can give it back.
  for (const Case& c : {Case{"stft:n_fft=128,hop=32,window=hamming,synthesis=pinv", 130, true},
                        Case{"mel:n_filters=24,n_fft=256,hop=64", 24, false},
                        Case{"param_sinc:n_filters=64,kernel_size=33,stride=11", 64, false},
                        Case{"gammatone:n_filters=16,kernel_size=64,stride=16", 16, false}}) {
    CAPTURE(c.spec);
    const FilterBank bank = FilterBank::from_spec(c.spec, at16k);
    CHECK(bank.n_filters() == c.filters);
    const Tensor y = bank.decode(bank.encode(x), 1);
    CHECK(y.shape().frames > 0);
    if (c.reconstructs) CHECK(snr_db(x, y, 256, 5000) >= 100.0);
  }
  // A stft whose pinv synthesis has full rank reconstructs as well as its own synthesis.
  const FilterBank own = FilterBank::from_spec("stft:n_fft=128,hop=32");
  CHECK(snr_db(x, own.decode(own.encode(x), 1), 256, 5000) >= 100.0);
}

TEST_CASE("filterbank: free and analytic banks from the bundled safetensors model and .npy") {
  std::mt19937_64 rng(3);
  const Tensor x = random_audio(Shape{1, 2, 3000}, rng);
  const FilterBank st = FilterBank::from_spec(
      "free:analysis=encoder.weight,synthesis=decoder.weight,stride=8", {16000, kModel});
  CHECK(st.n_filters() == 64);
  CHECK(st.kernel_size() == 16);
  CHECK(st.layout() == BandLayout::kReal);
  const Tensor y = st.decode(st.encode(x), 2);
  CHECK(snr_db(x, y, 16, 2900) >= 100.0);
  // The same weights as a directory of .npy files, and the decoder as pinv of the encoder.
  const std::string dir = std::string(CONVBANK_DATA_DIR) + "/model";
  const FilterBank npy = FilterBank::from_spec(
      "free:analysis=encoder.weight,synthesis=decoder.weight,stride=8", {16000, dir});
  const FilterBank pinv = FilterBank::from_spec("free:analysis=encoder.weight,stride=8", {0, dir});
  const Tensor a = st.encode(x), b = npy.encode(x);
  for (std::int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.data()[i] == b.data()[i]);
  CHECK(snr_db(x, pinv.decode(pinv.encode(x), 2), 16, 2900) >= 100.0);
  const FilterBank analytic =
      FilterBank::from_spec("analytic:analysis=encoder.weight,stride=8", {16000, kModel});
  CHECK(analytic.n_filters() == 128);
  CHECK(analytic.layout() == BandLayout::kComplexPairs);
}

TEST_CASE("filterbank: a true multi-channel bank takes as many channels as its weights") {
  std::mt19937_64 rng(4);
  Tensor w = random_audio(Shape{12, 2, 8}, rng);
  auto ana = std::make_shared<convbank::Conv1d>(convbank::Conv1dOptions{
      .in_channels = 2, .out_channels = 12, .kernel_size = 8, .stride = 4, .bias = false});
  ana->set_weight(w.view());
  auto syn = std::make_shared<convbank::ConvTranspose1d>(convbank::ConvTranspose1dOptions{
      .in_channels = 12, .out_channels = 2, .kernel_size = 8, .stride = 4, .bias = false});
  syn->set_weight(w.view());
  const FilterBank bank(ana, syn);
  CHECK(bank.channel_mode() == ChannelMode::kMultichannel);
  CHECK(bank.audio_channels() == 2);
  const Tensor x = random_audio(Shape{1, 2, 400}, rng);
  CHECK(bank.encode(x).shape() == Shape{1, 12, 99});
  const Tensor mono = random_audio(Shape{1, 1, 400}, rng);
  CHECK(error_of([&] { bank.encode(mono); }).find("audio has 1 channels but the bank takes 2") !=
        std::string::npos);
}

TEST_CASE("filterbank: bad specs and mismatched layers fail with clear errors") {
  const FilterBankSource at16k{16000, kModel};
  const auto err = [&](const std::string& spec) {
    return error_of([&] { FilterBank::from_spec(spec, at16k); });
  };
  CHECK(err("wavelet:n=3").find("unknown preset 'wavelet'") != std::string::npos);
  CHECK(err("stft:n_fft=512,hopp=128").find("unknown key 'hopp'") != std::string::npos);
  CHECK(err("stft:n_fft=abc").find("n_fft must be an integer, got 'abc'") != std::string::npos);
  CHECK(err("stft:n_fft=512,n_fft=256").find("key 'n_fft' is given twice") != std::string::npos);
  CHECK(err("stft:n_fft").find("expected key=value") != std::string::npos);
  CHECK(err("stft:window=kaiser").find("kaiser") != std::string::npos);
  CHECK(err("free:analysis=encoder.weight").find("stride=N is required") != std::string::npos);
  CHECK(err("free:analysis=enc.w,stride=8").find("enc.w") != std::string::npos);
  CHECK(err("mel:n_filters=20,sample_rate=8000").find("the audio is at 16000 Hz") !=
        std::string::npos);
  CHECK(error_of([] { FilterBank::from_spec("mel:n_filters=20"); }).find("sample_rate") !=
        std::string::npos);
  auto a = std::make_shared<convbank::Conv1d>(
      convbank::Conv1dOptions{.in_channels = 1, .out_channels = 8, .kernel_size = 4, .stride = 2});
  auto s = std::make_shared<convbank::ConvTranspose1d>(convbank::ConvTranspose1dOptions{
      .in_channels = 8, .out_channels = 1, .kernel_size = 4, .stride = 3});
  CHECK(error_of([&] { FilterBank(a, s); })
            .find("analysis stride 2 differs from synthesis "
                  "stride 3") != std::string::npos);
  const FilterBank bank = FilterBank::from_spec("stft:n_fft=64,hop=16");
  const auto effect_err = [&](const std::string& spec) {
    return error_of([&] { convbank::make_effect(spec, bank); });
  };
  CHECK(effect_err("reverb").find("unknown effect 'reverb'") != std::string::npos);
  CHECK(effect_err("gain:0-40=-6").find("out of range: the bank has 33 bands") !=
        std::string::npos);
  CHECK(effect_err("gain:5-2=-6").find("empty range") != std::string::npos);
  CHECK(effect_err("denoise:window=0").find("window") != std::string::npos);
  CHECK(effect_err("denoise:strength=2").find("unknown key 'strength'") != std::string::npos);
}

TEST_CASE("filterbank: FilterBankStream equals offline processing for every effect") {
  std::mt19937_64 rng(5);
  const auto bank = std::make_shared<FilterBank>(FilterBank::from_spec("stft:n_fft=128,hop=32"));
  const auto model = std::make_shared<FilterBank>(FilterBank::from_spec(
      "free:analysis=encoder.weight,synthesis=decoder.weight,stride=8", {16000, kModel}));
  const Tensor x = random_audio(Shape{1, 2, 5000}, rng);
  for (const auto& b : {bank, model}) {
    for (const char* effect : {"none", "gain:0-3=-20,7=6", "denoise", "denoise:release=0.05"}) {
      for (const std::int64_t max_frames : {1, 7, 32, 33, 500}) {
        CAPTURE(b->description());
        CAPTURE(effect);
        CAPTURE(max_frames);
        const Tensor want = offline(*b, effect, x);
        const Tensor got = stream_all(b, effect, x, max_frames, rng);
        REQUIRE(got.shape() == want.shape());
        CHECK(max_error_over_peak(got, want) <= 1e-5);
      }
    }
  }
}

TEST_CASE(
    "filterbank: a stereo stream of a large bank (batch folded into one GEMM) equals offline") {
  // 1026 x 1024 weights (4 MiB) and a few frames per call: the CPU streams run one GEMM over both
  // channels (conv_cpu.cpp, kFoldWeightFloats) instead of one per channel.
  std::mt19937_64 rng(6);
  const auto bank = std::make_shared<FilterBank>(FilterBank::from_spec("stft:n_fft=1024,hop=256"));
  const Tensor x = random_audio(Shape{1, 2, 6000}, rng);
  for (const char* effect : {"none", "denoise"}) {
    CAPTURE(effect);
    const Tensor want = offline(*bank, effect, x);
    const Tensor got = stream_all(bank, effect, x, 480, rng);
    REQUIRE(got.shape() == want.shape());
    CHECK(max_error_over_peak(got, want) <= 1e-5);
  }
}

TEST_CASE("filterbank: FilterBankStream reports its latency and rejects bad calls") {
  const auto bank = std::make_shared<FilterBank>(FilterBank::from_spec("stft:n_fft=512,hop=128"));
  FilterBankStream stream(bank);
  // Conv1d latency dilation * (K - 1) - padding_left = 511 - 256; the synthesis adds none.
  CHECK(stream.latency_frames() == 255);
  stream.prepare(256, 2);
  Tensor in = Tensor::zeros(Shape{1, 2, 256});
  Tensor out(Shape{1, 2, stream.max_output_frames(256)});
  std::int64_t n = -1;
  Tensor wrong = Tensor::zeros(Shape{1, 3, 256});
  CHECK(stream.process(wrong.view(), out.view(), &n) == Status::kInvalidArgument);
  CHECK(n == 0);
  Tensor too_long = Tensor::zeros(Shape{1, 2, 257});
  CHECK(stream.process(too_long.view(), out.view(), &n) == Status::kInvalidArgument);
  CHECK(stream.process(in.view(), out.view(), &n) == Status::kOk);
}
