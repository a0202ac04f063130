// Streams prepared for Device::kCuda against the CPU offline forward() of the same layer or
// chain: random chunk sequences over a grid of layer arguments (reflect and replicate padding
// too), the TasNet chain, batches with per-stream reset, and the graph cache (replayed lengths
// capture nothing new). Relative L2
// <= 1e-6 (the GPU kernels sum in another order than the CPU).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/filterbank.hpp"
#include "convbank/runtime.hpp"
#include "convbank/stream.hpp"
#include "convbank/tensor.hpp"
#include "stream_helpers.hpp"

namespace {

using convbank::Conv1d;
using convbank::Conv1dOptions;
using convbank::Conv1dStream;
using convbank::ConvTranspose1d;
using convbank::ConvTranspose1dOptions;
using convbank::ConvTranspose1dStream;
using convbank::Device;
using convbank::Padding;
using convbank::Shape;
using convbank::Status;
using convbank::StreamChain;
using convbank::Tensor;
using stream_test::chunk_lengths;
using stream_test::random_tensor;
using stream_test::relative_l2;
using stream_test::run_stream;

constexpr double kTolerance = 1e-6;

#define SKIP_WITHOUT_CUDA()                          \
  do {                                               \
    if (!convbank::cuda_available()) {               \
      MESSAGE("CUDA device not available: skipped"); \
      return;                                        \
    }                                                \
  } while (0)

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  return *(values.begin() + rng() % values.size());
}

std::shared_ptr<Conv1d> make_conv(const Conv1dOptions& o, std::mt19937_64& rng) {
  auto layer = std::make_shared<Conv1d>(o);
  const float scale = 1.0f / static_cast<float>(o.in_channels / o.groups * o.kernel_size);
  layer->set_weight(random_tensor(Shape{o.out_channels, o.in_channels / o.groups, o.kernel_size},
                                  rng, std::sqrt(scale)));
  if (o.bias) layer->set_bias(random_tensor(Shape{1, 1, o.out_channels}, rng));
  return layer;
}

std::shared_ptr<ConvTranspose1d> make_transpose(const ConvTranspose1dOptions& o,
                                                std::mt19937_64& rng) {
  auto layer = std::make_shared<ConvTranspose1d>(o);
  const float scale = 1.0f / static_cast<float>(o.out_channels / o.groups * o.kernel_size);
  layer->set_weight(random_tensor(Shape{o.in_channels, o.out_channels / o.groups, o.kernel_size},
                                  rng, std::sqrt(scale)));
  if (o.bias) layer->set_bias(random_tensor(Shape{1, 1, o.out_channels}, rng));
  return layer;
}

Conv1dOptions random_conv_options(std::mt19937_64& rng) {
  Conv1dOptions o;
  const bool wide = rng() % 3 == 0;
  o.in_channels = wide ? pick<std::int64_t>(rng, {16, 32, 64}) : pick<std::int64_t>(rng, {1, 2, 4});
  o.groups = wide ? pick<std::int64_t>(rng, {1, 1, 2}) : 1;
  o.out_channels =
      o.groups * (wide ? pick<std::int64_t>(rng, {16, 32}) : pick<std::int64_t>(rng, {1, 2, 3}));
  o.kernel_size = pick<std::int64_t>(rng, {1, 2, 3, 5, 8, 16});
  o.stride = pick<std::int64_t>(rng, {1, 2, 3, 4, 8, 20});
  o.dilation = pick<std::int64_t>(rng, {1, 1, 2, 3});
  o.bias = rng() % 3 != 0;
  o.padding = rng() % 3 == 0
                  ? Padding::valid()
                  : Padding(static_cast<std::int64_t>(rng() % (o.dilation * o.kernel_size + 2)));
  return o;
}

ConvTranspose1dOptions random_transpose_options(std::mt19937_64& rng) {
  ConvTranspose1dOptions o;
  const bool wide = rng() % 3 == 0;
  o.in_channels = wide ? pick<std::int64_t>(rng, {16, 32, 64}) : pick<std::int64_t>(rng, {1, 2, 4});
  o.groups = wide ? pick<std::int64_t>(rng, {1, 2}) : 1;
  o.out_channels =
      o.groups * (wide ? pick<std::int64_t>(rng, {1, 8, 16}) : pick<std::int64_t>(rng, {1, 2, 3}));
  o.kernel_size = pick<std::int64_t>(rng, {1, 2, 3, 4, 7, 16});
  o.stride = pick<std::int64_t>(rng, {1, 2, 3, 4, 8, 20});
  o.dilation = pick<std::int64_t>(rng, {1, 1, 2});
  o.padding = static_cast<std::int64_t>(rng() % (o.dilation * o.kernel_size + o.stride + 1));
  const std::int64_t op_limit = std::max(o.stride, o.dilation);
  o.output_padding = rng() % 2 == 0 ? 0 : static_cast<std::int64_t>(rng() % op_limit);
  o.bias = rng() % 3 != 0;
  return o;
}

