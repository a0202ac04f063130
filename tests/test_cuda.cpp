// The CUDA backend against float64 references: a seeded random grid of every argument (checked
// against the naive oracle), the seed shapes and all GPU workloads of workloads.md at full size
// (checked on slices against a float64 reference computed here), a caller's stream, non-dense
// views, and 64-bit sizes. Outputs are poisoned with NaN before every launch so an unwritten
// element fails. Every test skips (and passes) when no CUDA device is present.
//
// Test cases named "cuda:sanitize*" are the small subset compute-sanitizer runs
// (scripts/gpu-check.sh: --test-case='cuda:sanitize*').
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../src/core/workloads.hpp"
#include "../src/cuda/dispatch.hpp"
#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/runtime.hpp"
#include "convbank/tensor.hpp"
#include "oracle.hpp"

// The few CUDA runtime calls the tests make, declared here because the test target does not
// see the toolkit's headers (the library links cudart; these are its C entry points).
extern "C" {
int cudaStreamCreate(void** stream);
int cudaStreamDestroy(void* stream);
int cudaStreamSynchronize(void* stream);
int cudaMemset(void* ptr, int value, std::size_t bytes);
int cudaDeviceSynchronize();
int cudaGetDevice(int* device);
int cudaDeviceGetAttribute(int* value, int attr, int device);  // attr: cudaDeviceAttr
}

// cudaDevAttrComputeCapabilityMajor (driver_types.h): thread-block clusters from 9 on.
static bool device_has_clusters() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == 0 && cudaDeviceGetAttribute(&major, 75, device) == 0 &&
         major >= 9;
}

namespace {

using convbank::Conv1d;
using convbank::Conv1dOptions;
using convbank::ConvTranspose1d;
using convbank::ConvTranspose1dOptions;
using convbank::Device;
using convbank::Padding;
using convbank::PaddingMode;
using convbank::Shape;
using convbank::Tensor;
using convbank::TensorView;

constexpr double kTolerance = 1e-6;

#define CUDA_OR_SKIP()                               \
  do {                                               \
    if (!convbank::cuda_available()) {               \
      MESSAGE("CUDA device not available: skipped"); \
      return;                                        \
    }                                                \
  } while (0)

// All-ones bits: NaN in float32. Every element the kernel should write must be overwritten.
void poison(Tensor& t) {
  REQUIRE(cudaMemset(t.data(), 0xFF, static_cast<std::size_t>(t.numel()) * sizeof(float)) == 0);
}

// Fast deterministic uniform [-1, 1) fill for multi-gigabyte inputs (mt19937 would dominate the
// test time), threaded.
void fill_hash(float* p, std::int64_t n, std::uint64_t seed) {
  const int threads =
      std::max(1, std::min(16, static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
      for (std::int64_t i = lo; i < hi; ++i) {
        std::uint64_t z =
            (static_cast<std::uint64_t>(i) + seed * 0x9E3779B97F4A7C15ULL) * 0xBF58476D1CE4E5B9ULL;
        z ^= z >> 31;
        z *= 0x94D049BB133111EBULL;
        z ^= z >> 29;
        p[i] = static_cast<float>(static_cast<double>(z >> 40) * (2.0 / 16777216.0) - 1.0);
      }
    });
  }
  for (auto& th : pool) th.join();
}

bool all_finite(const Tensor& t) {
  const float* p = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(p[i])) return false;
  }
  return true;
}

std::string describe(const Conv1dOptions& o, std::int64_t n, std::int64_t frames) {
  std::ostringstream s;
  s << "Conv1d(in=" << o.in_channels << ", out=" << o.out_channels << ", K=" << o.kernel_size
    << ", stride=" << o.stride << ", padding=" << o.padding.to_string()
    << ", dilation=" << o.dilation << ", groups=" << o.groups << ", bias=" << o.bias
    << ", mode=" << convbank::to_string(o.padding_mode) << ") batch=" << n << " frames=" << frames;
  return s.str();
}

std::string describe(const ConvTranspose1dOptions& o, std::int64_t n, std::int64_t frames) {
  std::ostringstream s;
  s << "ConvTranspose1d(in=" << o.in_channels << ", out=" << o.out_channels
    << ", K=" << o.kernel_size << ", stride=" << o.stride << ", padding=" << o.padding
    << ", output_padding=" << o.output_padding << ", groups=" << o.groups << ", bias=" << o.bias
    << ", dilation=" << o.dilation << ") batch=" << n << " frames=" << frames;
  return s.str();
}

convbank::detail::Conv1dParams params_of(const Conv1d& layer, const Shape& in) {
  convbank::detail::Conv1dParams p;
  const auto& o = layer.options();
  p.batch = in.batch;
  p.in_channels = o.in_channels;
  p.out_channels = o.out_channels;
  p.kernel_size = o.kernel_size;
  p.stride = o.stride;
  p.dilation = o.dilation;
  p.groups = o.groups;
  p.pad_left = layer.padding_left();
  p.pad_right = layer.padding_right();
  p.padding_mode = o.padding_mode;
  p.in_frames = in.frames;
  p.out_frames = layer.output_frames(in.frames);
  return p;
}

convbank::detail::ConvTranspose1dParams params_of(const ConvTranspose1d& layer, const Shape& in) {
  convbank::detail::ConvTranspose1dParams p;
  const auto& o = layer.options();
  p.batch = in.batch;
  p.in_channels = o.in_channels;
  p.out_channels = o.out_channels;
  p.kernel_size = o.kernel_size;
  p.stride = o.stride;
  p.dilation = o.dilation;
  p.groups = o.groups;
  p.padding = o.padding;
  p.output_padding = o.output_padding;
  p.in_frames = in.frames;
  p.out_frames = layer.output_frames(in.frames);
  return p;
}

const char* kernel_of(const Conv1d& l, const Shape& in) {
  return convbank::detail::cuda::conv1d_kernel_name(params_of(l, in));
}
const char* kernel_of(const ConvTranspose1d& l, const Shape& in) {
  return convbank::detail::cuda::conv_transpose1d_kernel_name(params_of(l, in));
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

struct GridStats {
  int runs = 0;
  int strided = 0;
  double worst = 0.0;
  std::string worst_config;
  std::set<std::string> kernels;
};

// One configuration on the GPU against the float64 oracle. `strided`: input and output are
// views into larger device buffers; the gaps must stay untouched (still NaN bits).
template <class Layer, class Options>
bool run_config(const Options& o, std::int64_t n, std::int64_t frames, bool strided,
                std::uint64_t seed, GridStats& stats) {
  Layer layer(o);
  Shape in_shape{n, o.in_channels, frames};
  Shape out_shape;
  try {
    out_shape = layer.output_shape(in_shape);
  } catch (const convbank::Error&) {
    return false;  // PyTorch rejects it too (checked by the CPU grid)
  }
  const std::string config = describe(o, n, frames);
  CAPTURE(config);
  std::mt19937_64 rng(seed);
  oracle::Array xa = oracle::random_array(in_shape, rng);
  const Shape ws = weight_shape(o);
  oracle::Array wa = oracle::random_array(ws, rng, 1.0 / std::sqrt(static_cast<double>(fan_in(o))));
  std::vector<double> bias;
  Tensor xt = oracle::to_tensor(xa);
  Tensor wt = oracle::to_tensor(wa);
  xa = oracle::from_tensor(xt);
  wa = oracle::from_tensor(wt);
  layer.set_weight(wt.view());
  if (o.bias) {
    oracle::Array ba = oracle::random_array(Shape{1, 1, o.out_channels}, rng);
    Tensor bt = oracle::to_tensor(ba);
    ba = oracle::from_tensor(bt);
    bias = ba.data;
    layer.set_bias(bt.view());
  }
  const oracle::Array ref = reference(xa, wa, bias, o);
  stats.kernels.insert(kernel_of(layer, in_shape));

  Tensor got;
  if (!strided) {
    Tensor xd = xt.to(Device::kCuda);
    Tensor yd(out_shape, Device::kCuda);
    poison(yd);
    layer.forward(xd.view(), yd.view());
    got = yd.to(Device::kCpu);
  } else {
    ++stats.strided;
    // Channel stride = frames + 5 (never a multiple of 4: misaligned rows), batch stride with
    // one spare channel: the layout of a chunk cut out of a longer, wider buffer.
    const std::int64_t xcs = frames + 5, xbs = (o.in_channels + 1) * xcs;
    Tensor xbig(Shape{n, o.in_channels + 1, xcs}, Device::kCuda);
    poison(xbig);
    TensorView<float> xv(xbig.data() + 3, in_shape, xbs, xcs, Device::kCuda);
    convbank::copy(xt.view(), xv);
    const std::int64_t ycs = out_shape.frames + 7, ybs = (o.out_channels + 1) * ycs;
    Tensor ybig(Shape{n, o.out_channels + 1, ycs}, Device::kCuda);
    poison(ybig);
    TensorView<float> yv(ybig.data() + 2, out_shape, ybs, ycs, Device::kCuda);
    layer.forward(TensorView<const float>(xv), yv);
    Tensor yh = ybig.to(Device::kCpu);
    got = Tensor(out_shape);
    convbank::copy(TensorView<const float>(yh.data() + 2, out_shape, ybs, ycs), got.view());
    // Everything outside the view must be untouched.
    std::int64_t touched = 0;
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t c = 0; c < o.out_channels + 1; ++c) {
        for (std::int64_t t = 0; t < ycs; ++t) {
          const std::int64_t i = b * ybs + c * ycs + t;
          const bool inside = c < o.out_channels && t >= 2 && t < 2 + out_shape.frames;
          if (!inside && !std::isnan(yh.data()[i])) ++touched;
        }
      }
    }
    CHECK_MESSAGE(touched == 0, "elements outside the output view were written");
  }
  CHECK_MESSAGE(all_finite(got), "unwritten (NaN) or non-finite outputs, kernel ",
                kernel_of(layer, in_shape));
  const double err = oracle::relative_l2(got, ref);
  CHECK_MESSAGE(err <= kTolerance, "relative L2 ", err, " kernel ", kernel_of(layer, in_shape));
  ++stats.runs;
  if (err > stats.worst || std::isnan(err)) {
    stats.worst = err;
    stats.worst_config = config + " [" + kernel_of(layer, in_shape) + "]";
  }
  return true;
}

// run_config for a Conv1d after checking that the dispatcher gives it `kernel`: the tests that
// force one kernel onto many layers.
bool run_on_kernel(const char* kernel, const Conv1dOptions& o, std::int64_t n, std::int64_t frames,
                   bool strided, std::uint64_t seed, GridStats& stats) {
  CHECK(std::string(kernel_of(Conv1d(o), Shape{n, o.in_channels, frames})) == kernel);
  return run_config<Conv1d, Conv1dOptions>(o, n, frames, strided, seed, stats);
}

// Random input and weights for a Conv1d (weights of standard deviation w_scale), shaped by
// `adjust` before both are rounded to float32, the values the GPU gets and the oracle sees.
struct RoundedData {
  oracle::Array x, w;
  Tensor xt, wt;
};
template <class Adjust>
RoundedData rounded_data(const Conv1dOptions& o, std::int64_t n, std::int64_t frames,
                         std::uint64_t seed, double w_scale, Adjust&& adjust) {
  std::mt19937_64 rng(seed);
  RoundedData d{oracle::random_array(Shape{n, o.in_channels, frames}, rng),
                oracle::random_array(weight_shape(o), rng, w_scale),
                {},
                {}};
  adjust(d.x, d.w);
  d.xt = oracle::to_tensor(d.x);
  d.wt = oracle::to_tensor(d.w);
  d.x = oracle::from_tensor(d.xt);
  d.w = oracle::from_tensor(d.wt);
  return d;
}

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  std::uniform_int_distribution<std::size_t> d(0, values.size() - 1);
  return *(values.begin() + d(rng));
}

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// Channel counts that reach every kernel: tiny (direct), mid (GEMM tiles), and the Winograd
// thresholds (in/groups >= 16, out/groups >= 32), with ragged values.
void random_channels(std::mt19937_64& rng, std::int64_t& in, std::int64_t& out,
                     std::int64_t& groups, int flavour) {
  if (flavour == 0) {  // wide: GEMM / Winograd
    groups = pick<std::int64_t>(rng, {1, 1, 1, 2});
    in = groups * pick<std::int64_t>(rng, {1, 3, 8, 16, 17, 24, 40});
    out = groups * pick<std::int64_t>(rng, {5, 12, 17, 32, 33, 64, 65, 96, 130});
  } else if (flavour == 1) {  // depthwise / grouped narrow
    in = pick<std::int64_t>(rng, {1, 2, 3, 4, 6, 8, 12});
    groups = in;
    out = in * pick<std::int64_t>(rng, {1, 1, 2, 3});
  } else {  // small anything
    groups = pick<std::int64_t>(rng, {1, 1, 2, 3});
    in = groups * uniform(rng, 1, 4);
    out = groups * uniform(rng, 1, 6);
  }
}

std::int64_t random_frames(std::mt19937_64& rng) {
  const int kind = static_cast<int>(uniform(rng, 0, 9));
  if (kind == 0) return uniform(rng, 1, 8);
  if (kind < 7) return uniform(rng, 9, 400);
  return uniform(rng, 401, 1400);  // several 128-frame tiles / 1024-frame blocks, ragged
}

void conv1d_grid(int configs, std::uint64_t seed0, GridStats& stats) {
  std::mt19937_64 rng(seed0);
  int attempts = 0;
  while (stats.runs < configs && attempts < configs * 20) {
    ++attempts;
    Conv1dOptions o;
    const int flavour = static_cast<int>(uniform(rng, 0, 2));
    random_channels(rng, o.in_channels, o.out_channels, o.groups, flavour);
    o.kernel_size = pick<std::int64_t>(rng, {1, 2, 3, 3, 3, 4, 5, 7, 16});
    o.stride = pick<std::int64_t>(rng, {1, 1, 1, 2, 3, 4, 8});
    o.dilation = pick<std::int64_t>(rng, {1, 1, 1, 2, 3});
    const int pk = static_cast<int>(uniform(rng, 0, 9));
    if (pk == 0) {
      o.padding = Padding::valid();
    } else if (pk == 1 && o.stride == 1) {
      o.padding = Padding::same();
    } else {
      o.padding = Padding(pick<std::int64_t>(rng, {0, 0, 1, 2, 3, 5}));
    }
    o.padding_mode =
        pick<PaddingMode>(rng, {PaddingMode::kZeros, PaddingMode::kZeros, PaddingMode::kReflect,
                                PaddingMode::kReplicate, PaddingMode::kCircular});
    o.bias = uniform(rng, 0, 3) != 0;
    if (attempts % 5 == 0) {  // Winograd-eligible
      o.kernel_size = 3;
      o.stride = 1;
      o.dilation = 1;
      o.groups = pick<std::int64_t>(rng, {1, 1, 2});
      o.in_channels = o.groups * pick<std::int64_t>(rng, {16, 17, 24, 64});
      o.out_channels = o.groups * pick<std::int64_t>(rng, {32, 33, 64, 100, 128});
    }
    const std::int64_t n = uniform(rng, 1, 3);
    const std::int64_t frames = random_frames(rng);
    const bool strided = uniform(rng, 0, 5) == 0;
    // Keep the float64 oracle cheap.
    const double cost = static_cast<double>(n) * o.out_channels * frames *
                        (o.in_channels / o.groups) * o.kernel_size;
    if (cost > 4e7) continue;
    run_config<Conv1d>(o, n, frames, strided, rng(), stats);
  }
}

