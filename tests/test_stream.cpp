// Streams against the offline forward() of the same layer or chain: over random chunk-length
// sequences and a random grid of layer arguments. Direct-path shapes (groups of one or two
// channels) must match bit for bit; GEMM and Winograd shapes sum in another order (Eigen's
// kernels treat a block's tail frames differently, Winograd tiles align to the call) and must
// match to 1e-6 relative L2 (docs/streaming.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/runtime.hpp"
#include "convbank/stream.hpp"
#include "convbank/tensor.hpp"
#include "core/backend.hpp"
#include "cpu/workspace.hpp"
#include "stream_helpers.hpp"

namespace {

using convbank::Conv1d;
using convbank::Conv1dOptions;
using convbank::Conv1dStream;
using convbank::ConvTranspose1d;
using convbank::ConvTranspose1dOptions;
using convbank::ConvTranspose1dStream;
using convbank::Padding;
using convbank::Shape;
using convbank::Status;
using convbank::StreamChain;
using convbank::Tensor;
using stream_test::bit_equal;
using stream_test::chunk_lengths;
using stream_test::copied_padding_case;
using stream_test::random_tensor;
using stream_test::relative_l2;
using stream_test::run_stream;

constexpr double kTolerance = 1e-6;

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  return *(values.begin() + rng() % values.size());
}