template <class Layer, class Stream>
void check_cuda_stream(const std::shared_ptr<Layer>& layer, std::int64_t batch, std::int64_t frames,
                       std::int64_t max_frames, std::mt19937_64& rng) {
  const Tensor x = random_tensor(Shape{batch, layer->options().in_channels, frames}, rng);
  const Tensor expected = layer->forward(x);  // CPU offline
  Stream stream(layer);
  stream.prepare(max_frames, batch, Device::kCuda);
  for (int round = 0; round < 2; ++round) {
    const auto chunks = chunk_lengths(frames, max_frames, layer->options().stride, rng);
    CAPTURE(round);
    bool ok = false;
    const Tensor got = run_stream(stream, x, chunks, &ok);
    REQUIRE(ok);
    REQUIRE(got.shape() == expected.shape());
    CHECK(relative_l2(got, expected) <= kTolerance);
    stream.reset();
  }
}

std::string describe(const Conv1dOptions& o) {
  std::ostringstream s;
  s << "Conv1d(in=" << o.in_channels << ", out=" << o.out_channels << ", K=" << o.kernel_size
    << ", stride=" << o.stride << ", padding=" << o.padding.to_string()
    << ", dilation=" << o.dilation << ", groups=" << o.groups << ", bias=" << o.bias << ")";
  return s.str();
}

std::string describe(const ConvTranspose1dOptions& o) {
  std::ostringstream s;
  s << "ConvTranspose1d(in=" << o.in_channels << ", out=" << o.out_channels
    << ", K=" << o.kernel_size << ", stride=" << o.stride << ", padding=" << o.padding
    << ", output_padding=" << o.output_padding << ", dilation=" << o.dilation
    << ", groups=" << o.groups << ", bias=" << o.bias << ")";
  return s.str();
}

StreamChain tasnet_chain(std::mt19937_64& rng, std::shared_ptr<Conv1d>* enc_out = nullptr,
                         std::shared_ptr<ConvTranspose1d>* dec_out = nullptr) {
  auto enc = make_conv(
      Conv1dOptions{.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8}, rng);
  auto dec = make_transpose(
      ConvTranspose1dOptions{.in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8},
      rng);
  StreamChain chain;
  chain.add(enc).add(dec);
  if (enc_out != nullptr) *enc_out = enc;
  if (dec_out != nullptr) *dec_out = dec;
  return chain;
}

}  // namespace

TEST_CASE("cuda:stream Conv1d equals the CPU offline forward over random chunks and arguments") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(20261130);
  int configs = 0;
  while (configs < 40) {
    const Conv1dOptions o = random_conv_options(rng);
    const auto layer = make_conv(o, rng);
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    const std::int64_t frames = std::uniform_int_distribution<std::int64_t>(1, 400)(rng);
    if (frames + layer->padding_left() + layer->padding_right() < span) continue;
    const std::int64_t batch = pick<std::int64_t>(rng, {1, 1, 2, 3});
    const std::int64_t max_frames = pick<std::int64_t>(rng, {1, 2, o.stride, 7, 64, 257});
    CAPTURE(describe(o));
    CAPTURE(frames);
    CAPTURE(batch);
    CAPTURE(max_frames);
    check_cuda_stream<Conv1d, Conv1dStream>(layer, batch, frames, max_frames, rng);
    ++configs;
  }
}