void conv_transpose1d_grid(int configs, std::uint64_t seed0, GridStats& stats) {
  std::mt19937_64 rng(seed0);
  int attempts = 0;
  while (stats.runs < configs && attempts < configs * 20) {
    ++attempts;
    ConvTranspose1dOptions o;
    const int flavour = static_cast<int>(uniform(rng, 0, 2));
    random_channels(rng, o.in_channels, o.out_channels, o.groups, flavour);
    if (uniform(rng, 0, 3) == 0) std::swap(o.in_channels, o.out_channels);  // decoders: wide in
    o.kernel_size = pick<std::int64_t>(rng, {1, 2, 3, 3, 4, 5, 7, 16});
    o.stride = pick<std::int64_t>(rng, {1, 1, 2, 3, 4, 8});
    o.dilation = pick<std::int64_t>(rng, {1, 1, 1, 2, 3});
    o.padding = pick<std::int64_t>(rng, {0, 0, 1, 2, 3, 4});
    o.output_padding = uniform(rng, 0, std::max(o.stride, o.dilation) - 1);
    o.bias = uniform(rng, 0, 3) != 0;
    if (attempts % 5 == 0) {  // Winograd-eligible
      o.kernel_size = 3;
      o.stride = 1;
      o.dilation = 1;
      o.output_padding = 0;
      o.padding = pick<std::int64_t>(rng, {0, 1, 2, 3});
      o.groups = pick<std::int64_t>(rng, {1, 1, 2});
      o.in_channels = o.groups * pick<std::int64_t>(rng, {16, 17, 24, 64});
      o.out_channels = o.groups * pick<std::int64_t>(rng, {32, 33, 64, 100, 128});
    }
    const std::int64_t n = uniform(rng, 1, 3);
    const std::int64_t frames = random_frames(rng);
    const bool strided = uniform(rng, 0, 5) == 0;
    const double cost = static_cast<double>(n) * o.in_channels * frames *
                        (o.out_channels / o.groups) * o.kernel_size;
    if (cost > 4e7) continue;
    run_config<ConvTranspose1d>(o, n, frames, strided, rng(), stats);
  }
}

// Shapes the tensor-core (wgmma) kernels take: zeros padding, K <= 8, in/groups >= 8,
// out/groups >= 32 and at least 2^24 multiply-adds (the dispatcher's rule), with ragged
// channel chunks and column tiles, groups, stride, dilation, bias and strided views.
bool wgmma_sized(std::int64_t n, std::int64_t cin_g, std::int64_t out, std::int64_t k,
                 std::int64_t out_frames) {
  const double fmas = static_cast<double>(n) * out * out_frames * cin_g * k;
  return fmas >= 2.0e7 && fmas <= 8e7;  // the dispatcher's 2^24 with a margin; a cheap oracle
}

void wgmma_grid(int configs, std::uint64_t seed0, GridStats& stats) {
  std::mt19937_64 rng(seed0);
  int attempts = 0;
  while (stats.runs < configs && attempts < configs * 50) {
    ++attempts;
    const bool transposed = attempts % 3 == 0;
    const std::int64_t groups = pick<std::int64_t>(rng, {1, 1, 1, 2});
    const std::int64_t in = groups * pick<std::int64_t>(rng, {8, 12, 16, 20, 33, 64});
    const std::int64_t out = groups * pick<std::int64_t>(rng, {32, 40, 64, 65, 100, 128, 130});
    const std::int64_t k = uniform(rng, 1, 8);
    const std::int64_t dilation = pick<std::int64_t>(rng, {1, 1, 2, 5});
    const std::int64_t n = uniform(rng, 1, 3);
    std::int64_t frames = uniform(rng, 600, 5000);
    // Half with rows of a multiple of 4 frames (16-byte aligned): the SS kernel's input then
    // arrives as one bulk tensor copy per job, zero-filled past the edges by the copy engine;
    // the other half (odd lengths) as four quad-row copies per interior job.
    if (attempts % 2 == 0) frames -= frames % 4;
    const bool strided = uniform(rng, 0, 4) == 0;
    const bool bias = uniform(rng, 0, 2) != 0;
    if (transposed) {
      // Every other one strided: phase convolutions of K / stride taps (dilation 1).
      const std::int64_t s = attempts % 2 == 0 ? pick<std::int64_t>(rng, {2, 2, 3, 4}) : 1;
      const std::int64_t kt = s > 1 ? s * uniform(rng, 1, 4) : k;
      const std::int64_t d = s > 1 ? 1 : dilation;
      ConvTranspose1dOptions o{.in_channels = in,
                               .out_channels = out,
                               .kernel_size = kt,
                               .stride = s,
                               .padding = uniform(rng, 0, d * (kt - 1) + 2),
                               .output_padding = uniform(rng, 0, std::max(s, d) - 1),
                               .groups = groups,
                               .bias = bias,
                               .dilation = d};
      if (!wgmma_sized(n, in / groups, out, kt / s, ConvTranspose1d(o).output_frames(frames))) {
        continue;
      }
      run_config<ConvTranspose1d>(o, n, frames, strided, rng(), stats);
    } else {
      Conv1dOptions o{.in_channels = in,
                      .out_channels = out,
                      .kernel_size = k,
                      .stride = pick<std::int64_t>(rng, {1, 1, 1, 2, 3}),
                      .padding = Padding(uniform(rng, 0, 4)),
                      .dilation = dilation,
                      .groups = groups,
                      .bias = bias};
      if (!wgmma_sized(n, in / groups, out, k, Conv1d(o).output_frames(frames))) continue;
      run_config<Conv1d>(o, n, frames, strided, rng(), stats);
    }
  }
}

// Sets a dispatch policy for a scope and restores it on the way out, also when a check throws:
// the next test case must see the default dispatch.
template <auto get, auto set>
class ScopedPolicy {
 public:
  explicit ScopedPolicy(convbank::detail::cuda::WgmmaPolicy p) : before_(get()) { set(p); }
  ~ScopedPolicy() { set(before_); }
  ScopedPolicy(const ScopedPolicy&) = delete;
  ScopedPolicy& operator=(const ScopedPolicy&) = delete;

 private:
  convbank::detail::cuda::WgmmaPolicy before_;
};

// The tensor-core kernels.
using PolicyScope =
    ScopedPolicy<convbank::detail::cuda::wgmma_policy, convbank::detail::cuda::set_wgmma_policy>;
// The aligned one-channel encoder, which by default takes only layers whose tiles fill the GPU
// (larger than a test's float64 oracle wants to check).
using EncoderAlignedScope = ScopedPolicy<convbank::detail::cuda::encoder_aligned_policy,
                                         convbank::detail::cuda::set_encoder_aligned_policy>;
// The local-order encoder.
using EncoderLocalScope = ScopedPolicy<convbank::detail::cuda::encoder_local_policy,
                                       convbank::detail::cuda::set_encoder_local_policy>;
// The tensor-core one-channel encoder.
using EncoderWgmmaScope = ScopedPolicy<convbank::detail::cuda::encoder_wgmma_policy,
                                       convbank::detail::cuda::set_encoder_wgmma_policy>;
// The pointwise tensor-core kernel.
using PointwiseScope = ScopedPolicy<convbank::detail::cuda::pointwise_wgmma_policy,
                                    convbank::detail::cuda::set_pointwise_wgmma_policy>;
// The SS kernel's 3xFP16 products.
using HalfScope = ScopedPolicy<convbank::detail::cuda::ss_half_policy,
                               convbank::detail::cuda::set_ss_half_policy>;

// A kernel name with the shared-memory-operand kernel's precision left out: its 3xFP16 and
// 3xTF32 products (cc::set_ss_half_policy) run the same copies, tiles and epilogues, which the
// tests that check those name the kernel for.
std::string any_precision(std::string k) {
  const std::size_t at = k.find("_3xfp16_");
  if (at != std::string::npos) k.replace(at, 8, "_3xtf32_");
  return k;
}
std::set<std::string> any_precision(const std::set<std::string>& ks) {
  std::set<std::string> r;
  for (const auto& k : ks) r.insert(any_precision(k));
  return r;
}

std::string join(const std::set<std::string>& s) {
  std::string r;
  for (const auto& x : s) r += (r.empty() ? "" : ", ") + x;
  return r;
}

TEST_CASE("cuda: wgmma 3xTF32 grid against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  // Every shape the kernels take, not only those the dispatcher gives them by default.
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  const cc::SsInputCopies copies_before = cc::ss_input_copies();
  wgmma_grid(72, 90210, stats);
  {
    // The same configurations with 3xTF32 everywhere (the first pass took 3xFP16 where the
    // dispatcher chose it), then with 3xFP16 wherever a launch allows it.
    const HalfScope scope(cc::WgmmaPolicy::kNever);
    GridStats tf32;
    wgmma_grid(72, 90210, tf32);
    cc::set_ss_half_policy(cc::WgmmaPolicy::kAlways);
    GridStats fp16;
    wgmma_grid(72, 90210, fp16);
    MESSAGE("wgmma grid with 3xFP16 wherever it fits: ", fp16.runs, " configs, worst ", fp16.worst,
            " at ", fp16.worst_config);
    CHECK(fp16.runs == stats.runs);
    MESSAGE("wgmma grid with 3xTF32 only: ", tf32.runs, " configs, worst ", tf32.worst, " at ",
            tf32.worst_config);
    CHECK(tf32.runs == stats.runs);
  }
  const cc::SsInputCopies copies = cc::ss_input_copies();
  MESSAGE("wgmma grid: ", stats.runs, " configs (", stats.strided, " strided), worst ", stats.worst,
          " at ", stats.worst_config, "; kernels: ", join(stats.kernels));
  CHECK(stats.runs >= 72);
  if (!cc::wgmma_available()) {
    MESSAGE("no compute capability 9.0 device: the wgmma kernels were not exercised");
    return;
  }
  // On a 9.0 device every configuration ran a tensor-core kernel, both orientations, both
  // operand placements (strided Conv1d: fragments in registers), both channel tiles.
  for (const auto& k : stats.kernels) CHECK_MESSAGE(k.find("wgmma_") != std::string::npos, k);
  // The shared-memory-operand kernel took its input as bulk tensor copies of both kinds (rows
  // of a multiple of 4 frames, and of odd length), not only as the producer's 16-byte pieces: a
  // silent fallback would compute the same outputs, slower.
  MESSAGE("SS kernel launches by input copy: rows ", copies.rows - copies_before.rows,
          ", quad rows ", copies.quads - copies_before.quads, ", 16-byte pieces ",
          copies.pieces - copies_before.pieces);
  CHECK(copies.rows > copies_before.rows);
  CHECK(copies.quads > copies_before.quads);
  for (const char* k :
       {"conv1d_wgmma_3xtf32_128x64", "conv1d_wgmma_ss_3xtf32_128x128",
        "conv1d_wgmma_ss_3xtf32_64x256", "conv_transpose1d_wgmma_ss_3xtf32_128x128",
        "conv_transpose1d_wgmma_ss_3xtf32_64x256", "conv_transpose1d_phase_wgmma_3xtf32_128x64",
        "conv_transpose1d_d2s_wgmma_ss_3xtf32_128x128"}) {
    CHECK_MESSAGE(any_precision(stats.kernels).count(k) == 1, "grid never ran ", k);
  }
}

// Strided Conv1d with few input channels as the stride-1 tensor-core convolution over stride *
// in channels (space-to-depth): STFT-like analysis, encoders, two input channels, padding that
// is not a multiple of the stride, ragged tiles, strided views. The kernel is forced.
TEST_CASE("cuda: space-to-depth tensor-core encoders against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  std::uint64_t seed = 2718;
  using C = Conv1dOptions;
  run_config<Conv1d, C>({.in_channels = 1, .out_channels = 514, .kernel_size = 512, .stride = 128},
                        2, 6000, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 1, .out_channels = 514, .kernel_size = 512, .stride = 128, .padding = 256}, 1,
      9000, true, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8}, 2,
                        3001, true, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 2,
                         .out_channels = 40,
                         .kernel_size = 12,
                         .stride = 4,
                         .padding = 3,
                         .bias = false},
                        3, 2000, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 1, .out_channels = 96, .kernel_size = 64, .stride = 16, .padding = 10}, 2,
      5000, false, seed++, stats);
  // Strided downsampling layers with many channels (the input pass for strides below 32),
  // every padding mode, groups, one tap (K = stride), odd rows and strided views.
  run_config<Conv1d, C>(
      {.in_channels = 128, .out_channels = 256, .kernel_size = 4, .stride = 2, .padding = 1}, 2,
      3000, true, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 64,
                         .out_channels = 128,
                         .kernel_size = 8,
                         .stride = 4,
                         .padding = 2,
                         .padding_mode = PaddingMode::kReflect},
                        2, 4001, false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 64,
                         .out_channels = 64,
                         .kernel_size = 4,
                         .stride = 2,
                         .padding = 1,
                         .groups = 2,
                         .padding_mode = PaddingMode::kReplicate},
                        2, 2999, false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 48,
                         .out_channels = 96,
                         .kernel_size = 6,
                         .stride = 3,
                         .padding = 3,
                         .padding_mode = PaddingMode::kCircular},
                        2, 3001, true, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 96, .out_channels = 128, .kernel_size = 2, .stride = 2}, 1,
                        5000, false, seed++, stats);
  MESSAGE("space-to-depth: worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 10);
  if (cc::wgmma_available()) {
    for (const auto& k : stats.kernels)
      CHECK_MESSAGE(any_precision(k).rfind("conv1d_s2d_wgmma_ss_3xtf32_", 0) == 0, k);
  }
}

// Reflect, replicate and circular padding on the kernels that pad with zeros (tensor cores,
// GEMM v2): the layer runs with zeros and the outputs whose window reaches into the padding are
// recomputed. Every output is compared with the float64 oracle, the edges among them: K 7
// "same", padding far past the kernel (outputs wholly in the padding), asymmetric padding (even
// K), dilation, a strided layer, strided views, and GEMM v2 with the tensor cores off.
TEST_CASE("cuda: padding modes on the zeros-padding kernels against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  GridStats tc, v2;
  std::uint64_t seed = 6174;
  using C = Conv1dOptions;
  run_config<Conv1d, C>({.in_channels = 64,
                         .out_channels = 128,
                         .kernel_size = 7,
                         .padding = Padding::same(),
                         .padding_mode = PaddingMode::kReflect},
                        2, 3001, false, seed++, tc);
  run_config<Conv1d, C>({.in_channels = 64,
                         .out_channels = 128,
                         .kernel_size = 3,
                         .padding = 1,
                         .padding_mode = PaddingMode::kReplicate},
                        2, 3000, true, seed++, tc);
  run_config<Conv1d, C>({.in_channels = 48,
                         .out_channels = 96,
                         .kernel_size = 5,
                         .padding = 4,
                         .dilation = 2,
                         .padding_mode = PaddingMode::kCircular},
                        2, 3001, true, seed++, tc);
  run_config<Conv1d, C>({.in_channels = 64,
                         .out_channels = 64,
                         .kernel_size = 4,
                         .padding = Padding::same(),
                         .padding_mode = PaddingMode::kReflect},
                        2, 3001, false, seed++, tc);
  run_config<Conv1d, C>({.in_channels = 32,
                         .out_channels = 64,
                         .kernel_size = 3,
                         .padding = 10,
                         .padding_mode = PaddingMode::kReplicate},
                        2, 3000, false, seed++, tc);
  run_config<Conv1d, C>({.in_channels = 40,
                         .out_channels = 128,
                         .kernel_size = 3,
                         .stride = 2,
                         .padding = 1,
                         .padding_mode = PaddingMode::kReflect},
                        2, 3001, true, seed++, tc);
  {
    const PolicyScope policy(cc::WgmmaPolicy::kNever);
    run_config<Conv1d, C>({.in_channels = 40,
                           .out_channels = 72,
                           .kernel_size = 5,
                           .padding = 2,
                           .padding_mode = PaddingMode::kReflect},
                          2, 1001, true, seed++, v2);
    run_config<Conv1d, C>({.in_channels = 24,
                           .out_channels = 40,
                           .kernel_size = 6,
                           .padding = Padding::same(),
                           .padding_mode = PaddingMode::kCircular},
                          1, 999, false, seed++, v2);
  }
  MESSAGE("padding modes: worst ", std::max(tc.worst, v2.worst), "; kernels: ", join(tc.kernels),
          " | ", join(v2.kernels));
  CHECK(tc.runs + v2.runs == 8);
  for (const auto& k : v2.kernels) CHECK_MESSAGE(k.rfind("conv1d_gemm_v2_ffma_", 0) == 0, k);
  if (cc::wgmma_available()) {
    for (const auto& k : tc.kernels) CHECK_MESSAGE(k.find("_wgmma_") != std::string::npos, k);
  }
}

