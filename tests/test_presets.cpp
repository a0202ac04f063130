// Computed filter banks (convbank/presets.hpp) against independent references: torch.stft /
// torch.istft, torchaudio's melscale_fbanks, scipy.signal.gammatone and hilbert, a NumPy
// transcription of asteroid-filterbanks' ParamSincFB, numpy.linalg.pinv. The references live in
// data/fixtures/presets, written by tests/tools/make_preset_refs.py; reconstruction properties
// (analysis -> synthesis gives the input back) are checked here directly on random signals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/filterbank.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/presets.hpp"
#include "convbank/stream.hpp"
#include "convbank/tensor.hpp"
#include "stream_helpers.hpp"
#include "test_files.hpp"

namespace {

using test_files::error_of;

namespace presets = convbank::presets;
using convbank::Error;
using convbank::Shape;
using convbank::Tensor;
using nlohmann::json;

const std::string kFixtureDir = std::string(CONVBANK_DATA_DIR) + "/fixtures/presets/";

const json& manifest() {
  static const json m = [] {
    std::ifstream in(kFixtureDir + "manifest.json");
    REQUIRE_MESSAGE(in.good(), "cannot open " << kFixtureDir
                                              << "manifest.json; regenerate with /usr/bin/python3 "
                                                 "tests/tools/make_preset_refs.py");
    return json::parse(in);
  }();
  return m;
}

Tensor load(const json& c, const char* key) {
  return convbank::io::read_npy(kFixtureDir + c.at(key).get<std::string>());
}

presets::Window window_of(const json& c) {
  return presets::parse_window(c.at("window").get<std::string>());
}

// ||a - b|| / ||b|| over n values; when b is all zeros, ||a|| (an absolute error).
double rel_l2(const float* a, const float* b, std::int64_t n) {
  double diff = 0, ref = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    ref += static_cast<double>(b[i]) * b[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  return std::sqrt(diff / ref);
}

// Signal-to-noise ratio of `y` against `x` over [first, last), in dB.
double snr_db(const float* y, const float* x, std::int64_t first, std::int64_t last) {
  double noise = 0, signal = 0;
  for (std::int64_t i = first; i < last; ++i) {
    noise += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    signal += static_cast<double>(x[i]) * x[i];
  }
  return noise == 0 ? 400.0 : 10 * std::log10(signal / noise);
}

Tensor random_signal(std::int64_t frames, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  Tensor x(Shape{1, 1, frames});
  for (std::int64_t i = 0; i < frames; ++i) x.data()[i] = dist(rng);
  return x;
}

Tensor analyze(const Tensor& weight, std::int64_t stride, std::int64_t padding, const Tensor& x) {
  convbank::Conv1d conv({.in_channels = 1,
                         .out_channels = weight.shape().batch,
                         .kernel_size = weight.shape().frames,
                         .stride = stride,
                         .padding = padding,
                         .bias = false});
  conv.set_weight(weight);
  return conv.forward(x);
}

Tensor synthesize(const Tensor& weight, std::int64_t stride, std::int64_t padding,
                  const Tensor& y) {
  convbank::ConvTranspose1d deconv({.in_channels = weight.shape().batch,
                                    .out_channels = 1,
                                    .kernel_size = weight.shape().frames,
                                    .stride = stride,
                                    .padding = padding,
                                    .bias = false});
  deconv.set_weight(weight);
  return deconv.forward(y);
}

// Encode with `analysis`, decode with `synthesis`, and return the SNR against the input away
// from the edges (n_fft at each end, where frames are missing).
double round_trip_snr(const Tensor& analysis, const Tensor& synthesis, std::int64_t stride,
                      std::int64_t padding, std::int64_t frames, unsigned seed) {
  const Tensor x = random_signal(frames, seed);
  const Tensor y = synthesize(synthesis, stride, padding, analyze(analysis, stride, padding, x));
  const std::int64_t k = analysis.shape().frames;
  const std::int64_t last = std::min(y.shape().frames, frames) - k;
  REQUIRE(last > 2 * k);
  return snr_db(y.data(), x.data(), k, last);
}

// |DFT(h)| at bins 0..n/2, in float64.
std::vector<double> dft_magnitude(const float* h, std::int64_t n) {
  std::vector<double> mag(static_cast<std::size_t>(n / 2 + 1));
  for (std::int64_t k = 0; k <= n / 2; ++k) {
    double re = 0, im = 0;
    for (std::int64_t t = 0; t < n; ++t) {
      const double angle = 2 * std::numbers::pi * static_cast<double>((k * t) % n) / n;
      re += h[t] * std::cos(angle);
      im -= h[t] * std::sin(angle);
    }
    mag[static_cast<std::size_t>(k)] = std::hypot(re, im);
  }
  return mag;
}

}  // namespace

TEST_CASE("presets: windows are torch's periodic windows and parse by name") {
  for (auto w : {presets::Window::kHann, presets::Window::kSqrtHann, presets::Window::kHamming,
                 presets::Window::kBlackman, presets::Window::kRectangular}) {
    CHECK(presets::parse_window(presets::to_string(w)) == w);
  }
  const std::vector<double> hann = presets::window(presets::Window::kHann, 4);
  REQUIRE(hann.size() == 4);
  CHECK(hann[0] == 0.0);
  CHECK(hann[1] == doctest::Approx(0.5));
  CHECK(hann[2] == 1.0);
  CHECK(hann[3] == doctest::Approx(0.5));
  CHECK(presets::window(presets::Window::kBlackman, 1) == std::vector<double>{1.0});
  const std::vector<double> hamming = presets::window(presets::Window::kHamming, 2);
  REQUIRE(hamming.size() == 2);
  CHECK(hamming[0] == doctest::Approx(0.08));
  CHECK(hamming[1] == doctest::Approx(1.0));
}

namespace {

// ||y - spec|| / ||spec|| for a torch.stft fixture: (2F, frames), real rows then imaginary rows.
double stft_error(const Tensor& y, const json& c) {
  const Tensor ref = load(c, "spec");
  REQUIRE(y.shape().channels == ref.shape().channels);
  REQUIRE(y.shape().frames == ref.shape().frames);
  return rel_l2(y.data(), ref.data(), ref.numel());
}

}  // namespace

TEST_CASE("presets: stft_analysis as Conv1d equals torch.stft") {
  double worst = 0;
  for (const json& c : manifest().at("stft")) {
    INFO("case " << c.at("name").get<std::string>());
    const presets::Stft o{.n_fft = c.at("n_fft"),
                          .hop = c.at("hop"),
                          .window = window_of(c),
                          .center = c.at("center")};
    const Tensor w = presets::stft_analysis(o);
    CHECK(w.shape() == Shape{2 * (o.n_fft / 2 + 1), 1, o.n_fft});
    CHECK(presets::stft_padding(o) == (o.center ? o.n_fft / 2 : 0));
    const double err = stft_error(analyze(w, o.hop, presets::stft_padding(o), load(c, "x")), c);
    CHECK(err <= 1e-5);
    worst = std::max(worst, err);
  }
  MESSAGE("stft_analysis vs torch.stft: worst relative L2 error " << worst);
}

// The stft preset's pad_mode key (reflect: torch.stft's default; replicate) against torch.stft
// with that pad_mode, offline and streamed through the bank's analysis in ragged chunks.
TEST_CASE("presets: stft pad_mode=reflect|replicate equals torch.stft's, offline and streamed") {
  double worst = 0;
  std::mt19937_64 rng(5);
  for (const json& c : manifest().at("stft_pad_mode")) {
    const std::string spec = "stft:n_fft=" + std::to_string(c.at("n_fft").get<int>()) +
                             ",hop=" + std::to_string(c.at("hop").get<int>()) +
                             ",window=" + c.at("window").get<std::string>() +
                             ",pad_mode=" + c.at("pad_mode").get<std::string>();
    INFO("spec " << spec);
    const convbank::FilterBank bank = convbank::FilterBank::from_spec(spec);
    const Tensor input = load(c, "x");  // (1, 1, frames)
    const Tensor y = bank.analysis().forward(input);
    const double err = stft_error(y, c);
    CHECK(err <= 1e-5);
    worst = std::max(worst, err);

    convbank::Conv1dStream stream(bank.analysis_ptr());
    stream.prepare(97);
    bool ok = false;
    const Tensor streamed = stream_test::run_stream(
        stream, input, stream_test::chunk_lengths(input.shape().frames, 97, bank.stride(), rng),
        &ok);
    CHECK(ok);
    REQUIRE(streamed.shape() == y.shape());
    CHECK(rel_l2(streamed.data(), y.data(), y.numel()) <= 1e-6);
  }
  MESSAGE("stft pad_mode vs torch.stft: worst relative L2 error " << worst);
  CHECK_THROWS_WITH_AS(convbank::FilterBank::from_spec("stft:n_fft=64,pad_mode=circular"),
                       doctest::Contains("pad_mode 'circular' cannot stream"), convbank::Error);
  CHECK_THROWS_WITH_AS(convbank::FilterBank::from_spec("stft:n_fft=64,pad_mode=mirror"),
                       doctest::Contains("pad_mode must be one of"), convbank::Error);
}

TEST_CASE("presets: stft_synthesis inverts the analysis and matches torch.istft") {
  double worst_istft = 0, worst_snr = 1e9;
  for (const json& c : manifest().at("istft")) {
    INFO("case " << c.at("name").get<std::string>());
    const presets::Stft o{.n_fft = c.at("n_fft"),
                          .hop = c.at("hop"),
                          .window = window_of(c),
                          .center = c.at("center")};
    const Tensor x = load(c, "x");
    const Tensor ref = load(c, "istft");
    const std::int64_t pad = presets::stft_padding(o);
    const Tensor y = synthesize(presets::stft_synthesis(o), o.hop, pad,
                                analyze(presets::stft_analysis(o), o.hop, pad, x));
    // Our decoder divides by the steady-state window-square sum, istft by the exact one:
    // they agree once every sample is covered by all its frames, n_fft from either end.
    const std::int64_t first = o.n_fft;
    const std::int64_t last = std::min(y.shape().frames, ref.shape().frames) - o.n_fft;
    REQUIRE(last - first > 2 * o.n_fft);
    const double err = rel_l2(y.data() + first, ref.data() + first, last - first);
    const double snr = snr_db(y.data(), x.data(), first, last);
    CHECK(err <= 1e-5);
    CHECK(snr >= 100);
    worst_istft = std::max(worst_istft, err);
    worst_snr = std::min(worst_snr, snr);
  }
  MESSAGE("stft_synthesis vs torch.istft: worst relative L2 error "
          << worst_istft << ", worst SNR vs input " << worst_snr << " dB");
}

TEST_CASE("presets: stft round trip reconstructs for every window and hop that allows it") {
  using W = presets::Window;
  struct Case {
    std::int64_t n_fft, hop;
    W window;
    bool center;
  };
  const Case cases[] = {
      {512, 128, W::kHann, true},      {512, 256, W::kHann, false},
      {512, 256, W::kSqrtHann, true},  {400, 100, W::kHamming, true},
      {400, 200, W::kHamming, false},  {256, 64, W::kBlackman, true},
      {255, 51, W::kBlackman, false},  {129, 43, W::kHann, true},
      {64, 64, W::kRectangular, true}, {64, 48, W::kHamming, true},  // hop does not divide
      {2, 1, W::kRectangular, false},  {3, 3, W::kHamming, true},
  };
  double worst = 1e9;
  for (const Case& c : cases) {
    const presets::Stft o{.n_fft = c.n_fft, .hop = c.hop, .window = c.window, .center = c.center};
    INFO("n_fft " << c.n_fft << " hop " << c.hop << " " << presets::to_string(c.window)
                  << " center " << c.center);
    const double snr =
        round_trip_snr(presets::stft_analysis(o), presets::stft_synthesis(o), o.hop,
                       presets::stft_padding(o), 3000 + 7 * c.n_fft, static_cast<unsigned>(c.hop));
    CHECK(snr >= 100);
    worst = std::min(worst, snr);
  }
  MESSAGE("stft round trip: worst SNR " << worst << " dB");
}

TEST_CASE("presets: stft_synthesis refuses a hop the window cannot overlap-add") {
  using W = presets::Window;
  // The periodic Hann, sqrt-Hann and Blackman windows are 0 at tap 0: with hop == n_fft no
  // other frame covers that sample.
  CHECK(error_of([] { presets::stft_synthesis({.n_fft = 512, .hop = 512, .window = W::kHann}); }) ==
        "stft: the hann window's square summed over frames hop=512 apart is 0 at phase 0 "
        "(n_fft=512); it must be >= 1e-11 everywhere (torch.istft's NOLA condition) for "
        "synthesis to invert analysis: use a smaller hop or a window without zeros");
  for (W w : {W::kSqrtHann, W::kBlackman}) {
    CHECK_THROWS_AS(presets::stft_synthesis({.n_fft = 100, .hop = 100, .window = w}), Error);
  }
  // The analysis alone is fine, and so is a window without zeros at the same hop.
  CHECK_NOTHROW(presets::stft_analysis({.n_fft = 512, .hop = 512, .window = W::kHann}));
  CHECK_NOTHROW(presets::stft_synthesis({.n_fft = 512, .hop = 512, .window = W::kHamming}));
}

TEST_CASE("presets: mel_fbanks equals torchaudio and |rfft(mel filter)| equals it at the bins") {
  double worst_fb = 0, worst_mag = 0;
  for (const json& c : manifest().at("mel")) {
    INFO("case " << c.at("name").get<std::string>());
    const presets::Mel o{.n_filters = c.at("n_filters"),
                         .n_fft = c.at("n_fft"),
                         .hop = 1,
                         .sample_rate = c.at("sample_rate"),
                         .f_min = c.at("f_min"),
                         .f_max = c.at("f_max")};
    const Tensor ref = load(c, "fbanks");  // (n_fft/2+1, n_filters), as torchaudio returns it
    const std::int64_t n_freqs = o.n_fft / 2 + 1;
    REQUIRE(ref.numel() == n_freqs * o.n_filters);
    const std::vector<double> expected(ref.data(), ref.data() + ref.numel());

    const std::vector<double> fb = presets::mel_fbanks(o);
    REQUIRE(fb.size() == expected.size());
    const double fb_err = rel_l2(fb, expected);
    CHECK(fb_err <= 1e-5);

    const Tensor filters = presets::mel_analysis(o);
    REQUIRE(filters.shape() == Shape{o.n_filters, 1, o.n_fft});
    std::vector<double> mag(expected.size());
    for (std::int64_t m = 0; m < o.n_filters; ++m) {
      const std::vector<double> col = dft_magnitude(filters.data() + m * o.n_fft, o.n_fft);
      for (std::int64_t k = 0; k < n_freqs; ++k) {
        mag[static_cast<std::size_t>(k * o.n_filters + m)] = col[static_cast<std::size_t>(k)];
      }
    }
    const double mag_err = rel_l2(mag, expected);
    CHECK(mag_err <= 1e-5);
    worst_fb = std::max(worst_fb, fb_err);
    worst_mag = std::max(worst_mag, mag_err);
  }
  MESSAGE("mel: worst relative L2 error of mel_fbanks " << worst_fb << ", of |rfft(filters)| "
                                                        << worst_mag);
}

TEST_CASE("presets: mel filters are linear-phase (symmetric about n_fft/2)") {
  for (std::int64_t n_fft : {512, 255}) {
    const Tensor f = presets::mel_analysis({.n_filters = 8, .n_fft = n_fft, .hop = n_fft / 4});
    for (std::int64_t m = 0; m < 8; ++m) {
      const float* h = f.data() + m * n_fft;
      double asym = 0, norm = 0;
      for (std::int64_t d = 1; d <= (n_fft - 1) / 2; ++d) {
        asym = std::max(asym, std::abs(static_cast<double>(h[n_fft / 2 + d]) - h[n_fft / 2 - d]));
        norm = std::max(norm, std::abs(static_cast<double>(h[n_fft / 2 + d])));
      }
      CHECK(asym <= 1e-6 * norm);
    }
  }
}

TEST_CASE("presets: param_sinc_analysis equals asteroid's ParamSincFB initialisation") {
  double worst = 0;
  for (const json& c : manifest().at("param_sinc")) {
    INFO("case " << c.at("name").get<std::string>());
    const presets::ParamSinc o{.n_filters = c.at("n_filters"),
                               .kernel_size = c.at("kernel_size"),
                               .stride = 1,
                               .sample_rate = c.at("sample_rate"),
                               .min_low_hz = c.at("min_low_hz"),
                               .min_band_hz = c.at("min_band_hz")};
    const Tensor ours = presets::param_sinc_analysis(o);
    const Tensor ref = load(c, "filters");
    REQUIRE(ours.shape() == ref.shape());
    CHECK(ours.shape().frames == (o.kernel_size | 1));
    const std::int64_t k = ref.shape().frames;
    for (std::int64_t f = 0; f < ref.shape().batch; ++f) {
      const double err = rel_l2(ours.data() + f * k, ref.data() + f * k, k);
      CHECK_MESSAGE(err <= 1e-5, "filter " << f);
      worst = std::max(worst, err);
    }
  }
  MESSAGE("param_sinc vs asteroid (NumPy): worst per-filter relative L2 error " << worst);
}

TEST_CASE("presets: gammatone filters equal scipy.signal.gammatone at ERB-rate centres") {
  double worst_f = 0, worst = 0;
  for (const json& c : manifest().at("gammatone")) {
    INFO("case " << c.at("name").get<std::string>());
    const presets::Gammatone o{.n_filters = c.at("n_filters"),
                               .kernel_size = c.at("kernel_size"),
                               .stride = 1,
                               .sample_rate = c.at("sample_rate"),
                               .f_min = c.at("f_min"),
                               .f_max = c.at("f_max")};
    const std::vector<double> centres = presets::gammatone_center_frequencies(o);
    const std::vector<double> expected = c.at("center_frequencies");
    REQUIRE(centres.size() == expected.size());
    for (std::size_t i = 0; i < centres.size(); ++i) {
      const double err = std::abs(centres[i] - expected[i]) / expected[i];
      CHECK(err <= 1e-12);
      worst_f = std::max(worst_f, err);
    }
    const Tensor ours = presets::gammatone_analysis(o);
    const Tensor ref = load(c, "filters");
    REQUIRE(ours.shape() == ref.shape());
    const std::int64_t k = o.kernel_size;
    for (std::int64_t f = 0; f < o.n_filters; ++f) {
      const double err = rel_l2(ours.data() + f * k, ref.data() + f * k, k);
      CHECK_MESSAGE(err <= 1e-5, "filter " << f);
      worst = std::max(worst, err);
    }
  }
  MESSAGE("gammatone: worst centre-frequency relative error "
          << worst_f << ", worst per-filter relative L2 " << worst);
}

TEST_CASE("presets: analytic_pair appends scipy.signal.hilbert(filters).imag") {
  double worst = 0;
  for (const json& c : manifest().at("analytic")) {
    INFO("case " << c.at("name").get<std::string>());
    const Tensor filters = load(c, "filters");
    const Tensor ref = load(c, "hilbert");
    const Tensor pair = presets::analytic_pair(filters);
    const Shape s = filters.shape();
    REQUIRE(pair.shape() == Shape{2 * s.batch, s.channels, s.frames});
    CHECK(std::equal(filters.data(), filters.data() + filters.numel(), pair.data()));
    const float* hilbert = pair.data() + filters.numel();
    for (std::int64_t r = 0; r < s.batch * s.channels; ++r) {
      // K = 1 and K = 2 hold only DC and Nyquist, whose transform is 0: an absolute check.
      const double err = rel_l2(hilbert + r * s.frames, ref.data() + r * s.frames, s.frames);
      CHECK_MESSAGE(err <= 1e-5, "row " << r);
      worst = std::max(worst, err);
    }
  }
  MESSAGE("analytic_pair vs scipy.signal.hilbert: worst per-row relative L2 error " << worst);
}

TEST_CASE("presets: pinv_synthesis equals numpy.linalg.pinv(W).T * stride / K") {
  double worst = 0;
  for (const json& c : manifest().at("pinv")) {
    INFO("case " << c.at("name").get<std::string>());
    const Tensor analysis = load(c, "analysis");
    const Tensor ref = load(c, "synthesis");
    const Tensor ours = presets::pinv_synthesis(analysis, c.at("stride").get<std::int64_t>());
    REQUIRE(ours.shape() == ref.shape());
    const double err = rel_l2(ours.data(), ref.data(), ref.numel());
    CHECK(err <= 1e-5);
    worst = std::max(worst, err);
  }
  MESSAGE("pinv_synthesis vs numpy.linalg.pinv: worst relative L2 error " << worst);
}

TEST_CASE("presets: pinv_synthesis of an STFT or a random bank reconstructs") {
  using W = presets::Window;
  double worst = 1e9;
  // STFT banks whose windows have no zero tap (full column rank), hop dividing n_fft.
  for (auto [n_fft, hop, window] :
       {std::tuple{64, 16, W::kHamming}, std::tuple{400, 100, W::kHamming},
        std::tuple{32, 8, W::kRectangular}, std::tuple{63, 21, W::kHamming},
        std::tuple{128, 128, W::kRectangular}}) {
    INFO("stft n_fft " << n_fft << " hop " << hop << " " << presets::to_string(window));
    const presets::Stft o{.n_fft = n_fft, .hop = hop, .window = window};
    const Tensor analysis = presets::stft_analysis(o);
    const double snr = round_trip_snr(analysis, presets::pinv_synthesis(analysis, hop), hop,
                                      presets::stft_padding(o), 4000, static_cast<unsigned>(n_fft));
    CHECK(snr >= 100);
    worst = std::min(worst, snr);
  }
  // Random banks with at least as many filters as taps, stride dividing K.
  for (auto [filters, k, stride] : {std::tuple{64, 32, 8}, std::tuple{40, 40, 20},
                                    std::tuple{256, 128, 32}, std::tuple{17, 16, 1}}) {
    INFO("random bank " << filters << " x " << k << " stride " << stride);
    Tensor analysis = random_signal(filters * k, static_cast<unsigned>(filters));
    analysis.set_rank(3);
    Tensor bank(Shape{filters, 1, k});
    std::copy(analysis.data(), analysis.data() + analysis.numel(), bank.data());
    const double snr =
        round_trip_snr(bank, presets::pinv_synthesis(bank, stride), stride, 0, 3000, 7);
    CHECK(snr >= 100);
    worst = std::min(worst, snr);
  }
  MESSAGE("pinv round trips: worst SNR " << worst << " dB");
}

TEST_CASE("presets: invalid options throw Error naming the option, the value and the rule") {
  using W = presets::Window;
  struct Case {
    std::function<void()> call;
    std::string message;
  };
  const Case cases[] = {
      {[] { presets::parse_window("kaiser"); },
       "window: must be one of hann, sqrt_hann, hamming, blackman, rect, got 'kaiser'"},
      {[] { presets::parse_window("", "--window"); },
       "--window: must be one of hann, sqrt_hann, hamming, blackman, rect, got ''"},
      {[] { presets::window(W::kHann, 0); }, "window: length must be >= 1, got 0"},
      // STFT
      {[] { presets::stft_analysis({.n_fft = 1, .hop = 1}); }, "stft: n_fft must be >= 2, got 1"},
      {[] { presets::stft_analysis({.n_fft = 512, .hop = 0}); },
       "stft: hop must be in [1, n_fft=512], got 0"},
      {[] { presets::stft_synthesis({.n_fft = 512, .hop = 513}); },
       "stft: hop must be in [1, n_fft=512], got 513"},
      {[] { presets::stft_padding({.n_fft = 0}); }, "stft: n_fft must be >= 2, got 0"},
      {[] { presets::stft_analysis({.window = static_cast<W>(9)}); },
       "stft: window must be one of hann, sqrt_hann, hamming, blackman, rect, got enum value 9"},
      // Mel
      {[] { presets::mel_analysis({.n_filters = 0}); }, "mel: n_filters must be >= 1, got 0"},
      {[] { presets::mel_fbanks({.n_fft = 1}); }, "mel: n_fft must be >= 2, got 1"},
      {[] { presets::mel_analysis({.n_fft = 256, .hop = 300}); },
       "mel: hop must be in [1, n_fft=256], got 300"},
      {[] { presets::mel_analysis({.sample_rate = 0}); },
       "mel: sample_rate must be a finite number > 0, got 0"},
      {[] { presets::mel_analysis({.sample_rate = -16000}); },
       "mel: sample_rate must be a finite number > 0, got -16000"},
      {[] { presets::mel_analysis({.f_min = -1}); }, "mel: f_min must be >= 0, got -1"},
      {[] { presets::mel_analysis({.sample_rate = 16000, .f_max = 8000.5}); },
       "mel: f_max must be in [0, sample_rate/2=8000] (0 means sample_rate/2), got 8000.5"},
      {[] { presets::mel_fbanks({.f_min = 4000, .f_max = 4000}); },
       "mel: f_min must be < f_max=4000, got 4000"},
      {[] { presets::mel_fbanks({.sample_rate = 16000, .f_min = 9000}); },
       "mel: f_min must be < f_max=8000, got 9000"},
      // ParamSinc
      {[] { presets::param_sinc_analysis({.n_filters = 63}); },
       "param_sinc: n_filters must be even and >= 2 (half cosine, half sine filters), got 63"},
      {[] { presets::param_sinc_analysis({.n_filters = 0}); },
       "param_sinc: n_filters must be even and >= 2 (half cosine, half sine filters), got 0"},
      {[] { presets::param_sinc_analysis({.kernel_size = 0}); },
       "param_sinc: kernel_size must be >= 1, got 0"},
      {[] { presets::param_sinc_analysis({.stride = 0}); },
       "param_sinc: stride must be >= 1, got 0"},
      {[] { presets::param_sinc_analysis({.sample_rate = 0}); },
       "param_sinc: sample_rate must be a finite number > 0, got 0"},
      {[] { presets::param_sinc_analysis({.min_low_hz = -5}); },
       "param_sinc: min_low_hz must be >= 0, got -5"},
      {[] { presets::param_sinc_analysis({.min_band_hz = 0}); },
       "param_sinc: min_band_hz must be > 0, got 0"},
      {[] { presets::param_sinc_analysis({.sample_rate = 200, .min_low_hz = 50}); },
       "param_sinc: min_low_hz + min_band_hz must be < sample_rate/2 - 30 = 70 (the initial "
       "cut-offs span 30 Hz to sample_rate/2 - min_low_hz - min_band_hz), got 100"},
      // Gammatone
      {[] { presets::gammatone_analysis({.n_filters = 0}); },
       "gammatone: n_filters must be >= 1, got 0"},
      {[] { presets::gammatone_analysis({.kernel_size = 0}); },
       "gammatone: kernel_size must be >= 1, got 0"},
      {[] { presets::gammatone_analysis({.stride = -1}); },
       "gammatone: stride must be >= 1, got -1"},
      {[] { presets::gammatone_center_frequencies({.sample_rate = 0}); },
       "gammatone: sample_rate must be a finite number > 0, got 0"},
      {[] { presets::gammatone_analysis({.f_min = 0}); },
       "gammatone: f_min must be in (0, sample_rate/2=8000) as scipy.signal.gammatone "
       "requires, got 0"},
      {[] { presets::gammatone_analysis({.sample_rate = 16000, .f_max = 8000}); },
       "gammatone: f_max must be in (0, sample_rate/2=8000) as scipy.signal.gammatone requires "
       "(0 means 0.9 * sample_rate/2), got 8000"},
      {[] { presets::gammatone_analysis({.f_min = 1000, .f_max = 500}); },
       "gammatone: f_min must be < f_max=500, got 1000"},
      {[] { presets::gammatone_analysis({.sample_rate = 16000, .f_min = 7500}); },
       "gammatone: f_min must be < f_max=7200, got 7500"},
      // Tensors
      {[] {
         presets::analytic_pair(Tensor(Shape{0, 1, 16}));
       },
       "analytic_pair: filters must not be empty, got shape (0, 1, 16)"},
      {[] {
         presets::pinv_synthesis(Tensor(Shape{4, 1, 0}), 1);
       },
       "pinv_synthesis: analysis must not be empty, got shape (4, 1, 0)"},
      {[] {
         presets::pinv_synthesis(Tensor::zeros(Shape{4, 2, 16}), 4);
       },
       "pinv_synthesis: analysis must have shape (n_filters, 1, kernel_size), got (4, 2, 16)"},
      {[] { presets::pinv_synthesis(Tensor::unbatched(4, 16), 4); },
       "pinv_synthesis: analysis must have shape (n_filters, 1, kernel_size), got (4, 16)"},
      {[] {
         presets::pinv_synthesis(Tensor::zeros(Shape{4, 1, 16}), 0);
       },
       "pinv_synthesis: stride must be in [1, kernel_size=16], got 0"},
      {[] {
         presets::pinv_synthesis(Tensor::zeros(Shape{4, 1, 16}), 17);
       },
       "pinv_synthesis: stride must be in [1, kernel_size=16], got 17"},
      {[] {
         Tensor t = Tensor::zeros(Shape{4, 1, 16});
         t.data()[20] = std::numeric_limits<float>::quiet_NaN();  // filter 1, tap 4
         presets::pinv_synthesis(t, 4);
       },
       "pinv_synthesis: analysis must be finite, got nan at filter 1 tap 4"},
  };
  for (const Case& c : cases) CHECK(error_of(c.call) == c.message);
}