// Reflect and replicate padding on CUDA: the padding is built on the host from the first and
// last frames received and copied in with the call's work. Random layers and chunk sequences
// (padding up to the kernel span and beyond, stride above the span, reflect's left padding held
// back longer than the kernel's), a stream too short for reflect's rule, and the chain that
// refuses such a stage on CUDA.
TEST_CASE("cuda:stream Conv1d with reflect and replicate padding equals the CPU offline forward") {
  SKIP_WITHOUT_CUDA();
  using convbank::PaddingMode;
  std::mt19937_64 rng(20261203);
  int configs = 0, reflect = 0, held_back = 0;
  while (configs < 40) {
    Conv1dOptions o = random_conv_options(rng);
    o.padding_mode = rng() % 2 == 0 ? PaddingMode::kReflect : PaddingMode::kReplicate;
    const auto layer = make_conv(o, rng);
    const std::int64_t pl = layer->padding_left();
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    const std::int64_t frames = std::uniform_int_distribution<std::int64_t>(1, 400)(rng);
    if (!stream_test::copied_padding_case(*layer, frames)) continue;
    const std::int64_t batch = pick<std::int64_t>(rng, {1, 1, 2, 3});
    const std::int64_t max_frames = pick<std::int64_t>(rng, {1, 2, o.stride, 7, 64, 257});
    CAPTURE(describe(o));
    CAPTURE(convbank::to_string(o.padding_mode));
    CAPTURE(frames);
    CAPTURE(batch);
    CAPTURE(max_frames);
    check_cuda_stream<Conv1d, Conv1dStream>(layer, batch, frames, max_frames, rng);
    ++configs;
    reflect += o.padding_mode == PaddingMode::kReflect;
    held_back += o.padding_mode == PaddingMode::kReflect && pl > span - 1 - pl;
  }
  MESSAGE("reflect/replicate configs on CUDA: " << configs << " (reflect " << reflect
                                                << ", left padding held back " << held_back << ")");
  CHECK(reflect > 10);
  CHECK(held_back > 2);

  stream_test::check_short_reflect_stream(Device::kCuda, rng);

  // A chain's stages take their input on the device: such a stage is refused there.
  const auto reflecting = make_conv({.in_channels = 2,
                                     .out_channels = 3,
                                     .kernel_size = 9,
                                     .padding = 4,
                                     .padding_mode = PaddingMode::kReflect},
                                    rng);
  StreamChain chain;
  chain.add(reflecting);
  CHECK_THROWS_AS(chain.prepare(16, 1, Device::kCuda), convbank::Error);
}

TEST_CASE(
    "cuda:stream ConvTranspose1d equals the CPU offline forward over random chunks and arguments") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(20261131);
  int configs = 0;
  while (configs < 40) {
    const ConvTranspose1dOptions o = random_transpose_options(rng);
    const auto layer = make_transpose(o, rng);
    const std::int64_t frames = std::uniform_int_distribution<std::int64_t>(1, 300)(rng);
    if ((frames - 1) * o.stride - 2 * o.padding + o.dilation * (o.kernel_size - 1) +
            o.output_padding + 1 <
        1)
      continue;
    const std::int64_t batch = pick<std::int64_t>(rng, {1, 1, 2, 3});
    const std::int64_t max_frames = pick<std::int64_t>(rng, {1, 2, o.stride, 7, 64, 257});
    CAPTURE(describe(o));
    CAPTURE(frames);
    CAPTURE(batch);
    CAPTURE(max_frames);
    check_cuda_stream<ConvTranspose1d, ConvTranspose1dStream>(layer, batch, frames, max_frames,
                                                              rng);
    ++configs;
  }
}