// Strided ConvTranspose1d as one stride-1 tensor-core convolution over (channel, phase) rows
// (depth-to-space): K not a multiple of the stride, padding beyond a stride, output_padding,
// groups, STFT-like synthesis (128 phases of one channel), decoders with few channels, both
// channel tiles, ragged chunks and strided views. The policy is the default one: these are
// shapes the dispatcher gives it.
TEST_CASE("cuda: depth-to-space tensor-core ConvTranspose1d against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  GridStats stats;
  std::uint64_t seed = 31415;
  using T = ConvTranspose1dOptions;
  const cc::SsInputCopies copies_before = cc::ss_input_copies();
  // The small shapes too (they would take the decoder kernels by size).
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 64, .out_channels = 32, .kernel_size = 4, .stride = 2, .padding = 1}, 2, 4000,
      false, seed++, stats);
  run_config<ConvTranspose1d, T>({.in_channels = 20,
                                  .out_channels = 40,
                                  .kernel_size = 5,
                                  .stride = 2,
                                  .padding = 3,
                                  .output_padding = 1},
                                 3, 3001, true, seed++, stats);
  run_config<ConvTranspose1d, T>({.in_channels = 2 * 17,
                                  .out_channels = 2 * 24,
                                  .kernel_size = 7,
                                  .stride = 3,
                                  .padding = 7,
                                  .output_padding = 2,
                                  .groups = 2,
                                  .bias = false},
                                 2, 2500, false, seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 514, .out_channels = 1, .kernel_size = 512, .stride = 128}, 2, 70, false,
      seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 257, .out_channels = 1, .kernel_size = 256, .stride = 64, .padding = 100}, 1,
      300, true, seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 96, .out_channels = 4, .kernel_size = 16, .stride = 8, .padding = 4}, 2, 3000,
      false, seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 33, .out_channels = 7, .kernel_size = 11, .stride = 5, .padding = 2}, 3, 2000,
      true, seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 128, .out_channels = 64, .kernel_size = 8, .stride = 4, .padding = 2}, 1,
      1000, false, seed++, stats);
  MESSAGE("depth-to-space: worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels));
  // A decoder to 4 channels on rows of odd length (quad rows) and one on a strided view (16-byte
  // pieces): their 64 x 256 tiles copy 264 frames per row.
  run_config<ConvTranspose1d, T>(
      {.in_channels = 64, .out_channels = 4, .kernel_size = 16, .stride = 8}, 2, 3001, false,
      seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 64, .out_channels = 4, .kernel_size = 16, .stride = 8, .padding = 3}, 2, 2999,
      true, seed++, stats);
  const cc::SsInputCopies copies = cc::ss_input_copies();
  CHECK(stats.runs == 10);
  if (cc::wgmma_available()) {
    for (const auto& k : stats.kernels)
      CHECK_MESSAGE(any_precision(k).rfind("conv_transpose1d_d2s_wgmma_ss_3xtf32_", 0) == 0, k);
    CHECK(any_precision(stats.kernels).size() == 2);  // both channel tiles
    // Copies wider than the copy engine's 256-element box dimension (the 64 x 256 tiles) went
    // in parts, for rows of a multiple of 4 frames and of odd length.
    MESSAGE("copies in parts: rows ", copies.rows_split - copies_before.rows_split, ", quad rows ",
            copies.quads_split - copies_before.quads_split);
    CHECK(copies.rows_split > copies_before.rows_split);
    CHECK(copies.quads_split > copies_before.quads_split);
  }
}

// Pointwise (K = 1) layers: on the shared-memory-operand kernel with 32-channel chunks where
// the left padding is a multiple of 4 (copies start exactly at the tile, no slack frames), on
// the register-fragment kernel otherwise; aligned and misaligned (strided) views, ragged
// chunks and tiles, padding that makes the first and last outputs bias-only.
TEST_CASE("cuda: pointwise tensor-core layers against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  GridStats ss, rf;
  std::uint64_t seed = 1618;
  using C = Conv1dOptions;
  for (const bool strided : {false, true}) {
    run_config<Conv1d, C>({.in_channels = 96, .out_channels = 130, .kernel_size = 1}, 2, 1000,
                          strided, seed++, ss);
    run_config<Conv1d, C>(
        {.in_channels = 50, .out_channels = 128, .kernel_size = 1, .padding = 4, .bias = false}, 3,
        1001, strided, seed++, ss);
    run_config<Conv1d, C>(
        {.in_channels = 64, .out_channels = 2 * 100, .kernel_size = 1, .groups = 2}, 2, 1400,
        strided, seed++, ss);
    run_config<Conv1d, C>({.in_channels = 96, .out_channels = 128, .kernel_size = 1, .padding = 1},
                          2, 1000, strided, seed++, rf);
  }
  MESSAGE("pointwise: worst ", std::max(ss.worst, rf.worst), "; kernels: ", join(ss.kernels), " | ",
          join(rf.kernels));
  CHECK(ss.runs + rf.runs == 8);
  if (cc::wgmma_available()) {
    CHECK(any_precision(ss.kernels) == std::set<std::string>{"conv1d_wgmma_ss_3xtf32_128x128"});
    CHECK(rf.kernels == std::set<std::string>{"conv1d_wgmma_3xtf32_128x64"});
  }
}

// Output rows that start off 32-byte boundaries take the tensor-core kernel's whole-sector
// epilogue: rows of 8k + 1..7 frames start 0..7 floats past a boundary (every rotation, odd
// ones included), offset views whose untouched neighbours are checked, channel tiles with
// absent rows (whose lanes still shuffle), 64- and 128-channel tiles, the last partial tile of
// a row, Conv1d and ConvTranspose1d.
TEST_CASE("cuda: tensor-core outputs on rows off 32-byte boundaries against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  GridStats stats;
  std::uint64_t seed = 2718;
  using C = Conv1dOptions;
  using T = ConvTranspose1dOptions;
  const cc::SsInputCopies copies_before = cc::ss_input_copies();
  run_config<Conv1d, C>({.in_channels = 24, .out_channels = 40, .kernel_size = 3}, 4, 4000, false,
                        seed++, stats);  // 3998 frames
  run_config<Conv1d, C>({.in_channels = 64, .out_channels = 130, .kernel_size = 3, .padding = 1}, 2,
                        1002, false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 32,
                         .out_channels = 64,
                         .kernel_size = 5,
                         .padding = 3,
                         .dilation = 2,
                         .bias = false},
                        2, 3000, false, seed++, stats);  // 2998 frames
  run_config<ConvTranspose1d, T>({.in_channels = 48, .out_channels = 96, .kernel_size = 5}, 2, 1000,
                                 false, seed++, stats);  // 1004 frames
  run_config<ConvTranspose1d, T>({.in_channels = 48, .out_channels = 96, .kernel_size = 5}, 2, 999,
                                 false, seed++, stats);  // 1003 frames
  run_config<Conv1d, C>({.in_channels = 24, .out_channels = 40, .kernel_size = 3}, 4, 4001, true,
                        seed++, stats);  // 3999 frames in views of pitch 4006
  run_config<Conv1d, C>({.in_channels = 64, .out_channels = 130, .kernel_size = 3, .padding = 1}, 2,
                        1001, true, seed++, stats);
  // Odd rows whose 64 x 256 tiles copy 268 frames per quad row, widened to 272 for copies in
  // two parts; a dilated layer whose rows of 656 frames are widened to 660 for three.
  run_config<Conv1d, C>({.in_channels = 32, .out_channels = 48, .kernel_size = 5, .padding = 2}, 2,
                        4001, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 32, .out_channels = 48, .kernel_size = 3, .padding = 200, .dilation = 200}, 2,
      4000, false, seed++, stats);
  const cc::SsInputCopies copies = cc::ss_input_copies();
  MESSAGE("rows off 32-byte boundaries: worst ", stats.worst, "; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 9);
  if (cc::wgmma_available()) {
    for (const std::string& k : stats.kernels) {
      CHECK_MESSAGE(k.find("_wgmma_ss_") != std::string::npos, k);
    }
    CHECK(copies.quads_split > copies_before.quads_split);
    CHECK(copies.max_parts >= 3);
  }
}

// Dilations far above a tile's 128 frames (WaveNet-like stacks): the tensor-core kernel copies
// a window per tap instead of the frames between the taps. Rows of a multiple of 4 frames
// (bulk tensor copies), of odd length (quad rows), a strided view (16-byte pieces), the padding
// that makes edge jobs, a layer of 48 channels (the 128-channel tile, whose windows fit where
// 64 channels x 256 frames do not), ConvTranspose1d; dilations that are not a multiple of 4
// (each window from the 16-byte boundary below its tap, as 16-byte pieces), dilations past
// 1024; and a dilation that keeps contiguous copies. In the compute-sanitizer subset: the windowed
// copies' split reads past a row's window (a pad keeps that off the other copy buffer).
TEST_CASE("cuda:sanitize dilated layers with a window per tap against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  GridStats windowed, other;
  std::uint64_t seed = 1618;
  using C = Conv1dOptions;
  using T = ConvTranspose1dOptions;
  const cc::SsInputCopies before = cc::ss_input_copies();
  const C d256{
      .in_channels = 64, .out_channels = 128, .kernel_size = 3, .padding = 256, .dilation = 256};
  run_config<Conv1d, C>(d256, 2, 3000, false, seed++, windowed);
  run_config<Conv1d, C>(d256, 2, 3001, false, seed++, windowed);
  run_config<Conv1d, C>(d256, 2, 2999, true, seed++, windowed);
  run_config<Conv1d, C>({.in_channels = 32,
                         .out_channels = 48,
                         .kernel_size = 3,
                         .padding = 300,
                         .dilation = 512,
                         .bias = false},
                        2, 4000, false, seed++, windowed);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 64, .out_channels = 128, .kernel_size = 3, .padding = 100, .dilation = 200},
      2, 2001, false, seed++, windowed);
  const C d250{
      .in_channels = 64, .out_channels = 128, .kernel_size = 3, .padding = 250, .dilation = 250};
  run_config<Conv1d, C>(d250, 2, 3001, false, seed++, windowed);
  run_config<Conv1d, C>(d250, 2, 3000, false, seed++, windowed);
  run_config<Conv1d, C>(
      {.in_channels = 40, .out_channels = 128, .kernel_size = 3, .padding = 7, .dilation = 243}, 1,
      2500, true, seed++, windowed);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 64, .out_channels = 96, .kernel_size = 3, .padding = 300, .dilation = 350}, 2,
      2001, false, seed++, windowed);
  run_config<Conv1d, C>(  // dilations past 1024 (the register-fragment kernel's limit)
      {.in_channels = 32, .out_channels = 48, .kernel_size = 3, .padding = 2048, .dilation = 2048},
      1, 5000, false, seed++, windowed);
  run_config<Conv1d, C>({.in_channels = 24, .out_channels = 64, .kernel_size = 2, .dilation = 1365},
                        2, 6001, false, seed++, windowed);
  const cc::SsInputCopies after = cc::ss_input_copies();
  run_config<Conv1d, C>(
      {.in_channels = 64, .out_channels = 128, .kernel_size = 3, .padding = 66, .dilation = 66}, 2,
      3001, false, seed++, other);
  MESSAGE("windows per tap: worst ", std::max(windowed.worst, other.worst), " at ",
          windowed.worst >= other.worst ? windowed.worst_config : other.worst_config,
          "; kernels: ", join(windowed.kernels), " | ", join(other.kernels), "; windowed launches ",
          after.windowed - before.windowed);
  CHECK(windowed.runs + other.runs == 12);
  if (cc::wgmma_available()) {
    for (const std::string& k : windowed.kernels) {
      CHECK_MESSAGE(any_precision(k).find("_wgmma_ss_3xtf32_128x128") != std::string::npos, k);
    }
    CHECK(after.windowed - before.windowed == 11);
  }
}

// Kernels of 9 to 13 taps (HiFi-GAN's resblocks use 11) and layers whose 128-row tile does
// not fit the shared memory (a wide span) run on the 64-row tile of the tensor-core kernel; a
// chunk of more than 8 taps is summed in fp32 every 8 steps. 128 channels at K 11 (two 64-row
// column tiles), dilation, ConvTranspose1d with a ragged last chunk, odd rows in a strided
// view, 12 taps on 80 channels, and K 5 at dilation 101.
TEST_CASE("cuda: long kernels and wide spans on the 64-row tensor-core tile against float64") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  std::uint64_t seed = 1111;
  using C = Conv1dOptions;
  using T = ConvTranspose1dOptions;
  run_config<Conv1d, C>({.in_channels = 64, .out_channels = 128, .kernel_size = 11, .padding = 5},
                        2, 3000, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 32, .out_channels = 32, .kernel_size = 11, .padding = 15, .dilation = 3}, 1,
      5000, false, seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 40, .out_channels = 64, .kernel_size = 9, .stride = 1, .padding = 4}, 2, 2001,
      false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 24, .out_channels = 96, .kernel_size = 13, .padding = 6}, 2,
                        2999, true, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 48, .out_channels = 80, .kernel_size = 12, .bias = false},
                        2, 1500, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 64, .out_channels = 128, .kernel_size = 5, .padding = 202, .dilation = 101},
      2, 3001, false, seed++, stats);
  MESSAGE("long kernels: ", stats.runs, " configs, worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 6);
  if (cc::wgmma_available()) {
    for (const std::string& k : stats.kernels) {
      CHECK_MESSAGE(any_precision(k).find("_wgmma_ss_3xtf32_64x256") != std::string::npos, k);
    }
  }
}

// Layers whose three stages exceed the shared memory even at 8 channels per chunk run the
// tensor-core kernel with two: K >= 4 at large dilations (windows per tap on the 128-row tile,
// contiguous rows on the 64-row tile), a dilation that is not a multiple of 4 (windows as
// 16-byte pieces), ConvTranspose1d, and 14-16 taps (summed every 8 steps), odd rows in a
// strided view. In the compute-sanitizer subset: the two-stage ring's barriers and parities.
TEST_CASE("cuda:sanitize two-stage tensor-core kernel against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  std::uint64_t seed = 2718;
  using C = Conv1dOptions;
  using T = ConvTranspose1dOptions;
  const cc::SsInputCopies before = cc::ss_input_copies();
  run_config<Conv1d, C>(
      {.in_channels = 32, .out_channels = 128, .kernel_size = 4, .padding = 300, .dilation = 200},
      2, 3000, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 24, .out_channels = 48, .kernel_size = 4, .padding = 300, .dilation = 200}, 2,
      2001, true, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 32, .out_channels = 128, .kernel_size = 4, .padding = 450, .dilation = 301},
      1, 2500, false, seed++, stats);
  run_config<ConvTranspose1d, T>({.in_channels = 40,
                                  .out_channels = 128,
                                  .kernel_size = 5,
                                  .stride = 1,
                                  .padding = 300,
                                  .dilation = 150},
                                 2, 2001, false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 16, .out_channels = 64, .kernel_size = 15, .padding = 7}, 2,
                        3000, false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 48,
                         .out_channels = 80,
                         .kernel_size = 16,
                         .padding = 22,
                         .dilation = 3,
                         .bias = false},
                        1, 2999, true, seed++, stats);
  run_config<ConvTranspose1d, T>(
      {.in_channels = 32, .out_channels = 64, .kernel_size = 16, .stride = 1, .padding = 8}, 2,
      1500, false, seed++, stats);
  const cc::SsInputCopies after = cc::ss_input_copies();
  MESSAGE("two stages: ", stats.runs, " configs, worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels), "; two-stage launches ",
          after.two_stages - before.two_stages);
  CHECK(stats.runs == 7);
  if (cc::wgmma_available()) {
    for (const std::string& k : stats.kernels) {
      CHECK_MESSAGE(any_precision(k).find("_wgmma_ss_3xtf32_") != std::string::npos, k);
    }
    CHECK(after.two_stages - before.two_stages == 7);
  }
}

