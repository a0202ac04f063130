// The Eigen backend against the float64 oracle over a seeded random grid plus a list of edge
// configurations. Each configuration runs with 1 and 2 threads (results must be bit-identical,
// since every output frame is owned by one task), and a part of them through strided views
// of larger buffers, as a streaming caller would pass a chunk of a longer signal. Non-finite
// input must reach exactly the outputs that read it, as in PyTorch: a fast algorithm that mixes
// neighbouring frames would otherwise turn one bad sample into a burst of NaN.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/runtime.hpp"
#include "convbank/tensor.hpp"
#include "oracle.hpp"

namespace {

using convbank::Conv1d;
using convbank::Conv1dOptions;
using convbank::ConvTranspose1d;
using convbank::ConvTranspose1dOptions;
using convbank::Padding;
using convbank::PaddingMode;
using convbank::Shape;
using convbank::Tensor;
using convbank::TensorView;

constexpr double kTolerance = 1e-6;  // design.md: ||out - ref|| / ||ref|| on random data

// The process-wide thread count is shared with other tests: restore the default on exit.
struct ThreadsGuard {
  ~ThreadsGuard() { convbank::set_num_threads(0); }
};

// How a configuration is fed to the layer.
struct Feed {
  std::int64_t batch = 1;
  std::int64_t frames = 1;
  bool unbatched = false;  // rank-2 input through forward(const Tensor&)
  bool strided = false;    // input and output as views into larger buffers
};

std::string describe(const Conv1dOptions& o, const Feed& f) {
  std::ostringstream s;
  s << "Conv1d(in=" << o.in_channels << ", out=" << o.out_channels << ", K=" << o.kernel_size
    << ", stride=" << o.stride << ", padding=" << o.padding.to_string()
    << ", dilation=" << o.dilation << ", groups=" << o.groups << ", bias=" << o.bias
    << ", mode=" << convbank::to_string(o.padding_mode) << ") batch=" << f.batch
    << " frames=" << f.frames << (f.unbatched ? " unbatched" : "") << (f.strided ? " strided" : "");
  return s.str();
}

std::string describe(const ConvTranspose1dOptions& o, const Feed& f) {
  std::ostringstream s;
  s << "ConvTranspose1d(in=" << o.in_channels << ", out=" << o.out_channels
    << ", K=" << o.kernel_size << ", stride=" << o.stride << ", padding=" << o.padding
    << ", output_padding=" << o.output_padding << ", groups=" << o.groups << ", bias=" << o.bias
    << ", dilation=" << o.dilation << ") batch=" << f.batch << " frames=" << f.frames
    << (f.unbatched ? " unbatched" : "") << (f.strided ? " strided" : "");
  return s.str();
}

// PyTorch's acceptance rules, restated independently of src/core so that a layer rejecting a
// valid configuration (which would silently shrink the grid) is caught.
bool torch_accepts(const Conv1dOptions& o, std::int64_t frames) {
  if (o.in_channels % o.groups != 0 || o.out_channels % o.groups != 0) return false;
  std::int64_t left = 0;
  std::int64_t right = 0;
  if (o.padding.kind() == Padding::Kind::kSame) {
    if (o.stride != 1) return false;
    left = o.dilation * (o.kernel_size - 1) / 2;
    right = o.dilation * (o.kernel_size - 1) - left;
  } else if (o.padding.kind() == Padding::Kind::kExplicit) {
    left = right = o.padding.frames();
  }
  if (o.padding_mode == PaddingMode::kReflect && (left >= frames || right >= frames)) {
    return false;
  }
  if (o.padding_mode == PaddingMode::kCircular && (left > frames || right > frames)) {
    return false;
  }
  return frames + left + right >= o.dilation * (o.kernel_size - 1) + 1;
}

bool torch_accepts(const ConvTranspose1dOptions& o, std::int64_t frames) {
  if (o.in_channels % o.groups != 0 || o.out_channels % o.groups != 0) return false;
  if (o.output_padding >= o.stride && o.output_padding >= o.dilation) return false;
  return (frames - 1) * o.stride - 2 * o.padding + o.dilation * (o.kernel_size - 1) +
             o.output_padding + 1 >=
         1;
}

// Mirrors the dispatch in src/cpu/conv_cpu.cpp, only to prove that both paths are covered.
template <class Options>
bool takes_direct_path(const Options& o) {
  return o.in_channels / o.groups <= 2 && o.out_channels / o.groups <= 2;
}

Shape weight_shape(const Conv1dOptions& o) {
  return {o.out_channels, o.in_channels / o.groups, o.kernel_size};
}
Shape weight_shape(const ConvTranspose1dOptions& o) {
  return {o.in_channels, o.out_channels / o.groups, o.kernel_size};
}
std::int64_t fan_in(const Conv1dOptions& o) {
  return o.in_channels / o.groups * o.kernel_size;
}
std::int64_t fan_in(const ConvTranspose1dOptions& o) {
  return o.out_channels / o.groups * o.kernel_size;
}

oracle::Array reference(const oracle::Array& x, const oracle::Array& w,
                        const std::vector<double>& b, const Conv1dOptions& o) {
  return oracle::conv1d(x, w, b, o);
}
oracle::Array reference(const oracle::Array& x, const oracle::Array& w,
                        const std::vector<double>& b, const ConvTranspose1dOptions& o) {
  return oracle::conv_transpose1d(x, w, b, o);
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

struct GridStats {
  int valid = 0;
  int rejected = 0;
  int direct = 0;
  int gemm = 0;
  int strided = 0;
  int unbatched = 0;
  int multi_batch = 0;
  double worst = 0.0;
  std::string worst_config;
};

// Runs one configuration; returns false (and checks nothing else) when the layer rejects it.
template <class Layer, class Options>
bool run_config(const Options& o, const Feed& f, std::uint64_t seed, GridStats& stats) {
  const std::string config = describe(o, f);
  INFO(config);
  std::optional<Layer> layer;
  Shape out_shape;
  bool accepted = true;
  try {
    layer.emplace(o);
    out_shape = layer->output_shape(Shape{f.batch, o.in_channels, f.frames});
  } catch (const convbank::Error&) {
    accepted = false;
  }
  CHECK(accepted == torch_accepts(o, f.frames));
  if (!accepted) {
    ++stats.rejected;
    return false;
  }

  std::mt19937_64 rng(seed);
  const oracle::Array w =
      oracle::random_array(weight_shape(o), rng, 1.0 / std::sqrt(static_cast<double>(fan_in(o))));
  std::vector<double> bias;
  if (o.bias) bias = oracle::random_array(Shape{1, 1, o.out_channels}, rng, 0.5).data;
  const oracle::Array x = oracle::random_array(Shape{f.batch, o.in_channels, f.frames}, rng);
  const oracle::Array ref = reference(x, w, bias, o);
  REQUIRE(ref.shape == out_shape);

  layer->set_weight(oracle::to_tensor(w));
  if (o.bias) layer->set_bias(oracle::to_tensor(oracle::Array{Shape{1, 1, o.out_channels}, bias}));

  Tensor input = oracle::to_tensor(x);
  if (f.unbatched) input.set_rank(2);

  ThreadsGuard guard;
  convbank::set_num_threads(1);
  const Tensor y1 = layer->forward(input);
  convbank::set_num_threads(2);
  const Tensor y2 = layer->forward(input);
  CHECK(y1.rank() == (f.unbatched ? 2 : 3));
  CHECK(y1.shape() == out_shape);
  CHECK_MESSAGE(bit_identical(y1, y2), "1 and 2 threads differ");

  const double err = oracle::relative_l2(y1, ref);
  CHECK_MESSAGE(err <= kTolerance, "relative L2 error " << err);
  if (!(err <= stats.worst)) {
    stats.worst = err;
    stats.worst_config = config;
  }

  if (f.strided) {
    // NaN around the input view: any read outside it would poison the result.
    const std::int64_t in_pitch = f.frames + 13;
    Tensor in_buffer(Shape{f.batch, o.in_channels + 2, in_pitch});
    std::fill(in_buffer.data(), in_buffer.data() + in_buffer.numel(),
              std::numeric_limits<float>::quiet_NaN());
    TensorView<float> in_view(in_buffer.data() + in_pitch + 5, x.shape,
                              (o.in_channels + 2) * in_pitch, in_pitch);
    convbank::copy(input.view(), in_view);
    // A sentinel around the output view: any write outside it is caught.
    constexpr float kSentinel = 12345.0f;
    const std::int64_t out_pitch = out_shape.frames + 7;
    Tensor out_buffer(Shape{f.batch, o.out_channels + 1, out_pitch});
    std::fill(out_buffer.data(), out_buffer.data() + out_buffer.numel(), kSentinel);
    TensorView<float> out_view(out_buffer.data() + 3, out_shape, (o.out_channels + 1) * out_pitch,
                               out_pitch);
    layer->forward(TensorView<const float>(in_view), out_view);
    Tensor y3(out_shape);
    convbank::copy(TensorView<const float>(out_view), y3.view());
    const double view_err = oracle::relative_l2(y3, ref);
    CHECK_MESSAGE(view_err <= kTolerance, "strided views: relative L2 error " << view_err);
    std::int64_t touched = 0;
    for (std::int64_t b = 0; b < f.batch; ++b) {
      for (std::int64_t c = 0; c < o.out_channels + 1; ++c) {
        for (std::int64_t t = 0; t < out_pitch; ++t) {
          const bool inside = c < o.out_channels && t >= 3 && t < 3 + out_shape.frames;
          if (!inside && out_buffer(b, c, t) != kSentinel) ++touched;
        }
      }
    }
    CHECK_MESSAGE(touched == 0, touched << " samples outside the output view were written");
    ++stats.strided;
  }

  ++stats.valid;
  ++(takes_direct_path(o) ? stats.direct : stats.gemm);
  if (f.unbatched) ++stats.unbatched;
  if (f.batch > 1) ++stats.multi_batch;
  return true;
}

class Draw {
 public:
  explicit Draw(std::uint64_t seed) : rng_(seed) {}
  std::int64_t in(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  bool one_in(int n) { return in(1, n) == 1; }
  std::uint64_t seed() { return rng_(); }

  // groups, channels per group in and out: plain, grouped, depthwise (with multiplier), and
  // now and then wide groups so the GEMM sees a real reduction.
  void channels(std::int64_t& groups, std::int64_t& in_ch, std::int64_t& out_ch) {
    const std::int64_t kind = in(0, 9);
    std::int64_t cg = in(1, 4);
    std::int64_t og = in(1, 4);
    if (kind <= 4) {
      groups = 1;
    } else if (kind <= 7) {
      groups = in(2, 4);
    } else {
      groups = in(1, 12);
      cg = 1;
      og = in(1, 3);
    }
    if (one_in(8)) cg = in(5, 24);
    if (one_in(8)) og = in(5, 24);
    in_ch = groups * cg;
    out_ch = groups * og;
    // Now and then a layer whose channel counts are not multiples of groups.
    if (groups > 1 && one_in(25)) (one_in(2) ? in_ch : out_ch) += 1;
  }
  std::int64_t kernel() { return one_in(6) ? in(8, 24) : in(1, 7); }
  std::int64_t stride() { return one_in(6) ? in(5, 12) : in(1, 4); }
  std::int64_t dilation() { return one_in(6) ? in(4, 9) : in(1, 3); }
  Feed feed() {
    Feed f;
    f.batch = in(1, 3);
    const std::int64_t size = in(0, 9);
    f.frames = size == 0 ? in(1, 6) : size <= 6 ? in(7, 64) : in(65, 400);
    f.unbatched = f.batch == 1 && one_in(3);
    f.strided = one_in(3);
    return f;
  }

 private:
  std::mt19937_64 rng_;
};

Conv1dOptions draw_conv(Draw& d) {
  Conv1dOptions o;
  d.channels(o.groups, o.in_channels, o.out_channels);
  o.kernel_size = d.kernel();
  o.stride = d.stride();
  o.dilation = d.dilation();
  const std::int64_t kind = d.in(0, 9);
  if (kind <= 5) {
    o.padding = d.in(0, o.dilation * (o.kernel_size - 1) + 2);
  } else if (kind <= 7) {
    o.padding = Padding::same();
    if (!d.one_in(5)) o.stride = 1;  // mostly valid; sometimes the rejected strided "same"
  } else {
    o.padding = Padding::valid();
  }
  o.bias = !d.one_in(4);
  o.padding_mode = static_cast<PaddingMode>(d.in(0, 3));
  return o;
}

ConvTranspose1dOptions draw_transpose(Draw& d) {
  ConvTranspose1dOptions o;
  d.channels(o.groups, o.in_channels, o.out_channels);
  o.kernel_size = d.kernel();
  o.stride = d.stride();
  o.dilation = d.dilation();
  o.padding = d.in(0, (o.dilation * (o.kernel_size - 1) + o.stride) / 2 + 1);
  const std::int64_t limit = std::max(o.stride, o.dilation) - 1;
  // Mostly legal, often at the limit, sometimes one past it.
  const std::int64_t kind = d.in(0, 9);
  o.output_padding = kind <= 5 ? d.in(0, limit) : kind <= 8 ? limit : limit + 1;
  o.bias = !d.one_in(4);
  return o;
}

template <class Layer, class Options, class DrawFn>
void run_random_grid(std::uint64_t seed, int draws, DrawFn draw) {
  Draw d(seed);
  GridStats stats;
  for (int i = 0; i < draws; ++i) {
    const Options o = draw(d);
    const Feed f = d.feed();
    run_config<Layer>(o, f, d.seed(), stats);
  }
  MESSAGE(stats.valid << " valid configurations (" << stats.direct << " direct path, " << stats.gemm
                      << " GEMM path, " << stats.strided << " strided, " << stats.unbatched
                      << " unbatched, " << stats.multi_batch << " batch > 1), " << stats.rejected
                      << " rejected draws; worst error " << stats.worst << " for "
                      << stats.worst_config);
  REQUIRE(stats.valid >= 300);
  CHECK(stats.rejected > 0);  // the rejection rules were exercised
  CHECK(stats.direct >= 50);
  CHECK(stats.gemm >= 50);
  CHECK(stats.strided >= 50);
  CHECK(stats.unbatched >= 20);
  CHECK(stats.multi_batch >= 100);
}

Conv1dOptions conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                   Padding padding, std::int64_t dilation = 1, std::int64_t groups = 1,
                   PaddingMode mode = PaddingMode::kZeros, bool bias = true) {
  return {in, out, k, stride, padding, dilation, groups, bias, mode};
}

ConvTranspose1dOptions transpose(std::int64_t in, std::int64_t out, std::int64_t k,
                                 std::int64_t stride, std::int64_t padding,
                                 std::int64_t output_padding = 0, std::int64_t dilation = 1,
                                 std::int64_t groups = 1, bool bias = true) {
  return {in, out, k, stride, padding, output_padding, groups, bias, dilation};
}

Feed feed(std::int64_t batch, std::int64_t frames, bool strided = false, bool unbatched = false) {
  return {batch, frames, unbatched, strided};
}

}  // namespace

TEST_CASE("grid: Conv1d random configurations against the oracle") {
  run_random_grid<Conv1d, Conv1dOptions>(20240601, 700, draw_conv);
}

TEST_CASE("grid: ConvTranspose1d random configurations against the oracle") {
  run_random_grid<ConvTranspose1d, ConvTranspose1dOptions>(20240602, 600, draw_transpose);
}

TEST_CASE("grid: Conv1d edge configurations") {
  const PaddingMode kReflect = PaddingMode::kReflect;
  const PaddingMode kReplicate = PaddingMode::kReplicate;
  const PaddingMode kCircular = PaddingMode::kCircular;
  const PaddingMode kZeros = PaddingMode::kZeros;
  const std::vector<std::pair<Conv1dOptions, Feed>> cases = {
      // kernel longer than the input, made valid by padding
      {conv(1, 1, 7, 1, 3), feed(1, 3)},
      {conv(2, 3, 9, 2, 4), feed(2, 2, true)},
      {conv(1, 2, 6, 1, 4, 1, 1, kReplicate), feed(1, 2)},
      {conv(3, 3, 5, 1, 2, 1, 3, kCircular), feed(2, 2)},
      {conv(4, 4, 5, 1, 3, 1, 1, kCircular), feed(1, 3)},  // circular padding == length
      {conv(2, 2, 3, 1, 4, 1, 1, kReflect), feed(2, 5)},   // reflect padding == length - 1
      // depthwise and channel multipliers (direct path up to 2 per group, GEMM above)
      {conv(8, 8, 5, 1, Padding::same(), 3, 8), feed(2, 100, true)},
      {conv(8, 16, 3, 2, 1, 1, 8, kReflect), feed(1, 50)},
      {conv(4, 12, 3, 1, 1, 2, 4), feed(3, 40)},
      {conv(6, 6, 4, 1, Padding::same(), 1, 6, kReplicate), feed(1, 33, false, true)},
      // dilation with stride
      {conv(3, 5, 3, 3, 2, 4), feed(2, 61)},
      {conv(2, 2, 4, 2, 5, 3, 1, kCircular), feed(1, 29, true)},
      // odd "same" totals: K even with dilation odd
      {conv(1, 1, 4, 1, Padding::same()), feed(1, 10)},
      {conv(3, 4, 2, 1, Padding::same(), 3, 1, kReflect), feed(2, 17)},
      {conv(5, 5, 6, 1, Padding::same(), 1, 5, kCircular), feed(1, 9)},
      {conv(2, 6, 8, 1, Padding::same(), 5, 2, kReplicate), feed(1, 70, true)},
      // "valid"
      {conv(4, 2, 5, 3, Padding::valid(), 2), feed(2, 40)},
      {conv(1, 1, 7, 1, Padding::valid()), feed(1, 7)},  // exactly one output
      // kernel 1, stride > kernel
      {conv(16, 8, 1, 1, 0), feed(2, 300, true)},  // the input rows are the GEMM operand
      {conv(16, 8, 1, 1, 0, 1, 2), feed(1, 100, false, true)},
      {conv(3, 7, 1, 4, 2, 1, 1, kReflect), feed(2, 31)},
      {conv(2, 3, 2, 5, 0), feed(2, 41, true)},
      {conv(1, 1, 3, 7, 1, 2, 1, kReplicate), feed(3, 50)},
      // large-ish channel counts; multi-block GEMM (K*C columns exceed the column budget)
      {conv(64, 128, 3, 1, 1), feed(1, 300)},
      {conv(64, 128, 3, 1, Padding::same(), 1, 1, kReflect), feed(2, 70, true)},
      {conv(512, 1, 3, 1, 1, 1, 1, kZeros, false), feed(1, 200)},
      {conv(512, 4, 16, 1, 0), feed(1, 150, true)},
      {conv(1, 512, 16, 8, 0), feed(1, 1024)},
      {conv(1, 512, 16, 8, 4, 1, 1, kCircular), feed(2, 300, true)},
      // one input channel per group, K > 32: the GEMM reads its operand straight from the
      // input where a block's window lies inside it (im2col at the edges)
      {conv(1, 40, 64, 16, 5), feed(2, 3000, true)},
      {conv(1, 257, 512, 128, 0), feed(1, 20000)},
      {conv(2, 6, 48, 8, 3, 1, 2), feed(1, 5000, false, true)},
      {conv(1, 64, 40, 48, 0), feed(1, 9000)},
      {conv(1, 16, 33, 1, 16, 1, 1, kReflect), feed(1, 4000, true)},
      {conv(128, 128, 3, 1, 2, 2, 128), feed(1, 5000)},  // depthwise, long
      // K 3, stride 1, wide groups: the long-buffer layers, where a backend may switch to a
      // fast algorithm (Winograd); lengths that are not multiples of a tile, several blocks
      {conv(16, 16, 3, 1, 1), feed(1, 64)},
      {conv(24, 20, 3, 1, 0), feed(2, 67, true)},
      {conv(32, 48, 3, 1, Padding::same(), 1, 1, kReflect), feed(1, 1001)},
      {conv(64, 64, 3, 1, 1, 1, 2, kReplicate), feed(2, 130, false)},
      {conv(64, 64, 3, 1, 1), feed(1, 3001, true)},
      {conv(128, 64, 3, 1, Padding::valid()), feed(1, 70, false, true)},
      // direct path longer than one block of frames
      {conv(2, 2, 3, 1, 1, 1, 1, kReflect), feed(1, 9000, true)},
      {conv(1, 1, 5, 2, 2), feed(2, 12000)},
      // batch 1 and batch > 1 through the rank-2 API
      {conv(3, 2, 3, 1, 1), feed(1, 20, false, true)},
  };
  GridStats stats;
  std::uint64_t seed = 7;
  for (const auto& c : cases) {
    CHECK_MESSAGE(run_config<Conv1d>(c.first, c.second, ++seed, stats),
                  (describe(c.first, c.second) + " was rejected"));
  }
  MESSAGE(stats.valid << " edge configurations, worst error " << stats.worst << " for "
                      << stats.worst_config);
}

TEST_CASE("grid: Conv1d GEMM path with more left padding than output frames") {
  // The first kernel taps of such a layer read only padding for more output frames than the
  // block holds, so the im2col range of valid frames must be clamped to the block.
  GridStats stats;
  CHECK(run_config<Conv1d>(conv(3, 3, 6, 1, 3), feed(1, 1), 1, stats));
  CHECK(run_config<Conv1d>(conv(2, 4, 3, 1, Padding::same(), 6), feed(1, 4), 2, stats));
  CHECK(run_config<Conv1d>(conv(4, 4, 14, 1, 23, 3), feed(2, 5), 3, stats));
  CHECK(run_config<Conv1d>(conv(4, 4, 3, 1, 200), feed(1, 10), 4, stats));
}

TEST_CASE("grid: depthwise Conv1d with outputs larger than the caches (streamed stores)") {
  // Outputs above 8 MiB leave the direct path through non-temporal stores (stride 1 with
  // AVX-512 straight from registers, otherwise through a per-thread buffer): ragged last
  // blocks, strided views, padding modes, two channels per group.
  GridStats stats;
  CHECK(run_config<Conv1d>(conv(64, 64, 3, 1, 8, 8, 64), feed(1, 40001), 1, stats));
  CHECK(run_config<Conv1d>(conv(64, 64, 3, 1, 8, 8, 64), feed(1, 40001, true), 2, stats));
  CHECK(run_config<Conv1d>(conv(48, 48, 5, 2, 3, 1, 24, PaddingMode::kReflect), feed(2, 50003), 3,
                           stats));
  CHECK(run_config<Conv1d>(conv(32, 64, 4, 1, Padding::same(), 3, 32, PaddingMode::kZeros, false),
                           feed(1, 41000, true), 4, stats));
  // Stride 1 streams from registers (AVX-512 builds): rows of odd length start off the 64-byte
  // lines, replicate padding is materialized first, K 7 at dilation 3.
  CHECK(run_config<Conv1d>(conv(40, 40, 7, 1, 9, 3, 40, PaddingMode::kReplicate), feed(2, 33333), 5,
                           stats));
  CHECK(stats.direct == 5);
  MESSAGE("large depthwise outputs: worst error " << stats.worst << " for " << stats.worst_config);
}

TEST_CASE("grid: one-channel encoders (the register-blocked CPU path)") {
  // One input channel per group, dilation 1, K <= 32, >= 16 outputs per group: on AVX-512 builds
  // the register-blocked definition (conv_cpu.cpp), elsewhere im2col + GEMM; the oracle and
  // 1 vs 2 threads (bit for bit) either way. Outputs above 8 MiB (streamed stores), rows not a
  // multiple of the 4-row tile, frames not a multiple of the 64-frame tile, stride above K,
  // groups, K = 1 and 32, padding beyond the first block, reflect and circular padding, views.
  GridStats stats;
  CHECK(run_config<Conv1d>(conv(1, 512, 16, 8, 0), feed(1, 40003), 1, stats));
  CHECK(run_config<Conv1d>(conv(1, 70, 5, 3, 2), feed(2, 3001, true), 2, stats));
  CHECK(run_config<Conv1d>(conv(2, 80, 7, 9, 4, 1, 2), feed(2, 2000), 3, stats));
  CHECK(run_config<Conv1d>(conv(1, 16, 1, 1, 0, 1, 1, PaddingMode::kZeros, false),
                           feed(1, 5000, true), 4, stats));
  CHECK(run_config<Conv1d>(conv(1, 33, 32, 4, 600), feed(2, 2000, true), 5, stats));
  CHECK(run_config<Conv1d>(conv(1, 64, 12, 6, 3, 1, 1, PaddingMode::kReflect), feed(1, 9000), 6,
                           stats));
  CHECK(run_config<Conv1d>(conv(1, 24, 16, 8, 5, 1, 1, PaddingMode::kCircular, false),
                           feed(1, 700, false, true), 7, stats));
  // Streamed stores on rows of odd length (every row at another offset from the 64-byte lines),
  // 130 channels (two rows outside the 4-row tiles), a ragged last block.
  CHECK(run_config<Conv1d>(conv(1, 130, 16, 8, 3), feed(2, 131001, true), 8, stats));
  CHECK(stats.valid == 8);
  MESSAGE("one-channel encoders: worst error " << stats.worst << " for " << stats.worst_config);

  // A call longer than the working-set limit runs in pieces, bit-identical to the whole call.
  struct Reset {
    ~Reset() { convbank::set_working_set_frames(0); }
  } reset;
  std::mt19937_64 rng(17);
  Conv1d enc(conv(1, 40, 16, 8, 5));
  enc.set_weight(oracle::to_tensor(oracle::random_array(Shape{40, 1, 16}, rng, 0.25)));
  enc.set_bias(oracle::to_tensor(oracle::random_array(Shape{1, 1, 40}, rng)));
  const Tensor x = oracle::to_tensor(oracle::random_array(Shape{2, 1, 30001}, rng));
  const Tensor whole = enc.forward(x);
  convbank::set_working_set_frames(5000);
  CHECK(bit_identical(enc.forward(x), whole));
}

TEST_CASE("grid: ConvTranspose1d edge configurations") {
  const std::vector<std::pair<ConvTranspose1dOptions, Feed>> cases = {
      // output_padding at its limit: stride - 1, or dilation - 1 with stride 1
      {transpose(1, 1, 3, 2, 1, 1), feed(1, 3)},
      {transpose(2, 3, 8, 4, 2, 3), feed(2, 20, true)},
      {transpose(3, 2, 3, 1, 1, 2, 3), feed(2, 15)},
      {transpose(4, 4, 2, 2, 0, 4, 5, 4), feed(1, 11)},
      // padding trimming most of the overlap
      {transpose(2, 2, 8, 4, 6), feed(1, 9)},
      {transpose(1, 1, 5, 1, 2), feed(1, 1)},  // a single output frame
      // depthwise and multipliers
      {transpose(8, 8, 5, 2, 2, 1, 1, 8), feed(2, 60, true)},
      {transpose(8, 24, 4, 2, 1, 0, 2, 8), feed(1, 40)},
      {transpose(6, 3, 3, 1, 1, 0, 1, 3), feed(1, 17, false, true)},
      // stride > kernel leaves gaps of bias only; kernel 1
      {transpose(3, 2, 2, 5, 0), feed(2, 13)},
      {transpose(4, 6, 1, 3, 1, 2), feed(1, 19, true)},
      {transpose(16, 16, 1, 1, 0), feed(2, 90)},
      // dilation with stride
      {transpose(2, 5, 3, 3, 2, 2, 4), feed(2, 25)},
      // encoder/decoder pairs and wide layers
      {transpose(512, 1, 16, 8, 0), feed(1, 200)},
      {transpose(512, 1, 16, 8, 4, 7, 1, 1, false), feed(2, 60, true)},
      {transpose(1, 512, 16, 8, 0), feed(1, 130)},
      // decoders of at most 16 rows (out/groups x K) and >= 8 inputs per group: the small-rows
      // product, channels 16 at a time, a ragged last group, masked tail vectors, long rows
      {transpose(40, 3, 5, 2, 1), feed(2, 3001, true)},
      {transpose(24, 4, 8, 4, 2, 1, 1, 2), feed(1, 777)},
      {transpose(520, 1, 7, 3, 3, 0, 2), feed(1, 20000)},
      {transpose(8, 16, 1, 1, 0), feed(3, 33)},
      {transpose(128, 64, 3, 1, 1), feed(1, 200)},
      {transpose(64, 128, 4, 2, 1), feed(2, 50, true)},
      {transpose(128, 128, 3, 1, 2, 0, 2, 128), feed(1, 4500)},
      // direct path longer than one block of output frames
      {transpose(2, 2, 4, 2, 1, 1), feed(1, 5000, true)},
      {transpose(1, 1, 3, 1, 1), feed(2, 9000)},
      {transpose(3, 2, 3, 1, 1), feed(1, 20, false, true)},
  };
  GridStats stats;
  std::uint64_t seed = 70;
  for (const auto& c : cases) {
    CHECK_MESSAGE(run_config<ConvTranspose1d>(c.first, c.second, ++seed, stats),
                  (describe(c.first, c.second) + " was rejected"));
  }
  MESSAGE(stats.valid << " edge configurations, worst error " << stats.worst << " for "
                      << stats.worst_config);
}

namespace {

enum class Kind { kFinite, kNaN, kPosInf, kNegInf };
Kind classify(double v) {
  if (std::isnan(v)) return Kind::kNaN;
  if (std::isinf(v)) return v > 0 ? Kind::kPosInf : Kind::kNegInf;
  return Kind::kFinite;
}

// Puts a NaN and an Inf into the input and compares, element by element, which outputs are
// NaN / +Inf / -Inf with the float64 oracle (IEEE rules give the same classes whatever the
// summation order), and the finite outputs to the usual tolerance.
template <class Layer, class Options>
void check_non_finite(const Options& o, std::int64_t batch, std::int64_t frames,
                      std::int64_t nan_at, std::int64_t inf_at, std::uint64_t seed) {
  INFO(describe(o, feed(batch, frames)));
  std::mt19937_64 rng(seed);
  const oracle::Array w = oracle::random_array(weight_shape(o), rng, 0.5);
  std::vector<double> bias;
  if (o.bias) bias = oracle::random_array(Shape{1, 1, o.out_channels}, rng, 0.5).data;
  oracle::Array x = oracle::random_array(Shape{batch, o.in_channels, frames}, rng);
  x(0, 0, nan_at) = std::numeric_limits<double>::quiet_NaN();
  x(batch - 1, o.in_channels - 1, inf_at) = std::numeric_limits<double>::infinity();
  const oracle::Array ref = reference(x, w, bias, o);

  Layer layer(o);
  layer.set_weight(oracle::to_tensor(w));
  if (o.bias) layer.set_bias(oracle::to_tensor(oracle::Array{Shape{1, 1, o.out_channels}, bias}));
  const Tensor y = layer.forward(oracle::to_tensor(x));
  REQUIRE(y.shape() == ref.shape);

  int mismatched = 0;
  int non_finite = 0;
  double diff = 0.0;
  double norm = 0.0;
  for (std::int64_t b = 0; b < ref.shape.batch; ++b) {
    for (std::int64_t c = 0; c < ref.shape.channels; ++c) {
      for (std::int64_t t = 0; t < ref.shape.frames; ++t) {
        const Kind want = classify(ref(b, c, t));
        const Kind got = classify(y(b, c, t));
        if (want != got) {
          if (++mismatched <= 5) {
            MESSAGE("(" << b << ", " << c << ", " << t << "): got " << y(b, c, t) << ", reference "
                        << ref(b, c, t));
          }
        } else if (want == Kind::kFinite) {
          diff += (y(b, c, t) - ref(b, c, t)) * (y(b, c, t) - ref(b, c, t));
          norm += ref(b, c, t) * ref(b, c, t);
        } else {
          ++non_finite;
        }
      }
    }
  }
  CHECK(mismatched == 0);
  CHECK(non_finite > 0);
  CHECK(std::sqrt(diff / norm) <= kTolerance);
}

}  // namespace

TEST_CASE("grid: NaN and Inf in the input reach exactly the outputs that depend on them") {
  // direct path, zero padding and dilation
  check_non_finite<Conv1d>(conv(2, 2, 5, 1, 4, 2, 2), 2, 60, 0, 30, 1);
  // GEMM path, stride, reflect padding (the edge sample is read twice through the mirror)
  check_non_finite<Conv1d>(conv(4, 6, 3, 2, 2, 1, 1, PaddingMode::kReflect), 1, 41, 1, 20, 2);
  // circular "same": the NaN near the start also reaches the last outputs
  check_non_finite<Conv1d>(conv(3, 5, 4, 1, Padding::same(), 1, 1, PaddingMode::kCircular), 2, 32,
                           0, 31, 3);
  check_non_finite<Conv1d>(conv(1, 64, 16, 8, 0), 1, 256, 100, 200, 4);
  // K 3, stride 1, wide groups (where a fast algorithm mixing neighbouring frames could spread
  // a NaN to outputs that never read it)
  check_non_finite<Conv1d>(conv(16, 16, 3, 1, 1), 1, 100, 50, 77, 8);
  check_non_finite<Conv1d>(conv(32, 24, 3, 1, Padding::same(), 1, 1, PaddingMode::kReflect), 2, 300,
                           0, 150, 9);
  // transposed, both paths
  check_non_finite<ConvTranspose1d>(transpose(1, 1, 4, 2, 1), 1, 30, 5, 20, 5);
  check_non_finite<ConvTranspose1d>(transpose(4, 6, 5, 3, 2, 1), 2, 30, 0, 29, 6);
  check_non_finite<ConvTranspose1d>(transpose(64, 1, 16, 8, 4), 1, 40, 10, 30, 7);
}