TEST_CASE("cuda:stream TasNet chain equals the CPU offline chain, batch with per-stream reset") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(7);
  std::shared_ptr<Conv1d> enc;
  std::shared_ptr<ConvTranspose1d> dec;
  StreamChain chain = tasnet_chain(rng, &enc, &dec);
  for (const std::int64_t batch : {1, 3}) {
    CAPTURE(batch);
    const std::int64_t max_frames = 512;
    chain.prepare(max_frames, batch, Device::kCuda);
    const Tensor x = random_tensor(Shape{batch, 1, 3000}, rng);
    const Tensor expected = dec->forward(enc->forward(x));
    for (int round = 0; round < 2; ++round) {
      const auto chunks = chunk_lengths(3000, max_frames, 8, rng);
      bool ok = false;
      const Tensor got = run_stream(chain, x, chunks, &ok);
      REQUIRE(ok);
      REQUIRE(got.shape() == expected.shape());
      CHECK(relative_l2(got, expected) <= kTolerance);
      chain.reset();
    }
    // Per-stream reset: element 1 switches to a fresh signal at frame 1000 and is reset there;
    // the CUDA chain must match the CPU chain over the same calls (the CPU stream defines what
    // reset(b) carries), and the other elements must still equal the offline chain.
    if (batch > 1) {
      Tensor feed = x.to(Device::kCpu);
      const Tensor fresh = random_tensor(Shape{1, 1, 2000}, rng);
      for (std::int64_t t = 1000; t < 3000; ++t)
        feed.view().channel(1, 0)[t] = fresh.data()[t - 1000];
      auto run = [&](StreamChain& c) {
        stream_test::Collected got;
        got.init(batch, 1);
        Tensor out(
            Shape{batch, 1, std::max(c.max_output_frames(max_frames), c.max_flush_frames())});
        std::int64_t at = 0;
        for (const std::int64_t n : {400, 300, 300, 333, 167, 500, 500, 500}) {
          if (at == 1000) REQUIRE(c.reset(1) == Status::kOk);
          std::int64_t frames = 0;
          REQUIRE(c.process(feed.view().slice_frames(at, n), out.view(), &frames) == Status::kOk);
          got.append(out, frames);
          at += n;
        }
        std::int64_t frames = 0;
        REQUIRE(c.flush(out.view(), &frames) == Status::kOk);
        got.append(out, frames);
        return got.tensor();
      };
      StreamChain cpu;
      cpu.add(enc).add(dec);
      cpu.prepare(max_frames, batch);
      const Tensor want = run(cpu);
      const Tensor got = run(chain);
      REQUIRE(got.shape() == want.shape());
      CHECK(relative_l2(got, want) <= kTolerance);
      for (const std::int64_t b : {std::int64_t{0}, batch - 1}) {
        Tensor g(Shape{1, 1, got.shape().frames}), e(Shape{1, 1, got.shape().frames});
        std::copy(got.view().channel(b, 0), got.view().channel(b, 0) + got.shape().frames,
                  g.data());
        std::copy(expected.view().channel(b, 0), expected.view().channel(b, 0) + got.shape().frames,
                  e.data());
        CHECK(relative_l2(g, e) <= kTolerance);
      }
      chain.reset();
    }
  }
}

TEST_CASE("cuda:stream graph cache: repeated lengths replay, new lengths capture") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(11);
  std::shared_ptr<Conv1d> enc;
  std::shared_ptr<ConvTranspose1d> dec;
  StreamChain chain = tasnet_chain(rng, &enc, &dec);
  chain.prepare(1024, 1, Device::kCuda);
  CHECK(chain.cuda_graphs() == 0);
  // 256 is a multiple of the stride: after the first call the state repeats exactly.
  const Tensor x = random_tensor(Shape{1, 1, 256 * 40 + 100 * 20}, rng);
  const Tensor expected = dec->forward(enc->forward(x));
  Tensor out(Shape{1, 1, std::max(chain.max_output_frames(1024), chain.max_flush_frames())});
  stream_test::Collected got;
  got.init(1, 1);
  std::int64_t at = 0;
  std::size_t after_256 = 0;
  for (int i = 0; i < 40; ++i) {
    std::int64_t frames = 0;
    REQUIRE(chain.process(x.view().slice_frames(at, 256), out.view(), &frames) == Status::kOk);
    got.append(out, frames);
    at += 256;
    if (i == 3) after_256 = chain.cuda_graphs();
  }
  CHECK(after_256 >= 1);
  CHECK(after_256 <= 3);
  CHECK(chain.cuda_graphs() == after_256);  // replayed, not captured again
  // A new length (100 is not a multiple of 8): a few phases, then replay.
  std::size_t after_100 = 0;
  for (int i = 0; i < 20; ++i) {
    std::int64_t frames = 0;
    REQUIRE(chain.process(x.view().slice_frames(at, 100), out.view(), &frames) == Status::kOk);
    got.append(out, frames);
    at += 100;
    if (i == 9) after_100 = chain.cuda_graphs();
  }
  CHECK(after_100 > after_256);
  CHECK(chain.cuda_graphs() == after_100);
  std::int64_t frames = 0;
  REQUIRE(chain.flush(out.view(), &frames) == Status::kOk);
  got.append(out, frames);
  const Tensor g = got.tensor();
  REQUIRE(g.shape() == expected.shape());
  CHECK(relative_l2(g, expected) <= kTolerance);
  MESSAGE("graphs after 40 x 256 + 20 x 100 frames: " << chain.cuda_graphs());

  // warm_up() captures ahead of time; then streaming those lengths captures nothing.
  StreamChain warm = tasnet_chain(rng);
  warm.prepare(4096, 8, Device::kCuda);
  warm.warm_up({64, 128, 256});
  const std::size_t warmed = warm.cuda_graphs();
  CHECK(warmed >= 3);
  Tensor in = random_tensor(Shape{8, 1, 256}, rng);
  Tensor o8(Shape{8, 1, warm.max_output_frames(256)});
  for (int i = 0; i < 10; ++i) {
    std::int64_t f = 0;
    REQUIRE(warm.process(in.view(), o8.view(), &f) == Status::kOk);
    REQUIRE(warm.process(in.view().slice_frames(0, 64), o8.view(), &f) == Status::kOk);
    REQUIRE(warm.process(in.view().slice_frames(0, 128), o8.view(), &f) == Status::kOk);
  }
  CHECK(warm.cuda_graphs() <= warmed + 2);  // mixing lengths visits a few new phases at most
}