// Layers whose taps the shared-memory-operand kernel's stages do not hold (large dilations), as
// groups of consecutive taps on it, summed: equal and unequal groups, 2-4 of them, dilations that
// are and are not multiples of 4, the 64-row tile, groups, reflect padding (zeros padding, then
// the edge outputs), strided views, ConvTranspose1d at stride 1, batch slices. Fails unless
// every layer took the tap groups.
TEST_CASE("cuda:sanitize tap groups on the tensor-core kernel against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  std::uint64_t seed = 3141;
  using C = Conv1dOptions;
  run_config<Conv1d, C>(
      {.in_channels = 32, .out_channels = 128, .kernel_size = 6, .padding = 375, .dilation = 150},
      2, 3000, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 24, .out_channels = 48, .kernel_size = 9, .padding = 512, .dilation = 128}, 1,
      2500, true, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 16, .out_channels = 64, .kernel_size = 7, .dilation = 200, .bias = false}, 2,
      3001, false, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 32,
                         .out_channels = 64,
                         .kernel_size = 8,
                         .padding = 896,
                         .dilation = 256,
                         .padding_mode = PaddingMode::kReflect},
                        1, 2000, true, seed++, stats);
  run_config<Conv1d, C>({.in_channels = 64,
                         .out_channels = 128,
                         .kernel_size = 6,
                         .padding = 400,
                         .dilation = 160,
                         .groups = 2},
                        2, 2001, false, seed++, stats);
  run_config<Conv1d, C>(
      {.in_channels = 16, .out_channels = 128, .kernel_size = 12, .padding = 3, .dilation = 100}, 1,
      2999, false, seed++, stats);
  using T = ConvTranspose1dOptions;
  run_config<ConvTranspose1d, T>({.in_channels = 32,
                                  .out_channels = 128,
                                  .kernel_size = 6,
                                  .stride = 1,
                                  .padding = 375,
                                  .dilation = 150},
                                 2, 2500, false, seed++, stats);
  run_config<ConvTranspose1d, T>({.in_channels = 24,
                                  .out_channels = 64,
                                  .kernel_size = 9,
                                  .stride = 1,
                                  .padding = 100,
                                  .bias = false,
                                  .dilation = 128},
                                 1, 2001, true, seed++, stats);
  {
    // A workspace of one batch item's partial output: each item runs as a slice of its own.
    const std::size_t cap = cc::tap_groups_workspace_cap();
    cc::set_tap_groups_workspace_cap(1);
    run_config<Conv1d, C>(
        {.in_channels = 32, .out_channels = 64, .kernel_size = 9, .padding = 500, .dilation = 125},
        3, 2003, true, seed++, stats);
    run_config<ConvTranspose1d, T>({.in_channels = 32,
                                    .out_channels = 128,
                                    .kernel_size = 6,
                                    .stride = 1,
                                    .padding = 10,
                                    .dilation = 150},
                                   2, 1800, false, seed++, stats);
    cc::set_tap_groups_workspace_cap(cap);
  }
  MESSAGE("tap groups: ", stats.runs, " configs, worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 10);
  if (cc::wgmma_available()) {
    for (const std::string& k : stats.kernels) {
      CHECK_MESSAGE(any_precision(k).find("_taps_wgmma_ss_3xtf32_") != std::string::npos, k);
    }
  }
}

// ---- full-size workloads, checked on slices against float64 --------------------------------

using convbank::detail::kWorkloads;  // workloads.md, GPU table
using convbank::detail::Workload;

double ref_conv1d_at(const Workload& w, const float* x, const float* wt, const float* bias,
                     std::int64_t b, std::int64_t co, std::int64_t t) {
  const std::int64_t cg = w.cin / w.groups, og = w.cout / w.groups, g = co / og;
  double acc = bias[co];
  for (std::int64_t c = 0; c < cg; ++c) {
    const float* row = x + (b * w.cin + g * cg + c) * w.frames;
    for (std::int64_t k = 0; k < w.k; ++k) {
      const std::int64_t i = t * w.stride + k * w.dilation - w.padding;
      if (i >= 0 && i < w.frames) acc += static_cast<double>(wt[(co * cg + c) * w.k + k]) * row[i];
    }
  }
  return acc;
}

double ref_conv_transpose1d_at(const Workload& w, const float* x, const float* wt,
                               const float* bias, std::int64_t b, std::int64_t co, std::int64_t t) {
  const std::int64_t cg = w.cin / w.groups, og = w.cout / w.groups, g = co / og;
  double acc = bias[co];
  for (std::int64_t c = 0; c < cg; ++c) {
    const std::int64_t ci = g * cg + c;
    const float* row = x + (b * w.cin + ci) * w.frames;
    for (std::int64_t k = 0; k < w.k; ++k) {
      const std::int64_t num = t + w.padding - k * w.dilation;
      if (num < 0 || num % w.stride != 0) continue;
      const std::int64_t j = num / w.stride;
      if (j < w.frames) acc += static_cast<double>(wt[(ci * og + co % og) * w.k + k]) * row[j];
    }
  }
  return acc;
}

// Runs one workload at full size; checks every output is written and a float64 slice (both
// ends, the middle; first/last batch; first/middle/last channel) to 1e-6 relative L2.
void check_workload(const Workload& w, void* stream = nullptr) {
  const std::string workload_name = w.name;
  CAPTURE(workload_name);
  const Shape in{w.n, w.cin, w.frames};
  Tensor xh(in);
  fill_hash(xh.data(), xh.numel(), 1);
  const Shape ws =
      w.transposed ? Shape{w.cin, w.cout / w.groups, w.k} : Shape{w.cout, w.cin / w.groups, w.k};
  Tensor wh(ws), bh(Shape{1, 1, w.cout});
  fill_hash(wh.data(), wh.numel(), 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(ws.channels * w.k));
  for (std::int64_t i = 0; i < wh.numel(); ++i) wh.data()[i] *= scale;
  fill_hash(bh.data(), bh.numel(), 3);
  Tensor xd = xh.to(Device::kCuda);
  Tensor yd;
  std::string kernel;
  if (!w.transposed) {
    Conv1d layer({.in_channels = w.cin,
                  .out_channels = w.cout,
                  .kernel_size = w.k,
                  .stride = w.stride,
                  .padding = w.padding,
                  .dilation = w.dilation,
                  .groups = w.groups});
    layer.set_weight(wh.view());
    layer.set_bias(bh.view());
    yd = Tensor(layer.output_shape(in), Device::kCuda);
    poison(yd);
    kernel = kernel_of(layer, in);
    layer.forward(xd.view(), yd.view(), stream);
  } else {
    ConvTranspose1d layer({.in_channels = w.cin,
                           .out_channels = w.cout,
                           .kernel_size = w.k,
                           .stride = w.stride,
                           .padding = w.padding,
                           .groups = w.groups,
                           .dilation = w.dilation});
    layer.set_weight(wh.view());
    layer.set_bias(bh.view());
    yd = Tensor(layer.output_shape(in), Device::kCuda);
    poison(yd);
    kernel = kernel_of(layer, in);
    layer.forward(xd.view(), yd.view(), stream);
  }
  if (stream != nullptr) REQUIRE(cudaStreamSynchronize(stream) == 0);
  CAPTURE(kernel);
  const Tensor yh = yd.to(Device::kCpu);
  CHECK_MESSAGE(all_finite(yh), "unwritten (NaN) outputs");
  const std::int64_t T = yh.shape().frames;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {
      {0, std::min<std::int64_t>(T, 300)},
      {std::max<std::int64_t>(0, T / 2 - 77), std::min<std::int64_t>(T, T / 2 + 100)},
      {std::max<std::int64_t>(0, T - 300), T}};
  std::set<std::int64_t> batches = {0, w.n - 1}, channels = {0, w.cout / 2, w.cout - 1};
  double num = 0.0, den = 0.0;
  for (std::int64_t b : batches) {
    for (std::int64_t c : channels) {
      for (auto [t0, t1] : ranges) {
        for (std::int64_t t = t0; t < t1; ++t) {
          const double r =
              w.transposed ? ref_conv_transpose1d_at(w, xh.data(), wh.data(), bh.data(), b, c, t)
                           : ref_conv1d_at(w, xh.data(), wh.data(), bh.data(), b, c, t);
          const double d = yh(b, c, t) - r;
          num += d * d;
          den += r * r;
        }
      }
    }
  }
  const double err = std::sqrt(num / den);
  MESSAGE(std::string(w.name), ": kernel ", kernel, ", relative L2 on slices ", err);
  CHECK(err <= kTolerance);
}

}  // namespace

TEST_CASE("cuda: conv1d random grid against the float64 oracle") {
  CUDA_OR_SKIP();
  GridStats stats;
  conv1d_grid(320, 20261129, stats);
  MESSAGE("conv1d grid: ", stats.runs, " configs (", stats.strided, " strided), worst ",
          stats.worst, " at ", stats.worst_config, "; kernels: ", join(stats.kernels));
  CHECK(stats.runs >= 300);
  // Every kernel family was exercised by the grid.
  for (const char* k : {"conv1d_winograd_f43_ffma", "conv1d_direct_coalesced", "conv1d_direct_flat",
                        "conv1d_encoder_ffma", "conv1d_depthwise_staged"}) {
    CHECK_MESSAGE(stats.kernels.count(k) == 1, "grid never ran ", k);
  }
  for (const char* prefix : {"conv1d_implicit_gemm_ffma_", "conv1d_gemm_v2_ffma_"}) {
    CHECK_MESSAGE(std::any_of(stats.kernels.begin(), stats.kernels.end(),
                              [&](const std::string& k) { return k.rfind(prefix, 0) == 0; }),
                  "grid never ran ", prefix, "*");
  }
}

TEST_CASE("cuda: conv_transpose1d random grid against the float64 oracle") {
  CUDA_OR_SKIP();
  GridStats stats;
  conv_transpose1d_grid(320, 777, stats);
  MESSAGE("conv_transpose1d grid: ", stats.runs, " configs (", stats.strided, " strided), worst ",
          stats.worst, " at ", stats.worst_config, "; kernels: ", join(stats.kernels));
  CHECK(stats.runs >= 300);
  for (const char* k : {"conv_transpose1d_winograd_f43_ffma", "conv_transpose1d_direct_gather",
                        "conv_transpose1d_polyphase_narrow"}) {
    CHECK_MESSAGE(stats.kernels.count(k) == 1, "grid never ran ", k);
  }
  CHECK_MESSAGE(std::any_of(stats.kernels.begin(), stats.kernels.end(),
                            [](const std::string& k) {
                              return k.rfind("conv_transpose1d_polyphase_gemm_ffma", 0) == 0;
                            }),
                "grid never ran conv_transpose1d_polyphase_gemm_ffma_*");
}

// Edge cases a random grid can miss.
TEST_CASE("cuda: edges (single frame, K > frames with padding, big stride, wide GEMM tiles)") {
  CUDA_OR_SKIP();
  GridStats stats;
  std::uint64_t seed = 5;
  // Conv1d: one output frame, kernel longer than the input (padding), stride > K.
  run_config<Conv1d, Conv1dOptions>(
      {.in_channels = 3, .out_channels = 70, .kernel_size = 9, .stride = 1, .padding = 4}, 2, 1,
      false, seed++, stats);
  run_config<Conv1d, Conv1dOptions>({.in_channels = 2,
                                     .out_channels = 130,
                                     .kernel_size = 2,
                                     .stride = 5,
                                     .padding = 1,
                                     .padding_mode = PaddingMode::kCircular},
                                    1, 301, false, seed++, stats);
  run_config<Conv1d, Conv1dOptions>(
      {.in_channels = 1, .out_channels = 514, .kernel_size = 64, .stride = 16}, 2, 1000, true,
      seed++, stats);
  run_config<Conv1d, Conv1dOptions>({.in_channels = 130, .out_channels = 129, .kernel_size = 1}, 2,
                                    517, false, seed++, stats);
  run_config<Conv1d, Conv1dOptions>({.in_channels = 64,
                                     .out_channels = 128,
                                     .kernel_size = 3,
                                     .padding = Padding::same(),
                                     .padding_mode = PaddingMode::kReflect},
                                    1, 4, false, seed++, stats);
  run_config<Conv1d, Conv1dOptions>({.in_channels = 64,
                                     .out_channels = 128,
                                     .kernel_size = 3,
                                     .padding = 1,
                                     .padding_mode = PaddingMode::kCircular},
                                    2, 131, true, seed++, stats);
  // ConvTranspose1d: stride > K (phases with no taps), output_padding, decoders.
  run_config<ConvTranspose1d, ConvTranspose1dOptions>({.in_channels = 5,
                                                       .out_channels = 7,
                                                       .kernel_size = 2,
                                                       .stride = 5,
                                                       .padding = 0,
                                                       .output_padding = 3},
                                                      2, 33, false, seed++, stats);
  run_config<ConvTranspose1d, ConvTranspose1dOptions>(
      {.in_channels = 130, .out_channels = 1, .kernel_size = 64, .stride = 16, .padding = 3}, 2, 50,
      true, seed++, stats);
  run_config<ConvTranspose1d, ConvTranspose1dOptions>(
      {.in_channels = 64, .out_channels = 32, .kernel_size = 4, .stride = 2, .padding = 1}, 2, 257,
      false, seed++, stats);
  run_config<ConvTranspose1d, ConvTranspose1dOptions>(
      {.in_channels = 128, .out_channels = 128, .kernel_size = 3, .stride = 1, .padding = 5}, 1,
      300, false, seed++, stats);
  run_config<ConvTranspose1d, ConvTranspose1dOptions>({.in_channels = 3,
                                                       .out_channels = 6,
                                                       .kernel_size = 5,
                                                       .stride = 3,
                                                       .padding = 2,
                                                       .output_padding = 1,
                                                       .groups = 3,
                                                       .dilation = 2},
                                                      2, 40, false, seed++, stats);
  MESSAGE("edges: worst ", stats.worst, " at ", stats.worst_config);
  CHECK(stats.runs == 11);
}

// STFT-like decoders (one output channel per group, stride >= 32, K a multiple of the stride):
// the phase GEMM, split over thread-block clusters where the output tiles underfill the GPU.
// Ragged channels, frames, phases below a tile, two row tiles, padding, output_padding, groups,
// strided views.
TEST_CASE("cuda: phase GEMM with the reduction split over clusters (STFT-like decoders)") {
  CUDA_OR_SKIP();
  // The FFMA phase GEMM, which runs these where the tensor-core kernels do not (other GPUs,
  // CONVBANK_CUDA_WGMMA=0): on a 9.0 device the larger ones go to depth-to-space otherwise.
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kNever);
  GridStats stats;
  std::uint64_t seed = 31;
  using O = ConvTranspose1dOptions;
  run_config<ConvTranspose1d, O>(
      {.in_channels = 514, .out_channels = 1, .kernel_size = 512, .stride = 128}, 2, 37, false,
      seed++, stats);
  run_config<ConvTranspose1d, O>({.in_channels = 257,
                                  .out_channels = 1,
                                  .kernel_size = 256,
                                  .stride = 64,
                                  .padding = 32,
                                  .output_padding = 5},
                                 3, 100, true, seed++, stats);
  run_config<ConvTranspose1d, O>({.in_channels = 100,
                                  .out_channels = 2,
                                  .kernel_size = 96,
                                  .stride = 32,
                                  .padding = 7,
                                  .groups = 2},
                                 1, 50, false, seed++, stats);
  run_config<ConvTranspose1d, O>(
      {.in_channels = 130, .out_channels = 1, .kernel_size = 160, .stride = 40, .padding = 3}, 2,
      300, true, seed++, stats);
  run_config<ConvTranspose1d, O>(
      {.in_channels = 33, .out_channels = 1, .kernel_size = 1024, .stride = 256, .padding = 100}, 1,
      20, false, seed++, stats);
  run_config<ConvTranspose1d, O>(
      {.in_channels = 1030, .out_channels = 1, .kernel_size = 128, .stride = 128}, 1, 1, false,
      seed++, stats);
  MESSAGE("phase split: worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 6);
  if (device_has_clusters()) {
    CHECK_MESSAGE(std::any_of(stats.kernels.begin(), stats.kernels.end(),
                              [](const std::string& k) {
                                return k.find("phase_gemm_v2_ffma_") != std::string::npos &&
                                       k.find("_split") != std::string::npos;
                              }),
                  "no split phase GEMM ran");
  }
}