std::int64_t divisor_of(std::int64_t n, std::mt19937_64& rng) {
  std::vector<std::int64_t> d;
  for (std::int64_t g = 1; g <= n; ++g)
    if (n % g == 0) d.push_back(g);
  return d[rng() % d.size()];
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

// The layers whose CPU path is the direct formula: streamed outputs must equal the offline ones
// bit for bit there.
bool direct_shape(const ConvTranspose1dOptions& o) {
  return o.in_channels / o.groups <= 2 && o.out_channels / o.groups <= 2;
}
bool direct_shape(const Conv1dOptions& o) {
  convbank::detail::Conv1dParams p;
  p.in_channels = o.in_channels;
  p.out_channels = o.out_channels;
  p.groups = o.groups;
  p.stride = o.stride;
  p.kernel_size = o.kernel_size;
  p.dilation = o.dilation;
  return convbank::detail::cpu::conv1d_is_direct(p);
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

Conv1dOptions random_conv_options(std::mt19937_64& rng) {
  Conv1dOptions o;
  const bool wide = rng() % 4 == 0;  // GEMM and Winograd shapes
  o.in_channels =
      wide ? pick<std::int64_t>(rng, {16, 24, 32}) : pick<std::int64_t>(rng, {1, 2, 3, 4, 6, 8});
  o.groups = wide ? pick<std::int64_t>(rng, {1, 1, 2}) : divisor_of(o.in_channels, rng);
  o.out_channels =
      o.groups * (wide ? pick<std::int64_t>(rng, {16, 20}) : pick<std::int64_t>(rng, {1, 2, 3, 4}));
  o.kernel_size = pick<std::int64_t>(rng, {1, 2, 3, 3, 5, 8, 16, 31});
  o.stride = pick<std::int64_t>(rng, {1, 1, 2, 3, 4, 8, 20});
  o.dilation = pick<std::int64_t>(rng, {1, 1, 1, 2, 3});
  o.bias = rng() % 3 != 0;
  switch (rng() % 5) {
    case 0:
      o.padding = o.stride == 1 ? Padding::same() : Padding(0);
      break;
    case 1:
      o.padding = Padding::valid();
      break;
    default:
      o.padding = Padding(static_cast<std::int64_t>(rng() % (o.dilation * o.kernel_size + 3)));
  }
  return o;
}

ConvTranspose1dOptions random_transpose_options(std::mt19937_64& rng) {
  ConvTranspose1dOptions o;
  const bool wide = rng() % 4 == 0;
  o.in_channels =
      wide ? pick<std::int64_t>(rng, {16, 32}) : pick<std::int64_t>(rng, {1, 2, 3, 4, 6});
  o.groups = wide ? pick<std::int64_t>(rng, {1, 2}) : divisor_of(o.in_channels, rng);
  o.out_channels =
      o.groups * (wide ? pick<std::int64_t>(rng, {1, 8, 16}) : pick<std::int64_t>(rng, {1, 2, 3}));
  o.kernel_size = pick<std::int64_t>(rng, {1, 2, 3, 4, 7, 16, 33});
  o.stride = pick<std::int64_t>(rng, {1, 1, 2, 3, 4, 8, 20});
  o.dilation = pick<std::int64_t>(rng, {1, 1, 2, 3});
  o.padding = static_cast<std::int64_t>(rng() % (o.dilation * o.kernel_size + o.stride + 2));
  const std::int64_t op_limit = std::max(o.stride, o.dilation);
  o.output_padding = rng() % 2 == 0 ? 0 : static_cast<std::int64_t>(rng() % op_limit);
  o.bias = rng() % 3 != 0;
  return o;
}

struct Tally {
  int configs = 0;
  int bit_exact_required = 0;
  int gemm_bit_exact = 0;
  int gemm = 0;
};

template <class Layer, class Stream>
void check_stream_against_offline(const std::shared_ptr<Layer>& layer, std::int64_t batch,
                                  std::int64_t frames, std::int64_t max_frames, bool exact,
                                  std::mt19937_64& rng, Tally& tally) {
  const Tensor x = random_tensor(Shape{batch, layer->options().in_channels, frames}, rng);
  const Tensor expected = layer->forward(x);
  Stream stream(layer);
  stream.prepare(max_frames, batch);
  // Twice: reset() must bring the stream back to its initial state.
  for (int round = 0; round < 2; ++round) {
    const std::vector<std::int64_t> chunks =
        chunk_lengths(frames, max_frames, layer->options().stride, rng);
    CAPTURE(round);
    CAPTURE(chunks.size());
    bool ok = false;
    const Tensor got = run_stream(stream, x, chunks, &ok);
    REQUIRE(ok);
    REQUIRE(got.shape() == expected.shape());
    if (exact) {
      CHECK(bit_equal(got, expected));
    } else {
      CHECK(relative_l2(got, expected) <= kTolerance);
      tally.gemm_bit_exact += round == 0 && bit_equal(got, expected);
    }
    stream.reset();
  }
  ++tally.configs;
  tally.bit_exact_required += exact;
  tally.gemm += !exact;
}

// Runs a prepared chain over x `rounds` times in random chunks of at most max_frames (reset
// between), each against the offline `expected`.
void check_chain_rounds(StreamChain& chain, const Tensor& x, const Tensor& expected,
                        std::int64_t max_frames, std::int64_t stride, int rounds,
                        std::mt19937_64& rng) {
  for (int round = 0; round < rounds; ++round) {
    CAPTURE(round);
    bool ok = false;
    const Tensor got =
        run_stream(chain, x, chunk_lengths(x.shape().frames, max_frames, stride, rng), &ok);
    CHECK(ok);
    REQUIRE(got.shape() == expected.shape());
    CHECK(relative_l2(got, expected) <= kTolerance);
    chain.reset();
  }
}

}  // namespace

TEST_CASE("stream: Conv1d equals offline forward over random chunks and layer arguments") {
  std::mt19937_64 rng(20261129);
  Tally tally;
  while (tally.configs < 220) {
    const Conv1dOptions o = random_conv_options(rng);
    const auto layer = make_conv(o, rng);
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    const std::int64_t frames = std::uniform_int_distribution<std::int64_t>(1, 300)(rng);
    if (frames + layer->padding_left() + layer->padding_right() < span) continue;
    const std::int64_t batch = pick<std::int64_t>(rng, {1, 1, 2, 3});
    const std::int64_t max_frames =
        std::max<std::int64_t>(1, pick<std::int64_t>(rng, {1, 2, o.stride, 7, 16, 64, 257}));
    CAPTURE(describe(o));
    CAPTURE(frames);
    CAPTURE(batch);
    CAPTURE(max_frames);
    check_stream_against_offline<Conv1d, Conv1dStream>(layer, batch, frames, max_frames,
                                                       direct_shape(o), rng, tally);
  }
  MESSAGE("Conv1d configs: " << tally.configs << ", bit-exact required (direct path): "
                             << tally.bit_exact_required << ", GEMM/Winograd: " << tally.gemm
                             << " (of which bit-exact anyway: " << tally.gemm_bit_exact << ")");
  CHECK(tally.bit_exact_required > 50);
  CHECK(tally.gemm > 20);
}

// Layers of few outputs and many inputs per group (a vocoder's last layer): the direct path sums
// chunks of channels from zero before adding them up (kDirectChainTerms), the same order in
// every path, so streamed chunks cut anywhere still equal the offline call bit for bit.
TEST_CASE("stream: Conv1d of few outputs and deep reductions equals offline forward") {
  std::mt19937_64 rng(84);
  Tally tally;
  const Conv1dOptions layers[] = {
      {.in_channels = 32, .out_channels = 1, .kernel_size = 7, .padding = 3},
      {.in_channels = 64, .out_channels = 2, .kernel_size = 7, .padding = Padding::same()},
      {.in_channels = 96, .out_channels = 4, .kernel_size = 16, .padding = 2, .dilation = 2},
      {.in_channels = 2 * 40, .out_channels = 2 * 3, .kernel_size = 31, .padding = 15, .groups = 2},
  };
  for (const auto& o : layers) {
    CAPTURE(describe(o));
    const auto layer = make_conv(o, rng);
    for (const std::int64_t max_frames : {1, 7, 64, 333}) {
      CAPTURE(max_frames);
      check_stream_against_offline<Conv1d, Conv1dStream>(layer, 2, 1000, max_frames,
                                                         direct_shape(o), rng, tally);
    }
  }
  MESSAGE("few-output Conv1d configs: " << tally.configs
                                        << ", bit-exact required: " << tally.bit_exact_required);
  CHECK(tally.configs == 16);
}

TEST_CASE("stream: ConvTranspose1d equals offline forward over random chunks and layer arguments") {
  std::mt19937_64 rng(42);
  Tally tally;
  while (tally.configs < 220) {
    const ConvTranspose1dOptions o = random_transpose_options(rng);
    const auto layer = make_transpose(o, rng);
    const std::int64_t frames = std::uniform_int_distribution<std::int64_t>(1, 120)(rng);
    if ((frames - 1) * o.stride - 2 * o.padding + o.dilation * (o.kernel_size - 1) +
            o.output_padding + 1 <
        1) {
      continue;
    }
    const std::int64_t batch = pick<std::int64_t>(rng, {1, 1, 2, 3});
    const std::int64_t max_frames =
        std::max<std::int64_t>(1, pick<std::int64_t>(rng, {1, 2, o.stride, 7, 16, 64, 257}));
    CAPTURE(describe(o));
    CAPTURE(frames);
    CAPTURE(batch);
    CAPTURE(max_frames);
    check_stream_against_offline<ConvTranspose1d, ConvTranspose1dStream>(
        layer, batch, frames, max_frames, direct_shape(o), rng, tally);
  }
  MESSAGE("ConvTranspose1d configs: " << tally.configs << ", bit-exact required (direct path): "
                                      << tally.bit_exact_required << ", GEMM: " << tally.gemm
                                      << " (of which bit-exact anyway: " << tally.gemm_bit_exact
                                      << ")");
  CHECK(tally.bit_exact_required > 50);
  CHECK(tally.gemm > 20);
}

TEST_CASE("stream: kernel longer than every chunk, and stride longer than the kernel") {
  std::mt19937_64 rng(3);
  Tally tally;
  Conv1dOptions c;
  c.in_channels = 2;
  c.out_channels = 2;
  c.kernel_size = 64;
  c.dilation = 3;
  c.padding = 40;
  check_stream_against_offline<Conv1d, Conv1dStream>(make_conv(c, rng), 2, 500, 5, true, rng,
                                                     tally);
  c.kernel_size = 2;
  c.dilation = 1;
  c.stride = 9;  // frames between windows are never read: the stream skips them
  c.padding = 1;
  check_stream_against_offline<Conv1d, Conv1dStream>(make_conv(c, rng), 1, 300, 4, true, rng,
                                                     tally);
  ConvTranspose1dOptions t;
  t.in_channels = 2;
  t.out_channels = 1;
  t.kernel_size = 50;
  t.stride = 3;
  t.padding = 60;  // more than the kernel's reach: frames wait for the right-hand trim
  t.output_padding = 2;
  check_stream_against_offline<ConvTranspose1d, ConvTranspose1dStream>(make_transpose(t, rng), 2,
                                                                       200, 3, true, rng, tally);
}

namespace {

// Runs `stream` (batch 3) over x in chunks, calling reset(1) after the first `cut` frames.
// Element 1 must continue exactly as if its first `cut` frames had been zeros.
template <class Layer, class Stream>
void check_reset_one(const std::shared_ptr<Layer>& layer, std::int64_t frames, std::int64_t cut,
                     std::int64_t max_frames, bool exact, std::mt19937_64& rng) {
  const std::int64_t batch = 3;
  const Tensor x = random_tensor(Shape{batch, layer->options().in_channels, frames}, rng);
  Stream stream(layer);
  stream.prepare(max_frames, batch);
  Tensor out(Shape{batch, stream.out_channels(),
                   std::max(stream.max_output_frames(max_frames), stream.max_flush_frames()) + 1});
  stream_test::Collected got;
  got.init(batch, stream.out_channels());
  std::int64_t at = 0;
  std::int64_t before_reset = 0;
  std::vector<std::int64_t> chunks = chunk_lengths(cut, max_frames, layer->options().stride, rng);
  for (std::int64_t n : chunk_lengths(frames - cut, max_frames, layer->options().stride, rng)) {
    chunks.push_back(n);
  }
  for (std::int64_t n : chunks) {
    if (at == cut) {
      before_reset = got.frames();
      REQUIRE(stream.reset(1) == Status::kOk);
    }
    std::int64_t produced = 0;
    REQUIRE(stream_test::feed(stream, x, at, n, out, got, &produced) == Status::kOk);
    at += n;
  }
  std::int64_t produced = 0;
  REQUIRE(stream.flush(out.view(), &produced) == Status::kOk);
  got.append(out, produced);
  const Tensor streamed = got.tensor();

  const Tensor expected = layer->forward(x);
  Tensor zeroed = x.clone();
  for (std::int64_t c = 0; c < x.shape().channels; ++c) {
    std::fill(zeroed.view().channel(1, c), zeroed.view().channel(1, c) + cut, 0.0f);
  }
  const Tensor expected_after = layer->forward(zeroed);
  REQUIRE(streamed.shape() == expected.shape());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t c = 0; c < streamed.shape().channels; ++c) {
      const float* s = streamed.view().channel(b, c);
      const float* e = expected.view().channel(b, c);
      const float* ea = expected_after.view().channel(b, c);
      for (std::int64_t t = 0; t < streamed.shape().frames; ++t) {
        const float want = (b == 1 && t >= before_reset) ? ea[t] : e[t];
        if (exact) {
          REQUIRE_MESSAGE(s[t] == want, "b " << b << " c " << c << " t " << t);
        } else {
          REQUIRE_MESSAGE(std::abs(s[t] - want) <= 1e-5f * (1.0f + std::abs(want)),
                          "b " << b << " c " << c << " t " << t);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("stream: batch of independent streams with reset of one in the middle") {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 40; ++i) {
    Conv1dOptions c = random_conv_options(rng);
    const auto conv = make_conv(c, rng);
    const std::int64_t span = c.dilation * (c.kernel_size - 1) + 1;
    CAPTURE(describe(c));
    if (160 + conv->padding_left() + conv->padding_right() >= span) {
      check_reset_one<Conv1d, Conv1dStream>(conv, 160, 64, 8, direct_shape(c), rng);
    }
    ConvTranspose1dOptions t = random_transpose_options(rng);
    CAPTURE(describe(t));
    if (79 * t.stride - 2 * t.padding + t.dilation * (t.kernel_size - 1) + t.output_padding < 0) {
      continue;
    }
    check_reset_one<ConvTranspose1d, ConvTranspose1dStream>(make_transpose(t, rng), 80, 40, 8,
                                                            direct_shape(t), rng);
  }
}

namespace {

// Index of the input frame whose process() call emitted each output frame, feeding one frame
// per call (-1: emitted by flush).
template <class Stream>
std::vector<std::int64_t> emission_calls(Stream& stream, std::int64_t in_channels,
                                         std::int64_t frames) {
  stream.prepare(1, 1);
  Tensor x = Tensor::zeros(Shape{1, in_channels, frames});
  Tensor out(Shape{1, stream.out_channels(),
                   std::max(stream.max_output_frames(1), stream.max_flush_frames()) + 1});
  std::vector<std::int64_t> when;
  for (std::int64_t j = 0; j < frames; ++j) {
    std::int64_t n = 0;
    REQUIRE(stream.process(x.view().slice_frames(j, 1), out.view(), &n) == Status::kOk);
    when.insert(when.end(), static_cast<std::size_t>(n), j);
  }
  std::int64_t n = 0;
  REQUIRE(stream.flush(out.view(), &n) == Status::kOk);
  when.insert(when.end(), static_cast<std::size_t>(n), -1);
  return when;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

}  // namespace

TEST_CASE("stream: latency_frames follows the documented emission rule") {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 150; ++i) {
    const Conv1dOptions o = random_conv_options(rng);
    CAPTURE(describe(o));
    const auto layer = make_conv(o, rng);
    Conv1dStream stream(layer);
    const std::int64_t frames = 60;
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    if (frames + layer->padding_left() + layer->padding_right() < span) continue;
    const std::vector<std::int64_t> when = emission_calls(stream, o.in_channels, frames);
    CHECK(stream.latency_frames() == o.dilation * (o.kernel_size - 1) - layer->padding_left());
    for (std::size_t t = 0; t < when.size(); ++t) {
      const std::int64_t rule = std::max<std::int64_t>(
          0, static_cast<std::int64_t>(t) * o.stride + stream.latency_frames());
      CAPTURE(t);
      if (rule < frames) {
        CHECK(when[t] == rule);
      } else {
        CHECK(when[t] == -1);
      }
    }
  }
  for (int i = 0; i < 150; ++i) {
    const ConvTranspose1dOptions o = random_transpose_options(rng);
    CAPTURE(describe(o));
    const auto layer = make_transpose(o, rng);
    ConvTranspose1dStream stream(layer);
    const std::int64_t frames = 40;
    if ((frames - 1) * o.stride - 2 * o.padding + o.dilation * (o.kernel_size - 1) +
            o.output_padding + 1 <
        1) {
      continue;
    }
    const std::vector<std::int64_t> when = emission_calls(stream, o.in_channels, frames);
    for (std::size_t t = 0; t < when.size(); ++t) {
      const std::int64_t last_input = floor_div(static_cast<std::int64_t>(t) + o.padding, o.stride);
      CAPTURE(t);
      if (when[t] < 0) {
        // Flushed: only frames that no delivered input finished, or that the trim could drop.
        CHECK(last_input + stream.latency_frames() >= frames);
        continue;
      }
      CHECK(when[t] >= last_input);
      CHECK(when[t] - last_input <= stream.latency_frames());
    }
    // No padding and frames between inputs covered by the kernel: nothing waits.
    if (o.padding == 0 && o.dilation * (o.kernel_size - 1) + o.output_padding + 1 >= o.stride) {
      CHECK(stream.latency_frames() == 0);
    }
  }
}

TEST_CASE("stream: TasNet chain latency is the sum and emission composes") {
  std::mt19937_64 rng(8);
  const auto enc =
      make_conv({.in_channels = 1, .out_channels = 32, .kernel_size = 16, .stride = 8}, rng);
  const auto dec =
      make_transpose({.in_channels = 32, .out_channels = 1, .kernel_size = 16, .stride = 8}, rng);
  StreamChain chain;
  chain.add(enc).add(dec);
  CHECK(chain.latency_frames() == 15);
  CHECK(Conv1dStream(enc).latency_frames() + 8 * ConvTranspose1dStream(dec).latency_frames() == 15);
  const std::vector<std::int64_t> when = emission_calls(chain, 1, 200);
  for (std::size_t u = 0; u < when.size(); ++u) {
    const std::int64_t rule = 8 * (static_cast<std::int64_t>(u) / 8) + 15;
    CAPTURE(u);
    if (rule < 200) {
      CHECK(when[u] == rule);
      CHECK(when[u] - static_cast<std::int64_t>(u) <= chain.latency_frames());
    } else {
      CHECK(when[u] == -1);
    }
  }
}

TEST_CASE("stream: chains equal the offline chain") {
  std::mt19937_64 rng(13);
  SUBCASE("TasNet encoder -> decoder") {
    for (std::int64_t channels : {64, 512}) {
      const auto enc = make_conv(
          {.in_channels = 1, .out_channels = channels, .kernel_size = 16, .stride = 8}, rng);
      const auto dec = make_transpose(
          {.in_channels = channels, .out_channels = 1, .kernel_size = 16, .stride = 8}, rng);
      for (std::int64_t batch : {1, 2}) {
        const Tensor x = random_tensor(Shape{batch, 1, 3001}, rng);
        const Tensor expected = dec->forward(enc->forward(x));
        StreamChain chain;
        chain.add(enc).add(dec);
        chain.prepare(300, batch);
        bool ok = false;
        const Tensor got = run_stream(chain, x, chunk_lengths(3001, 300, 8, rng), &ok);
        CHECK(ok);
        REQUIRE(got.shape() == expected.shape());
        CHECK(relative_l2(got, expected) <= kTolerance);
      }
    }
  }
  SUBCASE("stack of dilated convolutions") {
    StreamChain chain;
    std::vector<std::shared_ptr<Conv1d>> layers;
    std::int64_t latency = 0;
    for (std::int64_t d : {1, 2, 4, 8}) {
      // depthwise (bit-exact path) then pointwise, as in a TCN block
      layers.push_back(make_conv({.in_channels = 2,
                                  .out_channels = 2,
                                  .kernel_size = 3,
                                  .padding = Padding::same(),
                                  .dilation = d,
                                  .groups = 2},
                                 rng));
      latency += d * 2 - d;
      layers.push_back(make_conv({.in_channels = 2, .out_channels = 2, .kernel_size = 1}, rng));
    }
    for (const auto& l : layers) chain.add(l);
    CHECK(chain.latency_frames() == latency);
    const Tensor x = random_tensor(Shape{2, 2, 777}, rng);
    Tensor expected = x.clone();
    for (const auto& l : layers) expected = l->forward(expected);
    chain.prepare(50, 2);
    bool ok = false;
    const Tensor got = run_stream(chain, x, chunk_lengths(777, 50, 1, rng), &ok);
    CHECK(ok);
    CHECK(bit_equal(got, expected));
  }
  SUBCASE("strided encoder, upsampling decoder with padding and output_padding") {
    const auto a = make_conv({.in_channels = 3,
                              .out_channels = 24,
                              .kernel_size = 7,
                              .stride = 3,
                              .padding = 5,
                              .dilation = 2},
                             rng);
    const auto b = make_transpose({.in_channels = 24,
                                   .out_channels = 4,
                                   .kernel_size = 9,
                                   .stride = 3,
                                   .padding = 4,
                                   .output_padding = 1},
                                  rng);
    const auto c = make_conv(
        {.in_channels = 4, .out_channels = 2, .kernel_size = 5, .padding = 2, .groups = 2}, rng);
    StreamChain chain;
    chain.add(a).add(b).add(c);
    const Tensor x = random_tensor(Shape{1, 3, 1000}, rng);
    const Tensor expected = c->forward(b->forward(a->forward(x)));
    chain.prepare(97);
    check_chain_rounds(chain, x, expected, 97, 3, 3, rng);
  }
}

// Reflect and replicate padding stream: the left padding is filled once the frames it
// copies have arrived, the right padding at flush from the last frames kept. Random layers and
// chunk sequences as above (padding up to the kernel span and beyond, "same" with even kernels,
// stride above the span), reset(b), the emission rule, a stream too short for reflect's rule,
// and chains (CUDA: test_cuda_stream.cpp).
TEST_CASE("stream: reflect and replicate padding equal offline forward") {
  using convbank::PaddingMode;
  std::mt19937_64 rng(20261202);
  Tally tally;
  int reflect = 0;
  int held_back = 0;  // reflect layers whose left padding waits longer than the kernel does
  while (tally.configs < 200) {
    Conv1dOptions o = random_conv_options(rng);
    o.padding_mode = rng() % 2 == 0 ? PaddingMode::kReflect : PaddingMode::kReplicate;
    const auto layer = make_conv(o, rng);
    const std::int64_t pl = layer->padding_left();
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    const std::int64_t frames = std::uniform_int_distribution<std::int64_t>(1, 300)(rng);
    if (!copied_padding_case(*layer, frames)) continue;
    const std::int64_t batch = pick<std::int64_t>(rng, {1, 1, 2, 3});
    const std::int64_t max_frames =
        std::max<std::int64_t>(1, pick<std::int64_t>(rng, {1, 2, o.stride, 7, 16, 64, 257}));
    CAPTURE(describe(o));
    CAPTURE(convbank::to_string(o.padding_mode));
    CAPTURE(frames);
    CAPTURE(batch);
    CAPTURE(max_frames);
    check_stream_against_offline<Conv1d, Conv1dStream>(layer, batch, frames, max_frames,
                                                       direct_shape(o), rng, tally);
    reflect += o.padding_mode == PaddingMode::kReflect;
    held_back += o.padding_mode == PaddingMode::kReflect && pl > span - 1 - pl;
  }
  MESSAGE("reflect/replicate configs: " << tally.configs << " (reflect " << reflect
                                        << ", left padding held back " << held_back << ")");
  CHECK(reflect > 60);
  CHECK(held_back > 5);
  CHECK(tally.bit_exact_required > 50);

  // Emission: output t comes with the input frame t * stride + span - 1 - padding_left, and for
  // reflect not before frame padding_left (its left padding mirrors frames 1..padding_left).
  for (int i = 0; i < 120; ++i) {
    Conv1dOptions o = random_conv_options(rng);
    o.padding_mode = i % 2 == 0 ? PaddingMode::kReflect : PaddingMode::kReplicate;
    const auto layer = make_conv(o, rng);
    const std::int64_t frames = 60;
    const std::int64_t pl = layer->padding_left(), pr = layer->padding_right();
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    if (frames + pl + pr < span || frames <= pl || frames <= pr) continue;
    CAPTURE(describe(o));
    Conv1dStream stream(layer);
    const std::vector<std::int64_t> when = emission_calls(stream, o.in_channels, frames);
    const bool reflects = o.padding_mode == PaddingMode::kReflect && pl > 0;
    CHECK(stream.latency_frames() == (reflects ? std::max(span - 1 - pl, pl) : span - 1 - pl));
    for (std::size_t t = 0; t < when.size(); ++t) {
      std::int64_t rule = static_cast<std::int64_t>(t) * o.stride + span - 1 - pl;
      rule = std::max<std::int64_t>(rule, reflects ? pl : 0);
      CAPTURE(t);
      CHECK(when[t] == (rule < frames ? rule : -1));
      CHECK(rule <= std::max<std::int64_t>(
                        0, static_cast<std::int64_t>(t) * o.stride + stream.latency_frames()));
    }
  }

  // reset(b): element b continues as if it had received zeros (its padding copies them too).
  for (int i = 0; i < 30; ++i) {
    Conv1dOptions o = random_conv_options(rng);
    o.padding_mode = i % 2 == 0 ? PaddingMode::kReflect : PaddingMode::kReplicate;
    const auto layer = make_conv(o, rng);
    const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
    if (160 + layer->padding_left() + layer->padding_right() < span ||
        layer->padding_left() >= 160 || layer->padding_right() >= 160) {
      continue;
    }
    CAPTURE(describe(o));
    check_reset_one<Conv1d, Conv1dStream>(layer, 160, pick<std::int64_t>(rng, {1, 5, 64}), 8,
                                          direct_shape(o), rng);
  }

  stream_test::check_short_reflect_stream(convbank::Device::kCpu, rng);

  // In a chain: a reflect encoder, a decoder, a replicate smoother.
  const auto a = make_conv({.in_channels = 2,
                            .out_channels = 16,
                            .kernel_size = 8,
                            .stride = 4,
                            .padding = 3,
                            .padding_mode = PaddingMode::kReflect},
                           rng);
  const auto b = make_transpose(
      {.in_channels = 16, .out_channels = 3, .kernel_size = 8, .stride = 4, .padding = 2}, rng);
  const auto c = make_conv({.in_channels = 3,
                            .out_channels = 3,
                            .kernel_size = 5,
                            .padding = Padding::same(),
                            .groups = 3,
                            .padding_mode = PaddingMode::kReplicate},
                           rng);
  StreamChain chain;
  chain.add(a).add(b).add(c);
  chain.prepare(33, 2);
  const Tensor xc = random_tensor(Shape{2, 2, 901}, rng);
  const Tensor expected = c->forward(b->forward(a->forward(xc)));
  check_chain_rounds(chain, xc, expected, 33, 4, 2, rng);
}

TEST_CASE("stream: precondition violations return kInvalidArgument and change nothing") {
  std::mt19937_64 rng(1);
  const auto layer =
      make_conv({.in_channels = 2, .out_channels = 2, .kernel_size = 5, .stride = 2}, rng);
  Conv1dStream stream(layer);
  Tensor x = random_tensor(Shape{1, 2, 16}, rng);
  Tensor out(Shape{1, 2, 16});
  std::int64_t n = 7;
  CHECK(stream.process(x.view(), out.view(), &n) == Status::kInvalidArgument);  // not prepared
  CHECK(n == 0);
  stream.prepare(8);
  CHECK(stream.process(x.view(), out.view(), &n) == Status::kInvalidArgument);  // 16 > max 8
  CHECK(stream.process(x.view().slice_frames(0, 0), out.view(), &n) == Status::kInvalidArgument);
  Tensor wrong(Shape{1, 3, 8});
  CHECK(stream.process(wrong.view(), out.view(), &n) == Status::kInvalidArgument);
  Tensor wrong_batch(Shape{2, 2, 8});
  CHECK(stream.process(wrong_batch.view(), out.view(), &n) == Status::kInvalidArgument);
  CHECK(stream.process(x.view().slice_frames(0, 8), out.view().slice_frames(0, 1), &n) ==
        Status::kInvalidArgument);  // 8 frames make 2 outputs
  CHECK(stream.process(x.view().slice_frames(0, 8), out.view(), nullptr) ==
        Status::kInvalidArgument);
  const convbank::TensorView<const float> on_gpu(x.data(), Shape{1, 2, 8}, convbank::Device::kCuda);
  CHECK(stream.process(on_gpu, out.view(), &n) == Status::kInvalidArgument);
  CHECK(stream.reset(1) == Status::kInvalidArgument);
  CHECK(stream.reset(-1) == Status::kInvalidArgument);
  // Nothing above moved the stream: it still equals offline.
  bool ok = false;
  const Tensor got = run_stream(stream, x, {8, 8}, &ok);
  CHECK(ok);
  CHECK(bit_equal(got, layer->forward(x)));
  CHECK(stream.process(x.view().slice_frames(0, 8), out.view(), &n) ==
        Status::kInvalidArgument);  // after flush
  CHECK(stream.flush(out.view(), &n) == Status::kInvalidArgument);
  stream.reset();
  CHECK(stream.process(x.view().slice_frames(0, 8), out.view(), &n) == Status::kOk);

  CHECK_THROWS_AS(stream.prepare(0), convbank::Error);
  CHECK_THROWS_AS(stream.prepare(8, 0), convbank::Error);
  if (!convbank::cuda_available()) {  // with a GPU, tests/test_cuda_stream.cpp covers kCuda
    CHECK_THROWS_WITH_AS(stream.prepare(8, 1, convbank::Device::kCuda),
                         doctest::Contains("needs a CUDA device"), convbank::Error);
  }
  CHECK_THROWS_AS(Conv1dStream(nullptr), convbank::Error);
  const auto circular =
      std::make_shared<Conv1d>(Conv1dOptions{.in_channels = 1,
                                             .out_channels = 1,
                                             .kernel_size = 3,
                                             .padding = 1,
                                             .padding_mode = convbank::PaddingMode::kCircular});
  CHECK_THROWS_WITH_AS(Conv1dStream{circular}, doctest::Contains("cannot stream"), convbank::Error);
  StreamChain chain;
  chain.add(layer);
  const auto three = make_conv({.in_channels = 3, .out_channels = 1}, rng);
  CHECK_THROWS_WITH_AS(chain.add(three), doctest::Contains("in_channels = 3"), convbank::Error);
  CHECK_THROWS_AS(StreamChain().prepare(8), convbank::Error);
}

TEST_CASE("stream: Eigen's no-malloc mode holds inside process() and in offline GEMMs") {
  namespace cpu = convbank::detail::cpu;
  std::mt19937_64 rng(99);
  // Wide layers, whose GEMMs need packing blocks: in the workspace while streaming, in the
  // per-task scratch offline.
  const auto enc =
      make_conv({.in_channels = 256, .out_channels = 512, .kernel_size = 16, .stride = 2}, rng);
  const auto dec = make_transpose(
      {.in_channels = 512, .out_channels = 256, .kernel_size = 16, .stride = 2}, rng);
  StreamChain chain;
  chain.add(enc).add(dec);
  chain.prepare(512);
  const Tensor x = random_tensor(Shape{1, 256, 4096}, rng);
  Tensor out(Shape{1, 256, chain.max_output_frames(512) + chain.max_flush_frames()});
  const std::int64_t before = cpu::eigen_malloc_violations();
  cpu::set_eigen_malloc_allowed(false);
  std::int64_t at = 0;
  for (std::int64_t n : chunk_lengths(4096, 512, 2, rng)) {
    std::int64_t produced = 0;
    CHECK(chain.process(x.view().slice_frames(at, n), out.view(), &produced) == Status::kOk);
    at += n;
  }
  std::int64_t produced = 0;
  CHECK(chain.flush(out.view(), &produced) == Status::kOk);
  const std::int64_t in_stream = cpu::eigen_malloc_violations() - before;
  (void)enc->forward(x);
  (void)dec->forward(enc->forward(x));
  const std::int64_t offline = cpu::eigen_malloc_violations() - before - in_stream;
  // The hook itself works: an allocation by Eigen is seen.
  cpu::eigen_heap_probe();
  const std::int64_t probe = cpu::eigen_malloc_violations() - before - in_stream - offline;
  cpu::set_eigen_malloc_allowed(true);
  CHECK(in_stream == 0);
  CHECK(offline == 0);
  CHECK(probe > 0);
}