TEST_CASE("cuda:stream prepare on CUDA rejects bad arguments and single layers stream too") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(3);
  auto enc = make_conv(
      Conv1dOptions{.in_channels = 1, .out_channels = 64, .kernel_size = 16, .stride = 8}, rng);
  Conv1dStream s(enc);
  CHECK_THROWS(s.prepare(0, 1, Device::kCuda));
  s.prepare(256, 2, Device::kCuda);
  Tensor in = random_tensor(Shape{2, 1, 256}, rng);
  Tensor out(Shape{2, 64, s.max_output_frames(256)});
  std::int64_t frames = -1;
  CHECK(s.process(in.view().slice_frames(0, 0), out.view(), &frames) == Status::kInvalidArgument);
  CHECK(frames == 0);
  CHECK(s.process(in.view(), out.view(), &frames) == Status::kOk);
  CHECK(frames == s.max_output_frames(256) - 1);
}

TEST_CASE("cuda:stream FilterBankStream on the GPU equals the CPU stream, every effect") {
  SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(31);
  std::normal_distribution<float> d(0.0f, 0.3f);
  Tensor x(Shape{1, 2, 20000});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = d(rng);
  // The stft preset's center padding as zeros, and as torch.stft's reflect and replicate.
  struct Case {
    const char* spec;
    const char* effect;
  };
  for (const Case k :
       {Case{"stft:n_fft=512,hop=128", "none"}, Case{"stft:n_fft=512,hop=128", "gain:0-20=-12"},
        Case{"stft:n_fft=512,hop=128", "denoise"},
        Case{"stft:n_fft=512,hop=128,pad_mode=reflect", "denoise"},
        Case{"stft:n_fft=512,hop=128,pad_mode=replicate", "none"}}) {
    const char* effect = k.effect;
    CAPTURE(k.spec);
    CAPTURE(effect);
    const auto bank =
        std::make_shared<convbank::FilterBank>(convbank::FilterBank::from_spec(k.spec));
    std::vector<float> got[2];
    for (const Device device : {Device::kCpu, Device::kCuda}) {
      convbank::FilterBankStream stream(bank, convbank::make_effect(effect, *bank, 16000));
      stream.prepare(480, 2, 1, device);
      Tensor out(Shape{1, 2, std::max(stream.max_output_frames(480), stream.max_flush_frames())});
      std::vector<float>& g = got[device == Device::kCuda ? 1 : 0];
      const auto keep = [&](std::int64_t n) {
        for (std::int64_t c = 0; c < 2; ++c) {
          g.insert(g.end(), out.view().channel(0, c), out.view().channel(0, c) + n);
        }
      };
      for (std::int64_t at = 0; at < x.shape().frames; at += 480) {
        const std::int64_t n = std::min<std::int64_t>(480, x.shape().frames - at);
        std::int64_t produced = 0;
        REQUIRE(stream.process(x.view().slice_frames(at, n), out.view(), &produced) == Status::kOk);
        keep(produced);
      }
      std::int64_t produced = 0;
      REQUIRE(stream.flush(out.view(), &produced) == Status::kOk);
      keep(produced);
    }
    REQUIRE(got[0].size() == got[1].size());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got[0].size(); ++i) {
      num += (got[0][i] - got[1][i]) * double(got[0][i] - got[1][i]);
      den += got[0][i] * double(got[0][i]);
    }
    MESSAGE(std::string(k.spec) << ", " << effect << ": relative L2 GPU vs CPU stream "
                                << std::sqrt(num / den));
    CHECK(std::sqrt(num / den) <= 1e-5);
  }
}