// The memory-bound kernels (conv_memory.cu) on the shapes that reach them: one-channel encoders
// (ragged channel and frame tiles, groups, every padding mode, stride above K, K = 1), depthwise
// layers (channel multipliers, stride, dilation, windows over several blocks) and decoders
// (2 and 4 taps, 4/8/16 phases with unused ones, padding that starts mid-block, output_padding,
// groups, misaligned rows). The decoders are sized to well over 200 blocks, above the
// multiprocessor count below which the split-reduction kernel takes them instead.
TEST_CASE("cuda: memory-bound kernels (encoder, depthwise, decoder) against the float64 oracle") {
  CUDA_OR_SKIP();
  // The policy that keeps the tensor cores out: on a 9.0 device depth-to-space would take the
  // larger decoders of four channels (s * out/groups >= 32 rows).
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kNever);
  const EncoderAlignedScope aligned(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  std::uint64_t seed = 4242;
  using C = Conv1dOptions;
  using T = ConvTranspose1dOptions;
  std::set<std::string> expected;
  auto conv = [&](const C& o, std::int64_t n, std::int64_t frames, bool strided, const char* k) {
    expected.insert(k);
    CHECK(std::string(kernel_of(Conv1d(o), Shape{n, o.in_channels, frames})) == k);
    CHECK(run_config<Conv1d, C>(o, n, frames, strided, seed++, stats));
  };
  auto transpose = [&](const T& o, std::int64_t n, std::int64_t frames, bool strided,
                       const char* k) {
    expected.insert(k);
    CHECK(std::string(kernel_of(ConvTranspose1d(o), Shape{n, o.in_channels, frames})) == k);
    CHECK(run_config<ConvTranspose1d, T>(o, n, frames, strided, seed++, stats));
  };
  const char* enc = "conv1d_encoder_ffma";
  const char* enc2 = "conv1d_encoder_aligned_ffma";
  const char* dw = "conv1d_depthwise_staged";
  const char* dec = "conv_transpose1d_decoder_ffma";
  // The aligned encoder (>= 64 outputs per group, dilation 1): rows of every alignment (odd
  // lengths, strided views), ragged channel tiles, taps per phase from 1 to 5 with phases of
  // fewer taps (K not whole strides, K < stride), stride 1, every padding mode, groups, tiles
  // that end mid-row and rows shorter than a tile.
  conv({.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8}, 2, 3001, true,
       enc2);
  conv({.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8}, 3, 16383 * 8 + 15,
       false, enc2);
  conv({.in_channels = 1,
        .out_channels = 70,
        .kernel_size = 64,
        .stride = 16,
        .padding = 5,
        .padding_mode = PaddingMode::kReflect},
       2, 4000, false, enc);  // two windows of 16 phases do not fit: 4-byte stores
  conv({.in_channels = 1, .out_channels = 130, .kernel_size = 20, .stride = 10, .bias = false}, 2,
       30011, true, enc2);
  conv({.in_channels = 2,
        .out_channels = 256,
        .kernel_size = 7,
        .stride = 3,
        .padding = 3,
        .groups = 2,
        .padding_mode = PaddingMode::kCircular},
       2, 9001, true, enc2);
  conv({.in_channels = 1, .out_channels = 96, .kernel_size = 4, .stride = 6}, 2, 12007, false,
       enc2);
  conv({.in_channels = 1,
        .out_channels = 64,
        .kernel_size = 5,
        .padding = 2,
        .padding_mode = PaddingMode::kReplicate},
       2, 2501, true, enc2);
  conv({.in_channels = 1, .out_channels = 64, .kernel_size = 9, .stride = 1}, 1, 5000, false, enc2);
  conv({.in_channels = 1, .out_channels = 128, .kernel_size = 1}, 2, 3333, true, enc2);
  conv({.in_channels = 1, .out_channels = 200, .kernel_size = 32, .stride = 4, .padding = 7}, 2,
       7777, true, enc2);
  conv({.in_channels = 1, .out_channels = 64, .kernel_size = 16, .stride = 8}, 2, 1100, true, enc2);
  // The 4-byte-store encoder: fewer outputs per group, dilation.
  conv({.in_channels = 1, .out_channels = 48, .kernel_size = 16, .stride = 8}, 2, 3001, true, enc);
  conv({.in_channels = 1, .out_channels = 512, .kernel_size = 8, .stride = 4, .dilation = 2}, 2,
       4001, false, enc);
  conv({.in_channels = 3,
        .out_channels = 60,
        .kernel_size = 7,
        .stride = 3,
        .padding = 4,
        .dilation = 2,
        .groups = 3,
        .padding_mode = PaddingMode::kCircular},
       2, 1500, true, enc);
  conv({.in_channels = 1,
        .out_channels = 16,
        .kernel_size = 5,
        .padding = 2,
        .padding_mode = PaddingMode::kReplicate},
       3, 777, false, enc);
  conv({.in_channels = 1, .out_channels = 32, .kernel_size = 1}, 2, 500, false, enc);
  conv({.in_channels = 1, .out_channels = 40, .kernel_size = 4, .stride = 6, .bias = false}, 2, 999,
       false, enc);
  conv({.in_channels = 64,
        .out_channels = 64,
        .kernel_size = 3,
        .padding = 8,
        .dilation = 8,
        .groups = 64},
       2, 5000, true, dw);
  conv({.in_channels = 16,
        .out_channels = 48,
        .kernel_size = 5,
        .stride = 2,
        .padding = 2,
        .groups = 16,
        .padding_mode = PaddingMode::kReflect},
       2, 3000, false, dw);
  conv({.in_channels = 8,
        .out_channels = 8,
        .kernel_size = 31,
        .padding = Padding::same(),
        .groups = 8,
        .padding_mode = PaddingMode::kReplicate},
       1, 2100, false, dw);
  conv({.in_channels = 4,
        .out_channels = 4,
        .kernel_size = 9,
        .stride = 7,
        .padding = 4,
        .dilation = 3,
        .groups = 4,
        .padding_mode = PaddingMode::kCircular},
       2, 9000, true, dw);
  conv({.in_channels = 1, .out_channels = 1, .kernel_size = 3}, 3, 4097, false, dw);
  // More depthwise rows: dilation 1 to 3, rows of odd lengths and offset views, channel
  // multipliers, every padding mode, rows of one block and of several.
  conv({.in_channels = 32,
        .out_channels = 96,
        .kernel_size = 3,
        .padding = 1,
        .groups = 32,
        .padding_mode = PaddingMode::kReflect},
       2, 9001, true, dw);
  conv({.in_channels = 6,
        .out_channels = 12,
        .kernel_size = 7,
        .padding = 9,
        .dilation = 3,
        .groups = 6,
        .padding_mode = PaddingMode::kCircular},
       3, 8191, false, dw);
  conv({.in_channels = 5, .out_channels = 5, .kernel_size = 4, .dilation = 2, .groups = 5}, 2,
       12347, true, dw);
  conv({.in_channels = 3, .out_channels = 3, .kernel_size = 2, .groups = 3, .bias = false}, 4, 131,
       false, dw);
  conv({.in_channels = 7,
        .out_channels = 7,
        .kernel_size = 5,
        .padding = 2,
        .groups = 7,
        .padding_mode = PaddingMode::kReplicate},
       1, 4003, true, dw);
  // Windows at the rows' edges, staged as padding plus asynchronous copies of the part inside
  // the row: padding of every mode and of 1, 6, 8 and 9 frames, channel multipliers, rows of
  // several windows, K = 1 without bias.
  conv({.in_channels = 16,
        .out_channels = 32,
        .kernel_size = 5,
        .padding = 6,
        .dilation = 3,
        .groups = 16,
        .padding_mode = PaddingMode::kReflect},
       2, 6000, false, dw);
  conv({.in_channels = 8,
        .out_channels = 8,
        .kernel_size = 3,
        .padding = 1,
        .groups = 8,
        .padding_mode = PaddingMode::kReplicate},
       3, 12288, false, dw);
  conv({.in_channels = 12,
        .out_channels = 12,
        .kernel_size = 7,
        .padding = 9,
        .dilation = 3,
        .groups = 12,
        .padding_mode = PaddingMode::kCircular},
       2, 8192, false, dw);
  conv({.in_channels = 4,
        .out_channels = 8,
        .kernel_size = 3,
        .padding = 8,
        .dilation = 8,
        .groups = 4},
       3, 8192, false, dw);
  conv({.in_channels = 6, .out_channels = 6, .kernel_size = 1, .groups = 6, .bias = false}, 2, 4100,
       false, dw);
  transpose({.in_channels = 24, .out_channels = 4, .kernel_size = 16, .stride = 8, .padding = 4}, 4,
            13000, false, dec);
  transpose({.in_channels = 24, .out_channels = 4, .kernel_size = 16, .stride = 8, .padding = 4}, 4,
            13000, true, dec);
  transpose({.in_channels = 40,
             .out_channels = 1,
             .kernel_size = 12,
             .stride = 3,
             .padding = 2,
             .output_padding = 1},
            8, 30000, false, dec);
  transpose({.in_channels = 10,
             .out_channels = 2,
             .kernel_size = 32,
             .stride = 16,
             .padding = 40,
             .groups = 2},
            70, 2100, true, dec);
  transpose({.in_channels = 33, .out_channels = 1, .kernel_size = 40, .stride = 10, .padding = 17},
            210, 1000, false, dec);
  transpose({.in_channels = 16,
             .out_channels = 3,
             .kernel_size = 6,
             .stride = 2,
             .padding = 1,
             .bias = false},
            70, 1030, false, dec);
  // Rows' last tiles of 1 and 3 live warps: their channels split over 8 and 2 warps (1324
  // frames: two warps idle).
  transpose({.in_channels = 24, .out_channels = 1, .kernel_size = 16, .stride = 8}, 70, 1024, true,
            dec);
  transpose({.in_channels = 40, .out_channels = 1, .kernel_size = 16, .stride = 8}, 70, 1324, false,
            dec);
  // 27 input channels: the last group of 4 is computed whole with zero-padded weights;
  // misaligned rows, tiles inside the row and at its edges.
  transpose({.in_channels = 27, .out_channels = 2, .kernel_size = 8, .stride = 4, .padding = 3}, 40,
            5000, true, dec);
  // Weights larger than the shared-memory chunk (600 channels x 16 taps): two ragged chunks.
  transpose({.in_channels = 600, .out_channels = 1, .kernel_size = 16, .stride = 8, .padding = 2},
            140, 200, false, dec);
  MESSAGE("memory-bound kernels: worst ", stats.worst, " at ", stats.worst_config,
          "; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 42);
  CHECK(stats.kernels == expected);
}

// One-channel encoder layers of every kind the encoder kernels take, for their sanitize cases:
// conv(options, batch, frames, strided view). Rows shorter than a tile, K 1 to 32 (every count of
// taps held), strides 1 to 16 with and without the bank padding of the phase rows, dilation,
// every padding mode, groups, ragged channel tiles, odd rows and strided views.
template <class Conv>
void for_each_encoder_layer(Conv&& conv) {
  conv({.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8}, 2, 12001, true);
  conv({.in_channels = 1,
        .out_channels = 70,
        .kernel_size = 20,
        .stride = 10,
        .padding = 5,
        .padding_mode = PaddingMode::kReflect},
       2, 4000, false);
  conv({.in_channels = 1, .out_channels = 48, .kernel_size = 8, .stride = 4, .dilation = 2}, 3,
       4001, true);
  conv({.in_channels = 3,
        .out_channels = 60,
        .kernel_size = 7,
        .stride = 3,
        .padding = 4,
        .dilation = 2,
        .groups = 3,
        .padding_mode = PaddingMode::kCircular},
       2, 1500, true);
  conv({.in_channels = 1, .out_channels = 32, .kernel_size = 1}, 2, 700, false);
  conv({.in_channels = 1, .out_channels = 256, .kernel_size = 32, .stride = 16, .bias = false}, 2,
       8011, false);
  conv({.in_channels = 1,
        .out_channels = 128,
        .kernel_size = 3,
        .padding = 1,
        .padding_mode = PaddingMode::kReplicate},
       1, 2501, true);
  conv({.in_channels = 1, .out_channels = 40, .kernel_size = 4, .stride = 6, .bias = false}, 2, 999,
       false);
  conv({.in_channels = 1, .out_channels = 100, .kernel_size = 5, .stride = 3, .padding = 2}, 2, 777,
       true);
  conv({.in_channels = 1, .out_channels = 64, .kernel_size = 16, .stride = 8}, 5, 1500, false);
  conv({.in_channels = 2, .out_channels = 36, .kernel_size = 12, .stride = 2, .groups = 2}, 2, 6000,
       false);
  conv({.in_channels = 1, .out_channels = 96, .kernel_size = 26, .stride = 13}, 2, 5000, true);
  conv({.in_channels = 1, .out_channels = 20, .kernel_size = 23, .stride = 5, .padding = 11}, 1,
       3000, false);
  // Strides and K multiples of 4 on windows that start on 16-byte boundaries (padding 8),
  // ragged channel tiles, and groups.
  conv({.in_channels = 1, .out_channels = 70, .kernel_size = 12, .stride = 4, .padding = 8}, 2,
       6000, false);
  conv({.in_channels = 2, .out_channels = 64, .kernel_size = 8, .stride = 8, .groups = 2}, 3, 8192,
       true);
}

// The local-order encoder (conv1d_encoder_local_ffma) forced onto layers of every kind it takes,
// on five tiles, the default 32 x 1024 among them.
TEST_CASE("cuda:sanitize local-order encoder on every tile against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kNever);
  const EncoderLocalScope local(cc::WgmmaPolicy::kAlways);
  struct TileScope {
    std::pair<int, int> before = cc::set_encoder_local_tile(32, 1);
    ~TileScope() { cc::set_encoder_local_tile(before.first, before.second); }
  } tile_scope;
  struct AlignScope {
    int before = cc::set_encoder_local_align(0);  // the default, whatever the environment set
    ~AlignScope() { cc::set_encoder_local_align(before); }
  } align_scope;
  using C = Conv1dOptions;
  GridStats stats;
  std::uint64_t seed = 5150;
  int launches = 0;
  const std::uint64_t aligned_before = cc::encoder_local_aligned_launches();
  auto conv = [&](const C& o, std::int64_t n, std::int64_t frames, bool strided) {
    CHECK(run_on_kernel("conv1d_encoder_local_ffma", o, n, frames, strided, seed++, stats));
    ++launches;
  };
  // Tiles of 32 x 256, 16 x 512, 8 x 1024 and 32 x 1024 (four frames per lane where K <= 16,
  // else two) and 64 x 512 frames: ragged channel and frame tiles, rows shorter than a tile, every
  // count of taps held (4 to 32 by 4: K 1 to 32), strides 1 to 16 with and without the bank padding
  // of the phase rows, dilation, every padding mode, groups, odd rows and strided views, and more
  // tiles than resident blocks.
  for (const auto& [channels, lanes] : {std::pair{32, 1}, {16, 2}, {8, 4}, {32, 4}, {64, 2}}) {
    CAPTURE(channels);
    CAPTURE(lanes);
    cc::set_encoder_local_tile(channels, lanes);
    for_each_encoder_layer(conv);
  }
  // The tiles above share their rows' offset within a 32-byte sector (the default alignment: on
  // odd rows a tile's channels lie 8 apart, on even ones fewer), each tile's frames shifted to
  // start on it; here also no alignment, and whole 128-byte lines (channels 32 apart) and 64
  // bytes.
  for (const auto& [align, channels, lanes] : {std::tuple{1, 32, 4}, {32, 16, 4}, {16, 16, 2}}) {
    CAPTURE(align);
    CAPTURE(channels);
    CAPTURE(lanes);
    cc::set_encoder_local_align(align);
    cc::set_encoder_local_tile(channels, lanes);
    for_each_encoder_layer(conv);
  }
  MESSAGE("local-order encoder: ", launches, " launches, worst ", stats.worst, " at ",
          stats.worst_config);
  CHECK(launches == 120);
  // The launches on aligned tiles, as scripts/local_tiles_check.py counts them from the tile
  // rules (it also checks there that every output is written once).
  const std::uint64_t aligned = cc::encoder_local_aligned_launches() - aligned_before;
  MESSAGE("local-order encoder: ", aligned, " launches on aligned channel tiles");
  CHECK(aligned == 41);
  CHECK(stats.worst <= kTolerance);
}

// The tensor-core encoder (conv1d_encoder_wgmma_3xtf32) forced onto layers of every kind it
// takes, on items of 256, 64 and 512 channels: 1 to 8 channel tiles per item (ragged ones too),
// items inside a block's chunk of weights and two chunks (600 channels), 1 to 4 reduction steps (K
// 1 to 32), strides 1 to 16, dilation, every padding mode, groups (the weights reloaded per group),
// odd rows, strided views and rows shorter than a tile.
TEST_CASE("cuda:sanitize tensor-core encoder against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  if (!cc::wgmma_available()) {
    MESSAGE("no sm_90a device: the tensor-core encoder does not run here");
    return;
  }
  const EncoderWgmmaScope scope(cc::WgmmaPolicy::kAlways);
  struct TileScope {
    int before = cc::set_encoder_wgmma_tile(256);
    ~TileScope() { cc::set_encoder_wgmma_tile(before); }
  } tile_scope;
  using C = Conv1dOptions;
  GridStats stats;
  std::uint64_t seed = 6061;
  int launches = 0;
  auto conv = [&](const C& o, std::int64_t n, std::int64_t frames, bool strided) {
    CHECK(run_on_kernel("conv1d_encoder_wgmma_3xtf32", o, n, frames, strided, seed++, stats));
    ++launches;
  };
  for (const int channels : {256, 64, 512}) {
    CAPTURE(channels);
    cc::set_encoder_wgmma_tile(channels);
    for_each_encoder_layer(conv);
    // Two chunks of weights (600 channels), 130 channels per group (three of an item's four
    // tiles), a row of two items whose last is partly past the row.
    conv({.in_channels = 1, .out_channels = 600, .kernel_size = 12, .stride = 6, .padding = 2}, 2,
         3000, false);
    conv({.in_channels = 2, .out_channels = 260, .kernel_size = 24, .stride = 2, .groups = 2}, 2,
         3000, false);
    conv({.in_channels = 1, .out_channels = 200, .kernel_size = 16, .stride = 8, .padding = 3}, 1,
         3001, false);
  }
  MESSAGE("tensor-core encoder: ", launches, " launches, worst ", stats.worst, " at ",
          stats.worst_config);
  CHECK(launches == 54);
  CHECK(stats.worst <= kTolerance);
}

// The pointwise tensor-core kernel (conv_pointwise_wgmma.cu): activations split into fp16 pairs
// in registers, one scale per frame and 32-channel stage, weights per column, streamed with the
// input. Input channels from 16 to 640 (ragged last stage, quad rows past the group), output
// channels that leave a ragged column tile (1, 100, 300), column tiles in pairs (2 and 4 per
// group, one block tile computing both) and alone (1, 5), groups, padding on either side (zeros;
// reflect through the edge pass), rows of odd length whose quad rows start mid-16 bytes, one tile
// and many per row, a view whose channel stride exceeds its frames; misaligned views take the
// shared-memory-operand kernel instead (not counted as launches). Then the data the 3xFP16 scales
// must follow: loud and quiet stretches (1e-6 .. 1e3 within a row, and from row to row), and weight
// columns of very different magnitudes.
TEST_CASE("cuda:sanitize pointwise tensor-core kernel against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  if (!cc::wgmma_available()) {
    MESSAGE("no sm_90a device: the pointwise tensor-core kernel does not run here");
    return;
  }
  const PointwiseScope scope(cc::WgmmaPolicy::kAlways);
  using C = Conv1dOptions;
  GridStats stats;
  std::uint64_t seed = 7171;
  int layers = 0;
  const std::uint64_t before = cc::pointwise_wgmma_launches();
  auto conv = [&](const C& o, std::int64_t n, std::int64_t frames, bool strided) {
    CHECK(run_on_kernel("conv1d_pointwise_wgmma_3xfp16", o, n, frames, strided, seed++, stats));
    if (!strided) ++layers;
  };
  conv({.in_channels = 64, .out_channels = 128, .kernel_size = 1}, 2, 4096, false);
  conv({.in_channels = 512, .out_channels = 128, .kernel_size = 1}, 1, 3001, false);
  conv({.in_channels = 16, .out_channels = 100, .kernel_size = 1, .padding = 3}, 2, 3001, false);
  conv({.in_channels = 200, .out_channels = 300, .kernel_size = 1}, 1, 777, false);
  conv({.in_channels = 36, .out_channels = 1, .kernel_size = 1, .padding = 1}, 3, 129, false);
  conv({.in_channels = 128, .out_channels = 128, .kernel_size = 1, .groups = 2}, 2, 1000, false);
  // Two column tiles inside each of two groups, and four column tiles of one group: blocks whose
  // tiles change (group, column tile) stage other weights.
  conv({.in_channels = 128, .out_channels = 256, .kernel_size = 1, .groups = 2}, 2, 1000, false);
  conv({.in_channels = 64, .out_channels = 256, .kernel_size = 1}, 1, 2000, false);
  // 20 stages of streamed weights: more input channels than shared memory could hold planes for.
  conv({.in_channels = 640, .out_channels = 96, .kernel_size = 1}, 1, 1500, false);
  conv({.in_channels = 96, .out_channels = 64, .kernel_size = 1, .padding = 130}, 1, 500, false);
  conv({.in_channels = 64,
        .out_channels = 80,
        .kernel_size = 1,
        .padding = 2,
        .padding_mode = PaddingMode::kReflect},
       2, 1001, false);
  conv({.in_channels = 64, .out_channels = 96, .kernel_size = 1}, 2, 1001, true);
  CHECK(cc::pointwise_wgmma_launches() - before == static_cast<std::uint64_t>(layers));

  // A view whose rows are longer than its frames, 16-byte aligned: the copy engine reads it.
  {
    const C o{
        .in_channels = 128, .out_channels = 96, .kernel_size = 1, .padding = 1, .bias = false};
    const std::int64_t n = 2, frames = 2999, xcs = frames + 9, xbs = o.in_channels * xcs;
    const RoundedData d = rounded_data(o, n, frames, seed++, 0.1, [](auto&, auto&) {});
    Conv1d layer(o);
    layer.set_weight(d.wt.view());
    Tensor xbig(Shape{n, o.in_channels, xcs}, Device::kCuda);
    poison(xbig);
    TensorView<float> xv(xbig.data(), d.xt.shape(), xbs, xcs, Device::kCuda);
    convbank::copy(d.xt.view(), xv);
    const Shape out_shape = layer.output_shape(d.xt.shape());
    Tensor yd(out_shape, Device::kCuda);
    poison(yd);
    const std::uint64_t seen = cc::pointwise_wgmma_launches();
    layer.forward(TensorView<const float>(xv), yd.view());
    CHECK(cc::pointwise_wgmma_launches() == seen + 1);
    const double err = oracle::relative_l2(yd.to(Device::kCpu), oracle::conv1d(d.x, d.w, {}, o));
    CHECK(err <= kTolerance);
    stats.worst = std::max(stats.worst, err);
  }

  // Loud and quiet stretches: each frame's 32-channel stages, and whole rows, move by up to 9
  // decades; and weight columns from 1e-4 to 1e4.
  {
    const C o{.in_channels = 256, .out_channels = 128, .kernel_size = 1, .bias = false};
    const std::int64_t n = 2, frames = 2048;
    std::mt19937_64 rng(seed++);
    const RoundedData d = rounded_data(o, n, frames, seed++, 0.1, [&](auto& xa, auto& wa) {
      std::uniform_real_distribution<double> decade(-6.0, 3.0);
      for (std::int64_t b = 0; b < n; ++b) {
        for (std::int64_t c = 0; c < o.in_channels; ++c) {
          const double row = std::pow(10.0, decade(rng) / 3.0);
          for (std::int64_t t = 0; t < frames; ++t) {
            const double stretch = ((t / 300) % 3 == 0) ? 1e-6 : ((t / 300) % 3 == 1) ? 1.0 : 1e3;
            xa.data[(b * o.in_channels + c) * frames + t] *= row * stretch;
          }
        }
      }
      for (std::int64_t co = 0; co < o.out_channels; ++co) {
        const double col = std::pow(10.0, static_cast<double>(co % 9) - 4.0);
        for (std::int64_t ci = 0; ci < o.in_channels; ++ci) wa.data[co * o.in_channels + ci] *= col;
      }
    });
    Conv1d layer(o);
    layer.set_weight(d.wt.view());
    Tensor yd(layer.output_shape(d.xt.shape()), Device::kCuda);
    layer.forward(d.xt.to(Device::kCuda).view(), yd.view());
    const Tensor got = yd.to(Device::kCpu);
    const oracle::Array ref = oracle::conv1d(d.x, d.w, {}, o);
    const double err = oracle::relative_l2(got, ref);
    CHECK(err <= kTolerance);
    // Every output channel on its own too: a quiet column is not hidden by a loud one.
    double worst_col = 0.0;
    for (std::int64_t co = 0; co < o.out_channels; ++co) {
      double num = 0.0, den = 0.0;
      for (std::int64_t b = 0; b < n; ++b) {
        for (std::int64_t t = 0; t < frames; ++t) {
          const std::int64_t i = (b * o.out_channels + co) * frames + t;
          const double d = static_cast<double>(got.data()[i]) - ref.data[i];
          num += d * d;
          den += ref.data[i] * ref.data[i];
        }
      }
      worst_col = std::max(worst_col, std::sqrt(num / den));
    }
    MESSAGE("pointwise, loud and quiet data: relative L2 ", err, ", worst column ", worst_col);
    CHECK(worst_col <= kTolerance);
    stats.worst = std::max(stats.worst, err);
  }
  MESSAGE("pointwise tensor-core kernel: ", layers, " layers, worst ", stats.worst, " at ",
          stats.worst_config);
  CHECK(stats.worst <= kTolerance);
}

// The tensor-core decoder (conv_decoder_wgmma.cu): a GEMM over the input channels into
// (channel, tap) columns and an overlap-add in the epilogue. Both column instantiations (16 and
// 32), 1 to 16 taps per phase (stride 1 included), padding that starts mid-block and makes
// whole tiles of halo, output_padding, groups, channel counts that leave a ragged last group
// of 64 (8, 27, 200, 480), rows of odd length and strided views, many tiles per row and rows
// of one tile. Then stride-1 Conv1d layers of few outputs on the same kernel (taps reversed):
// a vocoder's last layer, "same" padding, padding K - 1, groups, K 1 and K 32, 8 channels into
// 32 columns, reflect padding (the dispatcher's edge pass).
TEST_CASE("cuda: tensor-core decoders against the float64 oracle") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);  // the small shapes too
  const bool tma_was = cc::decoder_tma(), pair_was = cc::decoder_pair();
  const cc::WgmmaPolicy wide_was = cc::decoder_wide_policy();
  // Every layer four times: input through the copy engine where the layer allows it (more than
  // 64 channels per group, a multiple of 4; 16-byte aligned views) with a step's products as two
  // wgmmas (the pair) and as three, on 128-row tiles, then with the pair on the wide variant's
  // tiles of up to 248 rows (16 columns), then loaded by the consumers themselves.
  struct Variant {
    bool tma, pair, wide;
  };
  for (const Variant v : {Variant{true, true, false}, Variant{true, false, false},
                          Variant{true, true, true}, Variant{false, false, false}}) {
    const bool tma = v.tma;
    cc::set_decoder_tma(tma);
    cc::set_decoder_pair(v.pair);
    cc::set_decoder_wide_policy(v.wide ? cc::WgmmaPolicy::kAlways : cc::WgmmaPolicy::kNever);
    const std::uint64_t tma_before = cc::decoder_tma_launches();
    const std::uint64_t pair_before = cc::decoder_pair_launches();
    const std::uint64_t wide_before = cc::decoder_wide_launches();
    GridStats stats;
    std::uint64_t seed = 8080;
    using T = ConvTranspose1dOptions;
    auto transpose = [&](const T& o, std::int64_t n, std::int64_t frames, bool strided) {
      CHECK(run_config<ConvTranspose1d, T>(o, n, frames, strided, seed++, stats));
    };
    transpose({.in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8}, 2, 3001,
              false);
    transpose({.in_channels = 64, .out_channels = 1, .kernel_size = 16, .stride = 8, .padding = 3},
              3, 1000, true);
    transpose({.in_channels = 200,
               .out_channels = 2,
               .kernel_size = 8,
               .stride = 4,
               .padding = 5,
               .output_padding = 3},
              2, 777, false);
    transpose({.in_channels = 27, .out_channels = 4, .kernel_size = 8, .stride = 4, .bias = false},
              2, 513, true);
    transpose({.in_channels = 2 * 40,
               .out_channels = 2 * 2,
               .kernel_size = 6,
               .stride = 2,
               .padding = 1,
               .groups = 2},
              2, 640, false);
    transpose({.in_channels = 3 * 8, .out_channels = 3, .kernel_size = 8, .stride = 8, .groups = 3},
              2, 300, true);
    transpose(
        {.in_channels = 480, .out_channels = 1, .kernel_size = 16, .stride = 1, .padding = 20}, 1,
        1500, false);
    transpose({.in_channels = 48, .out_channels = 1, .kernel_size = 4, .stride = 2, .padding = 300},
              2, 400, false);
    transpose({.in_channels = 33, .out_channels = 2, .kernel_size = 16, .stride = 16}, 1, 129,
              true);
    transpose(
        {.in_channels = 130, .out_channels = 1, .kernel_size = 32, .stride = 16, .padding = 7}, 2,
        2000, false);
    // Many tiles per block (a block's ring runs on across its tiles), and across groups; with
    // more than 64 channels per group the input comes through the copy engine.
    transpose({.in_channels = 128, .out_channels = 1, .kernel_size = 16, .stride = 8}, 4, 40000,
              false);
    transpose(
        {.in_channels = 2 * 96, .out_channels = 2 * 2, .kernel_size = 8, .stride = 4, .groups = 2},
        3, 20001, false);
    using C = Conv1dOptions;
    auto conv = [&](const C& o, std::int64_t n, std::int64_t frames, bool strided) {
      CHECK(run_config<Conv1d, C>(o, n, frames, strided, seed++, stats));
    };
    conv({.in_channels = 32, .out_channels = 1, .kernel_size = 7, .padding = 3}, 2, 3001, false);
    conv({.in_channels = 64, .out_channels = 2, .kernel_size = 7, .padding = 6, .bias = false}, 1,
         2000, true);
    conv({.in_channels = 2 * 40, .out_channels = 2 * 4, .kernel_size = 5, .groups = 2}, 2, 777,
         false);
    conv({.in_channels = 130, .out_channels = 1, .kernel_size = 32, .padding = 31}, 1, 1500, true);
    conv({.in_channels = 16, .out_channels = 1, .kernel_size = 1}, 3, 1000, false);
    conv({.in_channels = 27, .out_channels = 3, .kernel_size = 4, .padding = Padding::same()}, 2,
         513, true);
    conv({.in_channels = 32,
          .out_channels = 1,
          .kernel_size = 7,
          .padding = 3,
          .padding_mode = PaddingMode::kReflect},
         2, 1200, false);
    conv({.in_channels = 128, .out_channels = 1, .kernel_size = 7, .padding = 3}, 2, 30001, false);
    conv({.in_channels = 2 * 132,
          .out_channels = 2 * 2,
          .kernel_size = 5,
          .padding = 1,
          .groups = 2},
         2, 5003, false);
    conv({.in_channels = 8, .out_channels = 4, .kernel_size = 8, .padding = 2}, 1, 300, false);
    const std::uint64_t tma_runs = cc::decoder_tma_launches() - tma_before;
    const std::uint64_t pair_runs = cc::decoder_pair_launches() - pair_before;
    const std::uint64_t wide_runs = cc::decoder_wide_launches() - wide_before;
    MESSAGE("tensor-core decoders, copy engine ", std::string(tma ? "on" : "off"), ", pair ",
            std::string(v.pair ? "on" : "off"), ", wide ", std::string(v.wide ? "on" : "off"), " (",
            tma_runs, " launches took the copy engine, ", pair_runs, " the pair, ", wide_runs,
            " the wide tiles): worst ", stats.worst, " at ", stats.worst_config,
            "; kernels: ", join(stats.kernels));
    CHECK(stats.runs == 22);
    if (cc::wgmma_available()) {
      // 7 of the 22 layers have more than 64 channels per group, a multiple of 4, and views
      // that are not the strided ones (those start 3 floats into their buffer: not 16-byte
      // aligned).
      if (tma) {
        CHECK(tma_runs == 7);
      } else {
        CHECK(tma_runs == 0);
      }
      CHECK(pair_runs == (v.pair ? tma_runs : 0));
      // All 7 have at most 16 (channel, tap) columns, which the wide variant takes.
      CHECK(wide_runs == (v.wide ? tma_runs : 0));
      CHECK(stats.kernels == std::set<std::string>{"conv_transpose1d_decoder_wgmma_3xtf32",
                                                   "conv1d_few_outputs_wgmma_3xtf32"});
      // The default policy gives it a decoder of two outputs (its FFMA rival computes 16
      // multiply-adds per input value there).
      const PolicyScope auto_policy(cc::WgmmaPolicy::kAuto);
      const ConvTranspose1d two(
          {.in_channels = 512, .out_channels = 2, .kernel_size = 8, .stride = 4});
      CHECK(std::string(kernel_of(two, Shape{16, 512, 16383})) ==
            "conv_transpose1d_decoder_wgmma_3xtf32");
      // dec_tasnet: the FFMA decoder's best case (one output, K 16, full waves), which the
      // tensor-core decoder takes when its input comes through the copy engine.
      const ConvTranspose1d dec(
          {.in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8});
      CHECK(std::string(kernel_of(dec, Shape{16, 512, 16383})) ==
            (tma ? "conv_transpose1d_decoder_wgmma_3xtf32" : "conv_transpose1d_decoder_ffma"));
      // ... and HiFi-GAN's conv_post, on one second of 24 kHz audio.
      const Conv1d post({.in_channels = 32, .out_channels = 1, .kernel_size = 7, .padding = 3});
      CHECK(std::string(kernel_of(post, Shape{1, 32, 24000})) == "conv1d_few_outputs_wgmma_3xtf32");
      // Eight inputs per group would leave 7/8 of its 64-channel reduction padding.
      const Conv1d eight({.in_channels = 8, .out_channels = 1, .kernel_size = 7, .padding = 3});
      CHECK(std::string(kernel_of(eight, Shape{8, 8, 131072})) == "conv1d_direct_coalesced");
    }
  }
  cc::set_decoder_tma(tma_was);
  cc::set_decoder_pair(pair_was);
  cc::set_decoder_wide_policy(wide_was);
}

// The tensor-core decoder's copy-engine ring under compute-sanitizer (memcheck, racecheck): the
// ring wrapping within a tile (8 stages of 64 channels), blocks running several tiles, groups,
// odd rows and padding, a ragged last stage, Conv1d; on 128-row tiles and on the wide variant's.
TEST_CASE("cuda:sanitize tensor-core decoder through the copy engine") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  if (!cc::wgmma_available()) return;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  const bool tma_was = cc::decoder_tma();
  const cc::WgmmaPolicy wide_was = cc::decoder_wide_policy();
  cc::set_decoder_tma(true);
  const std::uint64_t before = cc::decoder_tma_launches();
  const std::uint64_t wide_before = cc::decoder_wide_launches();
  GridStats stats;
  std::uint64_t seed = 2718;
  for (const bool wide : {false, true}) {
    cc::set_decoder_wide_policy(wide ? cc::WgmmaPolicy::kAlways : cc::WgmmaPolicy::kNever);
    using T = ConvTranspose1dOptions;
    CHECK(run_config<ConvTranspose1d, T>(
        {.in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8}, 1, 3001, false,
        seed++, stats));
    CHECK(run_config<ConvTranspose1d, T>(
        {.in_channels = 128, .out_channels = 1, .kernel_size = 16, .stride = 8}, 2, 9000, false,
        seed++, stats));
    CHECK(run_config<ConvTranspose1d, T>({.in_channels = 2 * 96,
                                          .out_channels = 2 * 2,
                                          .kernel_size = 8,
                                          .stride = 4,
                                          .padding = 3,
                                          .groups = 2},
                                         2, 1001, false, seed++, stats));
    using C = Conv1dOptions;
    CHECK(run_config<Conv1d, C>(
        {.in_channels = 132, .out_channels = 1, .kernel_size = 7, .padding = 3}, 1, 2000, false,
        seed++, stats));
  }
  cc::set_decoder_tma(tma_was);
  cc::set_decoder_wide_policy(wide_was);
  MESSAGE("decoder through the copy engine: worst ", stats.worst, " at ", stats.worst_config);
  CHECK(cc::decoder_tma_launches() - before == 8);
  CHECK(cc::decoder_wide_launches() - wide_before == 4);
}

TEST_CASE("cuda:sanitize small grid (compute-sanitizer subset)") {
  CUDA_OR_SKIP();
  GridStats a, b;
  conv1d_grid(24, 99, a);
  conv_transpose1d_grid(24, 98, b);
  CHECK(a.runs == 24);
  CHECK(b.runs == 24);
}

TEST_CASE("cuda:sanitize user stream and seed-like shapes") {
  CUDA_OR_SKIP();
  void* stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == 0);
  // Small versions of the workload shapes, each kernel family, on a caller's stream.
  const Workload small[] = {
      {"seedA-small", false, 2, 64, 128, 700, 3, 1, 0, 1, 1},
      {"seedB-small", true, 2, 128, 128, 517, 3, 1, 0, 1, 1},
      {"enc-small", false, 2, 1, 512, 1001, 16, 8, 0, 1, 1},
      {"dec-small", true, 2, 512, 1, 129, 16, 8, 0, 1, 1},
      {"stft-small", true, 1, 514, 1, 9, 512, 128, 0, 1, 1},
      {"dw-small", false, 2, 64, 64, 999, 3, 1, 8, 8, 64},
      {"enc-mid", false, 2, 1, 512, 3001, 16, 8, 0, 1, 1},
      {"dec-wide", true, 160, 16, 1, 300, 16, 8, 0, 1, 1},
      {"up-small", true, 2, 64, 32, 333, 4, 2, 1, 1, 1},
      {"up-phases", true, 2, 64, 64, 2000, 4, 2, 1, 1, 1},
      {"stft-enc-s2d", false, 2, 1, 514, 20000, 512, 128, 0, 1, 1},
  };
  for (const auto& w : small) check_workload(w, stream);
  REQUIRE(cudaStreamDestroy(stream) == 0);
}

TEST_CASE("cuda: user stream at full size (seedA on a cudaStreamCreate stream)") {
  CUDA_OR_SKIP();
  void* stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == 0);
  check_workload(kWorkloads[0], stream);
  REQUIRE(cudaStreamDestroy(stream) == 0);
}

TEST_CASE("cuda: seed shapes and all GPU workloads at full size (float64 slices)") {
  CUDA_OR_SKIP();
  for (const auto& w : kWorkloads) check_workload(w);
}

TEST_CASE("cuda: 64-bit sizes (more than 2^31 elements per tensor)") {
  CUDA_OR_SKIP();
  // batch * channels * frames > 2^31 through each family; frames near the end are checked.
  const Workload big[] = {
      {"depthwise-frames>2^31", false, 1, 1, 1, (1LL << 31) + 1001, 3, 1, 1, 1, 1},
      {"encoder-2^31", false, 1, 1, 16, (1LL << 27) + 333, 5, 1, 2, 1, 1},
      {"gemm-2^31", false, 1, 2, 16, (1LL << 27) + 333, 5, 1, 2, 1, 1},
      {"winograd-2^31", false, 1, 16, 32, (1LL << 26) + 77, 3, 1, 1, 1, 1},
  };
  for (const auto& w : big) check_workload(w);
}

namespace {

// NaN and +Inf at a few input positions: exactly the outputs the float64 oracle marks
// non-finite must be non-finite, with the same class (NaN, +Inf, -Inf); every other output
// finite and accurate. Winograd tiles mix their inputs, so this checks the direct fallback.
int value_class(double v) {
  if (std::isnan(v)) return 1;
  if (std::isinf(v)) return v > 0 ? 2 : 3;
  return 0;
}

enum class Data {
  kNonFinite,     // NaN and +Inf at a few input positions
  kDynamicRange,  // |x| and |w| log-uniform in [1e-6, 1e3], random signs
  kPositive,      // x, w and bias >= 0: no cancellation (power spectra through a mel bank)
  kEnvelope,      // x scaled by 2^-10, 1 or 2^10 by 97-frame block and 16-channel chunk
  kTiny,          // x around 1e-25 and w around 1e-8: far below fp16's range
  kHuge,          // x around 1e25 and w around 1e8: far above it
};

// Without cancellation the partial sums grow steadily, and a rounding bias of the tensor
// cores' accumulation (they truncate) adds up instead of averaging out.
void make_positive(Tensor& t) {
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = std::fabs(t.data()[i]);
}

// Values whose magnitudes span nine decades, as real signals and trained weights can.
void spread_magnitudes(Tensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> decade(-6.0, 3.0);
  std::bernoulli_distribution negative(0.5);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double m = std::pow(10.0, decade(rng));
    t.data()[i] = static_cast<float>(negative(rng) ? -m : m);
  }
}

template <class Layer, class Options>
void check_special(const Options& o, std::int64_t n, std::int64_t frames, std::uint64_t seed,
                   Data data) {
  Layer layer(o);
  const Shape in_shape{n, o.in_channels, frames};
  const Shape out_shape = layer.output_shape(in_shape);
  const std::string config = describe(o, n, frames);
  CAPTURE(config);
  std::mt19937_64 rng(seed);
  Tensor xt = oracle::to_tensor(oracle::random_array(in_shape, rng));
  if (data == Data::kNonFinite) {
    // A few NaN and +Inf, in different batches, channels and tiles (one near each end).
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const std::int64_t C = o.in_channels;
    xt(0, 0, std::min<std::int64_t>(frames - 1, 5)) = nan;
    xt(n - 1, C / 2, frames / 2) = inf;
    xt(0, C - 1, std::max<std::int64_t>(0, frames - 3)) = inf;
    xt(n - 1, 0, frames / 3) = nan;
  } else if (data == Data::kPositive) {
    make_positive(xt);
  } else if (data == Data::kTiny || data == Data::kHuge) {
    const float f = data == Data::kTiny ? 1e-25f : 1e25f;
    for (std::int64_t i = 0; i < xt.numel(); ++i) xt.data()[i] *= f;
  } else if (data == Data::kEnvelope) {
    // The 3xFP16 producer scales each job (a tile's frames x a chunk of channels) by a power
    // of two it may carry over from the chunk's previous job: loud and quiet stretches that
    // change from one tile and chunk to the next must each keep their own precision.
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t c = 0; c < o.in_channels; ++c) {
        for (std::int64_t t = 0; t < frames; ++t) {
          xt(b, c, t) *= std::ldexp(1.0f, 10 * static_cast<int>((t / 97 + c / 16) % 3) - 10);
        }
      }
    }
  } else {
    spread_magnitudes(xt, rng);
  }
  const oracle::Array xa = oracle::from_tensor(xt);
  oracle::Array wa =
      oracle::random_array(weight_shape(o), rng, 1.0 / std::sqrt(static_cast<double>(fan_in(o))));
  Tensor wt = oracle::to_tensor(wa);
  if (data == Data::kDynamicRange) spread_magnitudes(wt, rng);
  if (data == Data::kPositive) make_positive(wt);
  if (data == Data::kTiny || data == Data::kHuge) {
    const float f = data == Data::kTiny ? 1e-8f : 1e8f;
    for (std::int64_t i = 0; i < wt.numel(); ++i) wt.data()[i] *= f;
  }
  wa = oracle::from_tensor(wt);
  layer.set_weight(wt.view());
  std::vector<double> bias;
  if (o.bias) {
    Tensor bt = oracle::to_tensor(oracle::random_array(Shape{1, 1, o.out_channels}, rng));
    if (data == Data::kPositive) make_positive(bt);
    bias = oracle::from_tensor(bt).data;
    layer.set_bias(bt.view());
  }
  const oracle::Array ref = reference(xa, wa, bias, o);
  const std::string kernel = kernel_of(layer, in_shape);
  CAPTURE(kernel);
  Tensor xd = xt.to(Device::kCuda);
  Tensor yd(out_shape, Device::kCuda);
  poison(yd);
  layer.forward(xd.view(), yd.view());
  const Tensor got = yd.to(Device::kCpu);
  std::int64_t mismatched = 0, nonfinite = 0;
  double num = 0.0, den = 0.0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double r = ref.data[static_cast<std::size_t>(i)];
    const double g = got.data()[i];
    if (value_class(r) != value_class(g)) ++mismatched;
    if (value_class(r) != 0) {
      ++nonfinite;
    } else if (std::isfinite(g)) {
      num += (g - r) * (g - r);
      den += r * r;
    }
  }
  double err = std::sqrt(num / den);
  if (data == Data::kEnvelope) {
    // The worst stretch of 64 frames of a row, so that a quiet stretch's error is not hidden
    // under a loud one's energy.
    const std::int64_t T = out_shape.frames;
    for (std::int64_t row = 0; row < out_shape.batch * out_shape.channels; ++row) {
      for (std::int64_t t0 = 0; t0 < T; t0 += 64) {
        double sn = 0.0, sd = 0.0;
        for (std::int64_t t = t0; t < std::min(T, t0 + 64); ++t) {
          const double r = ref.data[static_cast<std::size_t>(row * T + t)];
          const double g = got.data()[row * T + t];
          sn += (g - r) * (g - r);
          sd += r * r;
        }
        if (sd > 0.0) err = std::max(err, std::sqrt(sn / sd));
      }
    }
  }
  const std::string what = data == Data::kNonFinite      ? "non-finite: "
                           : data == Data::kDynamicRange ? "dynamic range: "
                           : data == Data::kPositive     ? "positive: "
                           : data == Data::kTiny         ? "tiny: "
                           : data == Data::kEnvelope     ? "envelope (worst 64 frames): "
                                                         : "huge: ";
  MESSAGE(what, kernel, ": ", nonfinite, " non-finite outputs, ", mismatched,
          " class mismatches, relative L2 of the rest ", err);
  CHECK((data == Data::kNonFinite) == (nonfinite > 0));
  CHECK_MESSAGE(mismatched == 0, mismatched, " outputs differ in class (NaN/+Inf/-Inf/finite)");
  CHECK(err <= kTolerance);
}

}  // namespace

// One configuration per kernel family (the dispatcher's table in conv_dispatch.cu), for the
// tests that check special data on every family: run(options, batch, frames).
template <class Run>
void for_each_kernel_family(Run&& run) {
  {
    const Conv1dOptions o{.in_channels = 24, .out_channels = 64, .kernel_size = 3, .padding = 1};
    run(o, 2, 300);
  }
  {
    const Conv1dOptions o{.in_channels = 16,
                          .out_channels = 40,
                          .kernel_size = 3,
                          .padding = Padding::same(),
                          .padding_mode = PaddingMode::kReflect};
    run(o, 2, 200);
  }
  {
    const ConvTranspose1dOptions o{
        .in_channels = 16, .out_channels = 48, .kernel_size = 3, .stride = 1, .padding = 1};
    run(o, 2, 260);
  }
  {
    const Conv1dOptions o{.in_channels = 12, .out_channels = 40, .kernel_size = 5, .padding = 2};
    run(o, 2, 300);
  }
  {  // tensor cores (sm_90): a ragged last channel chunk, dilation
    const Conv1dOptions o{
        .in_channels = 20, .out_channels = 64, .kernel_size = 5, .padding = 4, .dilation = 2};
    run(o, 2, 2100);
  }
  {  // ... reflect padding: the zeros kernel, then the edge outputs recomputed
    const Conv1dOptions o{.in_channels = 24,
                          .out_channels = 64,
                          .kernel_size = 7,
                          .padding = Padding::same(),
                          .padding_mode = PaddingMode::kReflect};
    run(o, 2, 2100);
  }
  {  // ... groups of taps (K 6 at dilation 150: two convolutions of 3 taps, summed)
    const Conv1dOptions o{
        .in_channels = 32, .out_channels = 64, .kernel_size = 6, .padding = 375, .dilation = 150};
    run(o, 2, 2100);
  }
  {  // ... the same for a ConvTranspose1d at stride 1
    const ConvTranspose1dOptions o{.in_channels = 32,
                                   .out_channels = 64,
                                   .kernel_size = 6,
                                   .stride = 1,
                                   .padding = 200,
                                   .dilation = 150};
    run(o, 2, 2100);
  }
  {  // ... transposed at stride 1 with dilation
    const ConvTranspose1dOptions o{.in_channels = 40,
                                   .out_channels = 48,
                                   .kernel_size = 5,
                                   .stride = 1,
                                   .padding = 1,
                                   .dilation = 2};
    run(o, 2, 2000);
  }
  {  // ... strided (K not whole strides): activations in registers, two column tiles
    const Conv1dOptions o{
        .in_channels = 40, .out_channels = 128, .kernel_size = 3, .stride = 2, .padding = 1};
    run(o, 2, 3600);
  }
  {  // ... strided, K whole strides: space-to-depth, 80 channels of 2 taps
    const Conv1dOptions o{.in_channels = 40, .out_channels = 128, .kernel_size = 4, .stride = 2};
    run(o, 2, 3600);
  }
  {  // ... the same with reflect padding (in x') and groups, on the 64-row tile
    const Conv1dOptions o{.in_channels = 32,
                          .out_channels = 128,
                          .kernel_size = 8,
                          .stride = 4,
                          .padding = 3,
                          .groups = 2,
                          .padding_mode = PaddingMode::kReflect};
    run(o, 2, 4001);
  }
  {  // ... a one-channel STFT-like encoder through space-to-depth
    const Conv1dOptions o{.in_channels = 1, .out_channels = 514, .kernel_size = 512, .stride = 128};
    run(o, 1, 20000);
  }
  {  // ... transposed at stride 2: one depth-to-space convolution of 2 x 64 channels
    const ConvTranspose1dOptions o{
        .in_channels = 40, .out_channels = 64, .kernel_size = 4, .stride = 2, .padding = 1};
    run(o, 2, 1500);
  }
  {  // ... one tap per phase (K = stride): the phase convolutions
    const ConvTranspose1dOptions o{
        .in_channels = 40, .out_channels = 64, .kernel_size = 2, .stride = 2, .padding = 1};
    run(o, 2, 2100);
  }
  {  // ... STFT-like synthesis: 128 phases of one channel, depth-to-space
    const ConvTranspose1dOptions o{
        .in_channels = 514, .out_channels = 1, .kernel_size = 512, .stride = 128};
    run(o, 1, 60);
  }
  {  // ... pointwise with 32-channel chunks on the shared-memory-operand kernel
    const Conv1dOptions o{.in_channels = 40, .out_channels = 128, .kernel_size = 1};
    run(o, 2, 3300);
  }
  {  // ... a dilation far above the tile: a window per tap, rows of odd length
    const Conv1dOptions o{
        .in_channels = 64, .out_channels = 128, .kernel_size = 3, .padding = 256, .dilation = 256};
    run(o, 2, 3001);
  }
  {  // ... a decoder to 4 channels: 64 x 256 depth-to-space tiles, copies in two parts
    const ConvTranspose1dOptions o{
        .in_channels = 64, .out_channels = 4, .kernel_size = 16, .stride = 8};
    run(o, 2, 3001);
  }
  {  // ... pointwise with the activations split in registers (3xFP16), a ragged column tile
    namespace cc = convbank::detail::cuda;
    const PointwiseScope pw(cc::WgmmaPolicy::kAlways);
    const Conv1dOptions o{.in_channels = 64, .out_channels = 100, .kernel_size = 1, .padding = 2};
    run(o, 2, 3001);
  }
  {  // pointwise: the GEMM v2 core's 16-byte B copies (aligned rows) and their ragged tail
    const Conv1dOptions o{.in_channels = 40, .out_channels = 72, .kernel_size = 1};
    run(o, 2, 301);
  }
  {
    const Conv1dOptions o{.in_channels = 1, .out_channels = 70, .kernel_size = 64, .stride = 16};
    run(o, 2, 700);
  }
  {  // one-channel encoders: aligned stores (>= 64 outputs per group), 4-byte stores (fewer)
    namespace cc = convbank::detail::cuda;
    const EncoderAlignedScope aligned(cc::WgmmaPolicy::kAlways);
    const Conv1dOptions o{
        .in_channels = 1, .out_channels = 96, .kernel_size = 16, .stride = 8, .padding = 3};
    run(o, 2, 8001);
  }
  {
    const Conv1dOptions o{.in_channels = 1, .out_channels = 32, .kernel_size = 16, .stride = 8};
    run(o, 2, 8001);
  }
  {  // ... on the tensor cores (sm_90): two channel tiles, the second ragged
    namespace cc = convbank::detail::cuda;
    const EncoderWgmmaScope tensor(cc::WgmmaPolicy::kAlways);
    const Conv1dOptions o{
        .in_channels = 1, .out_channels = 100, .kernel_size = 16, .stride = 8, .padding = 3};
    run(o, 2, 8001);
  }
  {  // depthwise
    const Conv1dOptions o{.in_channels = 8,
                          .out_channels = 8,
                          .kernel_size = 3,
                          .padding = 8,
                          .dilation = 8,
                          .groups = 8};
    run(o, 2, 300);
  }
  {  // ... strided, with a channel multiplier
    const Conv1dOptions o{.in_channels = 8,
                          .out_channels = 16,
                          .kernel_size = 5,
                          .stride = 2,
                          .padding = 2,
                          .groups = 8};
    run(o, 2, 300);
  }
  {
    const ConvTranspose1dOptions o{
        .in_channels = 64, .out_channels = 1, .kernel_size = 16, .stride = 8, .padding = 0};
    run(o, 2, 300);
  }
  {  // a decoder on enough rows for one block per multiprocessor, 3 x 16 columns (more than
     // the tensor-core decoder's 32): the FFMA decoder kernel
    const ConvTranspose1dOptions o{
        .in_channels = 16, .out_channels = 3, .kernel_size = 16, .stride = 8, .padding = 3};
    run(o, 200, 300);
  }
  {  // ... 2 x 8 columns: the tensor-core decoder (sm_90)
    const ConvTranspose1dOptions o{
        .in_channels = 40, .out_channels = 2, .kernel_size = 8, .stride = 4, .padding = 2};
    run(o, 100, 300);
  }
  {  // ... 160 input channels: two warpgroups per block
    const ConvTranspose1dOptions o{
        .in_channels = 160, .out_channels = 2, .kernel_size = 8, .stride = 4, .padding = 2};
    run(o, 100, 300);
  }
  {  // ... and a stride-1 Conv1d of one output on it, taps reversed (a vocoder's last layer)
    const Conv1dOptions o{.in_channels = 32, .out_channels = 1, .kernel_size = 7, .padding = 3};
    run(o, 100, 300);
  }
  {
    const ConvTranspose1dOptions o{
        .in_channels = 20, .out_channels = 1, .kernel_size = 128, .stride = 32, .padding = 3};
    run(o, 2, 70);
  }
  {  // phase GEMM split over a cluster (sm_90+)
    const ConvTranspose1dOptions o{
        .in_channels = 96, .out_channels = 1, .kernel_size = 128, .stride = 32, .padding = 5};
    run(o, 2, 70);
  }
  {
    const ConvTranspose1dOptions o{
        .in_channels = 16, .out_channels = 12, .kernel_size = 4, .stride = 2, .padding = 1};
    run(o, 2, 150);
  }
  {  // K not a multiple of the stride: polyphase GEMM tiles with missing taps
    const ConvTranspose1dOptions o{
        .in_channels = 16, .out_channels = 12, .kernel_size = 5, .stride = 2, .padding = 1};
    run(o, 2, 150);
  }
  {  // ... and the narrow polyphase kernel's last tap
    const ConvTranspose1dOptions o{
        .in_channels = 16, .out_channels = 1, .kernel_size = 5, .stride = 2, .padding = 0};
    run(o, 2, 150);
  }
}

template <class Options>
using LayerOf = std::conditional_t<std::is_same_v<Options, Conv1dOptions>, Conv1d, ConvTranspose1d>;

TEST_CASE("cuda:sanitize NaN/Inf inputs reach exactly the outputs whose window holds them") {
  CUDA_OR_SKIP();
  std::uint64_t seed = 4242;
  std::set<std::string> kernels;
  for_each_kernel_family([&](const auto& o, std::int64_t n, std::int64_t frames) {
    using Layer = LayerOf<std::decay_t<decltype(o)>>;
    kernels.insert(kernel_of(Layer(o), Shape{n, o.in_channels, frames}));
    check_special<Layer>(o, n, frames, seed++, Data::kNonFinite);
  });
  MESSAGE("non-finite check ran: ", join(kernels));
}

TEST_CASE("cuda: inputs and weights from 1e-6 to 1e3 in magnitude, every kernel family") {
  CUDA_OR_SKIP();
  std::uint64_t seed = 777;
  std::set<std::string> kernels;
  for_each_kernel_family([&](const auto& o, std::int64_t n, std::int64_t frames) {
    using Layer = LayerOf<std::decay_t<decltype(o)>>;
    kernels.insert(kernel_of(Layer(o), Shape{n, o.in_channels, frames}));
    check_special<Layer>(o, n, frames, seed++, Data::kDynamicRange);
  });
  MESSAGE("dynamic-range check ran: ", join(kernels));
}

TEST_CASE("cuda: all-positive inputs and weights, every kernel family and deep reductions") {
  CUDA_OR_SKIP();
  std::uint64_t seed = 2718;
  std::set<std::string> kernels;
  const auto run = [&](const auto& o, std::int64_t n, std::int64_t frames) {
    using Layer = LayerOf<std::decay_t<decltype(o)>>;
    kernels.insert(kernel_of(Layer(o), Shape{n, o.in_channels, frames}));
    check_special<Layer>(o, n, frames, seed++, Data::kPositive);
  };
  for_each_kernel_family(run);
  // Deep reductions, where the tensor cores' accumulation chains the most chunks: pointwise
  // (a mel bank on a power spectrogram, and 512 deep), K 3 at 512 x 3 and 1024 x 1, K 7, K 11.
  run(Conv1dOptions{.in_channels = 257, .out_channels = 80, .kernel_size = 1}, 2, 2000);
  run(Conv1dOptions{.in_channels = 512, .out_channels = 128, .kernel_size = 1}, 2, 2048);
  run(Conv1dOptions{.in_channels = 1024, .out_channels = 128, .kernel_size = 1}, 1, 1024);
  run(Conv1dOptions{.in_channels = 512, .out_channels = 128, .kernel_size = 3, .padding = 1}, 1,
      1500);
  run(
      ConvTranspose1dOptions{
          .in_channels = 256, .out_channels = 128, .kernel_size = 3, .stride = 1, .padding = 1},
      2, 1000);
  run(Conv1dOptions{.in_channels = 256, .out_channels = 256, .kernel_size = 7, .padding = 3}, 1,
      1200);
  run(Conv1dOptions{.in_channels = 256, .out_channels = 256, .kernel_size = 11, .padding = 5}, 1,
      1200);
  MESSAGE("positive check ran: ", join(kernels));
}

// The shared-memory-operand kernel's products in fp16 pairs (3xFP16) on the layers whose chunks
// allow it (at most 4 taps, contiguous rows): K 1-4, Conv1d and ConvTranspose1d, both tiles,
// ragged channel chunks, dilation, bias, strided views with rows off 16-byte boundaries,
// depth-to-space (up2x-like) and space-to-depth (STFT-like). Each layer on random data and then
// on data spanning nine decades, all-positive data, inputs and weights far below and far above
// fp16's range (the per-job and per-row scales), and NaN/Inf; once with 3xFP16 and once with
// 3xTF32 on the same layers. Fails unless every launch of the first pass took 3xFP16 and none of
// the second did.
TEST_CASE("cuda: 3xFP16 tensor-core kernel against the float64 oracle, and 3xTF32 on its layers") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  const HalfScope scope(cc::ss_half_policy());
  using C = Conv1dOptions;
  using T = ConvTranspose1dOptions;
  for (const bool half : {true, false}) {
    cc::set_ss_half_policy(half ? cc::WgmmaPolicy::kAlways : cc::WgmmaPolicy::kNever);
    GridStats stats;
    std::set<std::string> kernels;
    std::uint64_t seed = 1601;
    std::uint64_t launches = 0;
    const std::uint64_t before = cc::ss_half_launches();
    const std::uint64_t warp_before = cc::ss_warp_scale_launches();
    const auto run = [&](const auto& o, std::int64_t n, std::int64_t frames, bool strided) {
      using Layer = LayerOf<std::decay_t<decltype(o)>>;
      const std::string kernel = kernel_of(Layer(o), Shape{n, o.in_channels, frames});
      kernels.insert(kernel);
      CHECK_MESSAGE(
          kernel.find(half ? "_wgmma_ss_3xfp16_" : "_wgmma_ss_3xtf32_") != std::string::npos,
          kernel);
      run_config<Layer>(o, n, frames, strided, seed++, stats);
      for (const Data d : {Data::kDynamicRange, Data::kPositive, Data::kTiny, Data::kHuge,
                           Data::kNonFinite, Data::kEnvelope}) {
        check_special<Layer>(o, n, frames, seed++, d);
      }
      launches += 7;
    };
    run(C{.in_channels = 64, .out_channels = 128, .kernel_size = 3}, 2, 1000, false);
    run(C{.in_channels = 48, .out_channels = 96, .kernel_size = 3, .padding = 1, .bias = false}, 2,
        1001, true);
    run(C{.in_channels = 32, .out_channels = 64, .kernel_size = 3, .padding = 1}, 1, 1500, false);
    run(T{.in_channels = 128, .out_channels = 128, .kernel_size = 3, .stride = 1}, 1, 1200, false);
    run(C{.in_channels = 512, .out_channels = 128, .kernel_size = 1}, 2, 700, false);
    // One tap on rows of odd length: each row's copy has its own lead.
    run(C{.in_channels = 96, .out_channels = 130, .kernel_size = 1, .bias = false}, 2, 1001, true);
    run(C{.in_channels = 40, .out_channels = 80, .kernel_size = 2, .padding = 1}, 2, 999, true);
    run(C{.in_channels = 24, .out_channels = 64, .kernel_size = 4, .padding = 3, .dilation = 2}, 2,
        800, false);
    run(T{.in_channels = 64, .out_channels = 32, .kernel_size = 4, .stride = 2, .padding = 1}, 2,
        900, false);
    run(C{.in_channels = 1, .out_channels = 514, .kernel_size = 512, .stride = 128}, 1, 16384,
        false);
    const std::uint64_t took = cc::ss_half_launches() - before;
    // Both one-tap layers' producer warps scale their own columns (7 launches each; 14 in the
    // check of 291a9de).
    const std::uint64_t warp_took = cc::ss_warp_scale_launches() - warp_before;
    MESSAGE(std::string(half ? "3xFP16" : "3xTF32"), ": ", stats.runs, " layers, worst ",
            stats.worst, " at ", stats.worst_config, "; ", took, " of ", launches,
            " launches took 3xFP16 (", warp_took,
            " with scales per warp); kernels: ", join(kernels));
    CHECK(stats.runs == 10);
    if (cc::wgmma_available()) {
      CHECK(took == (half ? launches : 0));
      CHECK(warp_took == (half ? 14 : 0));
    }
  }
}

// The 3xFP16 kernel under compute-sanitizer (memcheck, racecheck): its per-job maximum and scale
// in shared memory, the stages of halves, the half planes' workspace; small layers, every launch
// 3xFP16.
TEST_CASE("cuda:sanitize 3xFP16 tensor-core kernel") {
  CUDA_OR_SKIP();
  namespace cc = convbank::detail::cuda;
  const PolicyScope policy(cc::WgmmaPolicy::kAlways);
  const HalfScope scope(cc::WgmmaPolicy::kAlways);
  GridStats stats;
  std::uint64_t seed = 1609;
  const std::uint64_t before = cc::ss_half_launches();
  run_config<Conv1d, Conv1dOptions>(
      {.in_channels = 48, .out_channels = 96, .kernel_size = 3, .padding = 1}, 2, 300, true, seed++,
      stats);
  run_config<ConvTranspose1d, ConvTranspose1dOptions>(
      {.in_channels = 32, .out_channels = 64, .kernel_size = 3, .stride = 1}, 1, 400, false, seed++,
      stats);
  run_config<ConvTranspose1d, ConvTranspose1dOptions>(
      {.in_channels = 64, .out_channels = 64, .kernel_size = 4, .stride = 2, .padding = 1}, 1, 300,
      false, seed++, stats);
  run_config<Conv1d, Conv1dOptions>({.in_channels = 64, .out_channels = 128, .kernel_size = 1}, 1,
                                    256, false, seed++, stats);
  const std::uint64_t took = cc::ss_half_launches() - before;
  MESSAGE("3xFP16 under the sanitizer: ", stats.runs, " layers, worst ", stats.worst, "; ", took,
          " launches took 3xFP16; kernels: ", join(stats.kernels));
  CHECK(stats.runs == 4);
  if (cc::wgmma_available()) CHECK(took == 4);
}
