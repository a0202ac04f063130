// CPU backend: Conv1d as im2col + GEMM per (batch, group, block of output frames), and
// ConvTranspose1d as GEMM + col2im per block of *output* frames, both through Eigen's
// matrix product. Blocking over output time keeps the column buffer in L2 and makes every
// output frame owned by exactly one task, so threads never write the same element and results
// do not depend on the thread count. Layers whose groups hold one or two channels (depthwise)
// skip the GEMM, whose packing would cost more than the few multiply-adds per frame.
// Calls longer than the working-set limit run in pieces of whole blocks (bit-identical); the
// streams use single-threaded entries that run in a caller-provided workspace (workspace.hpp).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <utility>

// Eigen's no-malloc mode reports through eigen_assert, which NDEBUG compiles out. This version
// evaluates its condition only while a test has disallowed malloc (one relaxed load otherwise,
// outside the inner loops), and counts failures instead of aborting, so the check also works in
// Release builds.
namespace convbank::detail::cpu::eigen_check {
extern std::atomic<bool> g_strict;
extern std::atomic<std::int64_t> g_violations;
}  // namespace convbank::detail::cpu::eigen_check
#define eigen_assert(x)                                                                     \
  ((void)(::convbank::detail::cpu::eigen_check::g_strict.load(std::memory_order_relaxed) && \
          !(x) &&                                                                           \
          (::convbank::detail::cpu::eigen_check::g_violations.fetch_add(                    \
               1, std::memory_order_relaxed),                                               \
           true)))
#define EIGEN_RUNTIME_NO_MALLOC
#include <Eigen/Core>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "convbank/runtime.hpp"
#include "core/backend.hpp"
#include "cpu/parallel.hpp"
#include "cpu/workspace.hpp"

namespace convbank::detail::cpu {

namespace eigen_check {
std::atomic<bool> g_strict{false};
std::atomic<std::int64_t> g_violations{0};
}  // namespace eigen_check

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowMap = Eigen::Map<const RowMatrix>;
using RowMap = Eigen::Map<RowMatrix>;
using StridedRowMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

int g_threads = 0;

// Column buffers of about this many floats (1 MiB) stay in a core's L2 on the machines we use.
constexpr std::int64_t kColumnFloats = 1 << 18;
constexpr std::int64_t kDirectBlockFrames = 4096;

constexpr std::int64_t round_up16(std::int64_t n) {
  return (n + 15) / 16 * 16;
}

// Eigen's GEMM driver with its packing blocks preset: general_matrix_matrix_product then uses
// them instead of allocating (ei_declare_aligned_stack_constructed_variable takes the buffer).
class WorkspaceBlocking : public Eigen::internal::level3_blocking<float, float> {
 public:
  WorkspaceBlocking(Eigen::Index kc, Eigen::Index mc, Eigen::Index nc, float* a, float* b) {
    this->m_kc = kc;
    this->m_mc = mc;
    this->m_nc = nc;
    this->m_blockA = a;
    this->m_blockB = b;
  }
};

// Blocking for a column-major rows x cols x depth product (at most), by Eigen's own heuristic,
// so the depth split (which decides the summation order) is the one Eigen picks offline.
struct GemmPlan {
  Eigen::Index kc = 0, mc = 0, nc = 0;
  std::int64_t a_floats = 0, b_floats = 0;
};
GemmPlan plan_gemm(std::int64_t rows, std::int64_t cols, std::int64_t depth) {
  Eigen::Index k = depth, m = rows, n = cols;
  Eigen::internal::computeProductBlockingSizes<float, float>(k, m, n, Eigen::Index{1});
  return {k, m, n, round_up16(k * m), round_up16(k * n)};
}

template <int LhsOrder, int RhsOrder>
using RowMajorGemm =
    Eigen::internal::general_matrix_matrix_product<Eigen::Index, float, LhsOrder, false, float,
                                                   RhsOrder, false, Eigen::RowMajor, 1>;

// Per-task scratch buffers that the calling thread keeps from one call to the next. A fresh
// std::vector per call was zeroed and, once glibc had handed its megabyte blocks back to the
// system, page-faulted in again on every call (with Eigen's packing blocks, allocated per
// product the same way): 1 -> 260 channels, K 512, stride 128 on one thread spent about 40 % of
// its time in that memset and in page faults (perf), 8.4 ms against 2.6 for 258 channels, whose
// blocks stayed in the heap. Grown, never shrunk, not zeroed: each user writes what it reads.
// 64-byte aligned, as Eigen's packing blocks must be.
class TaskScratch {
 public:
  // Buffers of at least `floats` for tasks run by threads 0 .. threads - 1. May throw: call it
  // before the parallel loop.
  void reserve(int threads, std::int64_t floats) {
    if (static_cast<int>(bufs_.size()) < threads) {
      bufs_.resize(static_cast<std::size_t>(threads));
      caps_.resize(static_cast<std::size_t>(threads), 0);
    }
    for (int t = 0; t < threads; ++t) {
      if (caps_[t] < floats) {
        bufs_[t].reset();  // the old buffer goes first: peak memory one buffer per thread
        const std::size_t bytes = (static_cast<std::size_t>(floats) * sizeof(float) + 63) / 64 * 64;
        bufs_[t].reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
        if (bufs_[t] == nullptr) throw std::bad_alloc();
        caps_[t] = floats;
      }
    }
  }
  float* operator[](int thread) const { return bufs_[static_cast<std::size_t>(thread)].get(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<float, Free>> bufs_;
  std::vector<std::int64_t> caps_;
};

TaskScratch& task_scratch() {
  thread_local TaskScratch scratch;
  return scratch;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return -floor_div(-a, b);
}

// Frames t of an output row for which input index t * stride + offset lies in [0, length).
struct Range {
  std::int64_t begin, end;
};
Range valid_outputs(std::int64_t offset, std::int64_t stride, std::int64_t length,
                    std::int64_t t_begin, std::int64_t t_end) {
  // Clamped to [t_begin, t_end] so callers may zero [t_begin, begin) and [end, t_end) blindly.
  const std::int64_t lo = std::clamp(ceil_div(-offset, stride), t_begin, t_end);
  const std::int64_t hi = std::min(t_end, floor_div(length - 1 - offset, stride) + 1);
  return {lo, std::max(lo, hi)};
}

std::int64_t pad_index(std::int64_t i, std::int64_t length, PaddingMode mode) {
  switch (mode) {
    case PaddingMode::kReflect:
      return i < 0 ? -i : (i >= length ? 2 * (length - 1) - i : i);
    case PaddingMode::kReplicate:
      return std::clamp<std::int64_t>(i, 0, length - 1);
    case PaddingMode::kCircular:
      return i < 0 ? i + length : (i >= length ? i - length : i);
    case PaddingMode::kZeros:
      break;
  }
  return i;
}

// reflect / replicate / circular: materialize the padded input once, as PyTorch's F.pad does,
// so the convolution itself only ever sees zero padding.
std::vector<float> pad_input(TensorView<const float> x, std::int64_t left, std::int64_t right,
                             PaddingMode mode) {
  const std::int64_t length = x.frames();
  const std::int64_t padded = length + left + right;
  std::vector<float> buffer(static_cast<std::size_t>(x.batch() * x.channels() * padded));
  for (std::int64_t b = 0; b < x.batch(); ++b) {
    for (std::int64_t c = 0; c < x.channels(); ++c) {
      const float* src = x.channel(b, c);
      float* dst = buffer.data() + (b * x.channels() + c) * padded;
      std::memcpy(dst + left, src, static_cast<std::size_t>(length) * sizeof(float));
      for (std::int64_t i = -left; i < 0; ++i) dst[i + left] = src[pad_index(i, length, mode)];
      for (std::int64_t i = length; i < length + right; ++i) {
        dst[i + left] = src[pad_index(i, length, mode)];
      }
    }
  }
  return buffer;
}

void fill_bias(float* row, std::int64_t count, const float* bias, std::int64_t channel) {
  std::fill(row, row + count, bias != nullptr ? bias[channel] : 0.0f);
}

// a * b + c, rounded once where the build targets FMA hardware (as every AVX-512 loop here
// does), twice elsewhere: one definition, so that the direct paths agree bit for bit, and no
// call to a software fmaf in builds for older machines.
inline float madd(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// Products one fp32 chain of the direct formula sums before it is added to the output's sum: a
// layer of many inputs (512 -> 4, K 16: 8192 products) summed in one chain measured 1.9e-6
// relative L2, over the accuracy bar.
constexpr std::int64_t kDirectChainTerms = 128;

// Output row (b, o), frames [t0, t1), into y[0, t1 - t0) by the definition: y[t - t0] = bias +
// sum over (c, k) of w * x[t * stride + k * dilation - pad]. Vectorizes along time. Where the
// group's cg x K products exceed kDirectChainTerms, chunks of `cc` channels are summed from zero
// each and then added to the bias in order; every path below sums in that same order, so an
// output's bits do not depend on which path computed it (a streamed chunk may cut a row
// elsewhere than the whole call).
// stream: the stride-1 frames inside the input go out with non-temporal stores, whole 64-byte
// lines only (see store_row); the caller fences.
void conv1d_direct_row(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                       const float* weight, const float* bias, std::int64_t b, std::int64_t o,
                       std::int64_t t0, std::int64_t t1, float* y,
                       [[maybe_unused]] bool stream = false) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t K = p.kernel_size;
  const std::int64_t g = o / (p.out_channels / p.groups);
  const float* w = weight + o * cg * K;
  const std::int64_t cc =
      cg * K <= kDirectChainTerms ? cg : std::max<std::int64_t>(1, kDirectChainTerms / K);
  const bool one_chain = cc >= cg;
  // Frames [lo, hi) of [t0, t1) whose taps all lie inside the input.
  std::int64_t lo = t1, hi = t1;
  if (p.stride == 1) {
    lo = std::clamp(pad_left, t0, t1);
    hi = std::clamp(x.frames() - (K - 1) * p.dilation + pad_left, lo, t1);
  }
  // Channels [c0, c1) tap by tap into acc[0, tb - ta) (the taps that fall outside the input
  // skipped), vectorized along time by the compiler.
  auto taps_into = [&](float* acc, std::int64_t ta, std::int64_t tb, std::int64_t c0,
                       std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const float* xr = x.channel(b, g * cg + c);
      for (std::int64_t k = 0; k < K; ++k) {
        const float wk = w[c * K + k];
        const std::int64_t offset = k * p.dilation - pad_left;
        const Range r = valid_outputs(offset, p.stride, x.frames(), ta, tb);
        if (p.stride == 1) {
          for (std::int64_t t = r.begin; t < r.end; ++t) {
            acc[t - ta] = madd(wk, xr[t + offset], acc[t - ta]);
          }
        } else {
          for (std::int64_t t = r.begin; t < r.end; ++t) {
            acc[t - ta] = madd(wk, xr[t * p.stride + offset], acc[t - ta]);
          }
        }
      }
    }
  };
  auto by_taps = [&](std::int64_t ta, std::int64_t tb) {
    if (ta >= tb) return;
    fill_bias(y + (ta - t0), tb - ta, bias, o);
    if (one_chain) {
      taps_into(y + (ta - t0), ta, tb, 0, cg);
      return;
    }
    constexpr std::int64_t kPiece = 256;
    float part[kPiece];
    for (std::int64_t pa = ta; pa < tb; pa += kPiece) {
      const std::int64_t pb = std::min(tb, pa + kPiece);
      for (std::int64_t c0 = 0; c0 < cg; c0 += cc) {
        std::fill(part, part + (pb - pa), 0.0f);
        taps_into(part, pa, pb, c0, std::min(cg, c0 + cc));
        for (std::int64_t t = pa; t < pb; ++t) y[t - t0] += part[t - pa];
      }
    }
  };
  by_taps(t0, lo);
  by_taps(hi, t1);
  if (lo >= hi) return;
  // Stride 1 inside the input: each vector of outputs sums all its taps in registers and is
  // written once.
  const float b0 = bias != nullptr ? bias[o] : 0.0f;
  auto one = [&](std::int64_t t) {
    float acc = b0;
    for (std::int64_t c0 = 0; c0 < cg; c0 += cc) {
      float part = one_chain ? acc : 0.0f;
      for (std::int64_t c = c0; c < std::min(cg, c0 + cc); ++c) {
        const float* xr = x.channel(b, g * cg + c) + t - pad_left;
        for (std::int64_t k = 0; k < K; ++k) part = madd(w[c * K + k], xr[k * p.dilation], part);
      }
      acc = one_chain ? part : acc + part;
    }
    y[t - t0] = acc;
  };
  std::int64_t t = lo;
#if defined(__AVX512F__)
  if (stream) {
    for (; t < hi && (reinterpret_cast<std::uintptr_t>(y + (t - t0)) & 63) != 0; ++t) one(t);
  }
  const auto put = [&](std::int64_t at, __m512 v) {
    if (stream) {
      _mm512_stream_ps(y + (at - t0), v);
    } else {
      _mm512_storeu_ps(y + (at - t0), v);
    }
  };
  // kV vectors of 16 frames at a time from frame `at`: kV independent chains of fused
  // multiply-adds hide their latency (one chain waits 4 cycles per product), one load each.
  // Eight measured 10-20 % faster than four on one core (32 -> 1, K 7: 1.10-1.45 against
  // 1.59-1.73 ms; 32 -> 4 2.28-2.85 against 3.20-3.33), which still sums 16 partial and
  // running vectors in registers.
  const auto vectors = [&]<int kV>(std::int64_t at) {
    __m512 acc[kV];
    for (int v = 0; v < kV; ++v) acc[v] = _mm512_set1_ps(b0);
    for (std::int64_t c0 = 0; c0 < cg; c0 += cc) {
      __m512 part[kV];
      for (int v = 0; v < kV; ++v) part[v] = one_chain ? acc[v] : _mm512_setzero_ps();
      for (std::int64_t c = c0; c < std::min(cg, c0 + cc); ++c) {
        const float* xr = x.channel(b, g * cg + c) + at - pad_left;
        for (std::int64_t k = 0; k < K; ++k) {
          const __m512 wk = _mm512_set1_ps(w[c * K + k]);
          const float* xk = xr + k * p.dilation;
          for (int v = 0; v < kV; ++v) {
            part[v] = _mm512_fmadd_ps(wk, _mm512_loadu_ps(xk + 16 * v), part[v]);
          }
        }
      }
      for (int v = 0; v < kV; ++v) acc[v] = one_chain ? part[v] : _mm512_add_ps(acc[v], part[v]);
    }
    for (int v = 0; v < kV; ++v) put(at + 16 * v, acc[v]);
  };
  for (; t + 128 <= hi; t += 128) vectors.template operator()<8>(t);
  for (; t + 64 <= hi; t += 64) vectors.template operator()<4>(t);
  for (; t + 16 <= hi; t += 16) vectors.template operator()<1>(t);
#endif
  for (; t < hi; ++t) one(t);
}

// Copies n floats to dst with non-temporal stores, for outputs larger than the caches: they
// skip the read-for-ownership of each destination line, which halves the memory traffic of
// output-bound layers (a 1 -> 512 encoder writes 256x more than it reads).
void store_row(float* __restrict dst, const float* __restrict src, std::int64_t n) {
#if defined(__AVX__)
  // Only whole 64-byte lines are streamed: a partial line (or a line half written by ordinary
  // stores) would make the memory controller read it back.
  constexpr std::int64_t kLineFloats = 16;
  std::int64_t i = 0;
  while (i < n && (reinterpret_cast<std::uintptr_t>(dst + i) & 63) != 0) {
    dst[i] = src[i];
    ++i;
  }
  for (; i + kLineFloats <= n; i += kLineFloats) {
    _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
    _mm256_stream_ps(dst + i + 8, _mm256_loadu_ps(src + i + 8));
  }
  for (; i < n; ++i) dst[i] = src[i];
#else
  std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
#endif
}

// Streamed stores are weakly ordered and per core: the thread that issued them fences.
void fence_streaming_stores() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

// Outputs larger than this go through non-temporal stores (see store_row).
constexpr std::int64_t kStreamingBytes = std::int64_t{8} << 20;

// Large outputs are computed into an L2-sized block and streamed out (store_row).
// `whole_frames` is the output length of the whole forward() call: a call split into pieces
// (working-set limit) decides as the whole call would.
bool use_streaming_stores(const Conv1dParams& p, std::int64_t whole_frames) {
  return p.batch * p.out_channels * whole_frames * static_cast<std::int64_t>(sizeof(float)) >
         kStreamingBytes;
}

// Groups with one or two channels (depthwise): the direct formula, one row and block per task.
// Large outputs go out with non-temporal stores, which saves the read-for-ownership of each
// output line, a third of the memory traffic of a layer that reads one float per float it
// writes (tcn_depthwise, one thread: 6.3-7.9 vs 9.0-9.7 ms, interleaved runs of both builds).
// At stride 1 with AVX-512 they stream straight from the registers that summed the taps;
// otherwise through an L1-sized block and store_row. The block and its copy cost a third:
// tcn_depthwise 2.60-3.54 ms on one thread and 1.51-1.71 on two, against 3.99-5.15 and
// 2.45-2.59 through the block (three interleaved rounds of both builds, `convbank bench
// --repeat 20`).
#if defined(__AVX512F__)
constexpr bool kStreamFromRegisters = true;
#else
constexpr bool kStreamFromRegisters = false;
#endif

void conv1d_direct(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                   const float* weight, const float* bias, TensorView<float> out,
                   std::int64_t whole_frames) {
  const std::int64_t blocks = ceil_div(p.out_frames, kDirectBlockFrames);
  const std::int64_t rows = p.batch * p.out_channels;
  const bool streaming = use_streaming_stores(p, whole_frames);
  // The L1 block for streamed stores, unless they leave straight from the registers.
  const bool from_registers = kStreamFromRegisters && p.stride == 1;
  std::vector<std::vector<float>> scratch(streaming && !from_registers ? threads_for(rows * blocks)
                                                                       : 0);
  for (auto& s : scratch) s.resize(static_cast<std::size_t>(kDirectBlockFrames));
  parallel_for(rows * blocks, [&](std::int64_t task, int thread) {
    const std::int64_t row = task / blocks;
    const std::int64_t t0 = (task % blocks) * kDirectBlockFrames;
    const std::int64_t t1 = std::min(p.out_frames, t0 + kDirectBlockFrames);
    const std::int64_t b = row / p.out_channels;
    const std::int64_t o = row % p.out_channels;
    if (!streaming) {
      conv1d_direct_row(p, x, pad_left, weight, bias, b, o, t0, t1, out.channel(b, o) + t0);
      return;
    }
    if (from_registers) {
      conv1d_direct_row(p, x, pad_left, weight, bias, b, o, t0, t1, out.channel(b, o) + t0, true);
      fence_streaming_stores();
      return;
    }
    float* buf = scratch[static_cast<std::size_t>(thread)].data();
    conv1d_direct_row(p, x, pad_left, weight, bias, b, o, t0, t1, buf);
    store_row(out.channel(b, o) + t0, buf, t1 - t0);
    fence_streaming_stores();
  });
}

std::int64_t conv1d_gemm_block(const Conv1dParams& p, std::int64_t whole_frames) {
  const std::int64_t kc = p.in_channels / p.groups * p.kernel_size;
  std::int64_t block = std::clamp<std::int64_t>(kColumnFloats / kc, 64, 8192);
  // Streamed stores: the block also bounds the frames per task.
  if (use_streaming_stores(p, whole_frames)) {
    block =
        std::min(block, std::max<std::int64_t>(kColumnFloats / (p.out_channels / p.groups), 16));
  }
  return std::min(block / 16 * 16, whole_frames);
}

void conv1d_gemm(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                 const float* weight, const float* bias, TensorView<float> out,
                 std::int64_t whole_frames) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t kc = cg * p.kernel_size;
  // Pointwise, stride 1, unpadded: the input rows already are the GEMM operand.
  // (A piece of a long call may end inside the right padding: then x is shorter.)
  const bool direct_operand =
      p.kernel_size == 1 && p.stride == 1 && pad_left == 0 && x.frames() >= p.out_frames;
  const bool streaming = use_streaming_stores(p, whole_frames);
  const std::int64_t block = conv1d_gemm_block(p, whole_frames);
  const std::int64_t blocks = ceil_div(p.out_frames, block);
  const std::int64_t tasks = p.batch * p.groups * blocks;
  const int threads = threads_for(tasks);
  // Per task: the columns, the streamed output block, and Eigen's packing blocks (at most
  // depth x rows and depth x columns of the product).
  const std::int64_t col_floats = direct_operand ? 0 : round_up16(kc * block);
  const std::int64_t y_floats = streaming ? round_up16(og * block) : 0;
  const std::int64_t a_floats = round_up16(kc * block);
  TaskScratch& scratch = task_scratch();
  scratch.reserve(threads, col_floats + y_floats + a_floats + round_up16(kc * og));

  parallel_for(tasks, [&](std::int64_t task, int thread) {
    const std::int64_t b = task / (p.groups * blocks);
    const std::int64_t g = (task / blocks) % p.groups;
    const std::int64_t t0 = (task % blocks) * block;
    const std::int64_t tn = std::min(block, p.out_frames - t0);
    float* col = scratch[thread];
    float* ybuf = col + col_floats;
    float* packs = ybuf + y_floats;
    // The blocking Eigen's own y = w * col would pick (column-major view: rows are frames).
    const GemmPlan plan = plan_gemm(tn, og, kc);
    WorkspaceBlocking blocking(plan.kc, plan.mc, plan.nc, packs, packs + a_floats);
    const std::int64_t ys = streaming ? tn : out.channel_stride();
    StridedRowMap y(streaming ? ybuf : out.channel(b, g * og) + t0, og, tn,
                    Eigen::OuterStride<>(ys));
    y.setZero();
    const float* wg = weight + g * og * kc;
    // One input channel per group, dilation 1, the block's window inside the input: column t of
    // im2col's matrix is the K samples from (t0 + t) * stride - pad, so the input itself is that
    // matrix (column-major, columns `stride` apart) and Eigen packs it from there. Same packed
    // blocks, same sums as through the copy, which took 11 % of enc_stft512 (perf, one thread).
    const std::int64_t first = t0 * p.stride - pad_left;
    const bool strided_operand = cg == 1 && p.dilation == 1 && first >= 0 &&
                                 first + (tn - 1) * p.stride + p.kernel_size <= x.frames();
    if (direct_operand) {
      RowMajorGemm<Eigen::RowMajor, Eigen::RowMajor>::run(
          og, tn, kc, wg, kc, x.channel(b, g * cg) + t0, x.channel_stride(), y.data(), 1, ys, 1.0f,
          blocking);
    } else if (strided_operand) {
      RowMajorGemm<Eigen::RowMajor, Eigen::ColMajor>::run(og, tn, kc, wg, kc,
                                                          x.channel(b, g * cg) + first, p.stride,
                                                          y.data(), 1, ys, 1.0f, blocking);
    } else {
      for (std::int64_t c = 0; c < cg; ++c) {
        const float* xr = x.channel(b, g * cg + c);
        for (std::int64_t k = 0; k < p.kernel_size; ++k) {
          float* dst = col + (c * p.kernel_size + k) * tn;
          const std::int64_t offset = t0 * p.stride + k * p.dilation - pad_left;
          const Range r = valid_outputs(offset, p.stride, x.frames(), 0, tn);
          std::fill(dst, dst + r.begin, 0.0f);
          if (p.stride == 1) {
            std::memcpy(dst + r.begin, xr + offset + r.begin,
                        static_cast<std::size_t>(r.end - r.begin) * sizeof(float));
          } else {
            for (std::int64_t j = r.begin; j < r.end; ++j) dst[j] = xr[j * p.stride + offset];
          }
          std::fill(dst + r.end, dst + tn, 0.0f);
        }
      }
      RowMajorGemm<Eigen::RowMajor, Eigen::RowMajor>::run(og, tn, kc, wg, kc, col, tn, y.data(), 1,
                                                          ys, 1.0f, blocking);
    }
    if (bias != nullptr) {
      y.colwise() += Eigen::Map<const Eigen::VectorXf>(bias + g * og, og);
    }
    if (streaming) {
      for (std::int64_t o = 0; o < og; ++o) {
        store_row(out.channel(b, g * og + o) + t0, ybuf + o * tn, tn);
      }
      fence_streaming_stores();
    }
  });
}

// One-input-channel encoders (1 -> many per group, dilation 1, K <= 32: TasNet-like
// analysis): the definition, register-blocked with AVX-512, instead of im2col + GEMM, whose
// reduction (K deep) is too shallow to pay for Eigen's packing, and whose 1 MiB result block
// took three more passes (bias, then the streamed copy). The input of a block is split once into
// its stride phases, x_r[q] = x[q * stride + r - pad], so tap k = a * stride + r reads x_r at
// q + a with unit stride: a 4 channels x 64 frames tile is 16 FMAs per 4 loads and 4
// broadcasts. Each output sums bias, then its taps in order, whatever the blocking and the
// thread count. enc_tasnet, two threads: 2.6-3.5 vs 5.7-6.8 ms, interleaved runs of both
// builds (docs/performance.md).
#if defined(__AVX512F__)
constexpr bool kHaveEncoder = true;
#else
constexpr bool kHaveEncoder = false;
#endif
constexpr std::int64_t kEncFrames = 512;  // output frames per task
constexpr std::int64_t kEncMaxTaps = 32;

bool use_encoder(const Conv1dParams& p) {
  return kHaveEncoder && p.in_channels == p.groups && p.dilation == 1 &&
         p.out_channels / p.groups >= 16 && p.kernel_size <= kEncMaxTaps;
}

#if defined(__AVX512F__)
// Rows o0 .. o0 + RB - 1 of a block of n output frames into buf[i * kEncFrames + t]: bias, then
// every tap; tap k reads the block's phase rows xp at tap_offset[k] + t.
template <int RB>
void encoder_tile(const float* xp, const std::int64_t* tap_offset, const float* w,
                  const float* bias, std::int64_t K, std::int64_t n, float* buf) {
  for (std::int64_t t = 0; t < n; t += 64) {
    __m512 acc[RB][4];
    for (int i = 0; i < RB; ++i) {
      const __m512 b = _mm512_set1_ps(bias != nullptr ? bias[i] : 0.0f);
      for (int j = 0; j < 4; ++j) acc[i][j] = b;
    }
    for (std::int64_t k = 0; k < K; ++k) {
      const float* xk = xp + tap_offset[k] + t;
      __m512 xv[4];
      for (int j = 0; j < 4; ++j) xv[j] = _mm512_loadu_ps(xk + 16 * j);
      for (int i = 0; i < RB; ++i) {
        const __m512 wv = _mm512_set1_ps(w[i * K + k]);
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < RB; ++i) {
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(buf + i * kEncFrames + t + 16 * j, acc[i][j]);
    }
  }
}
#endif

void conv1d_encoder(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                    const float* weight, const float* bias, TensorView<float> out,
                    std::int64_t whole_frames) {
#if defined(__AVX512F__)
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t K = p.kernel_size, s = p.stride;
  const std::int64_t phases = std::min(s, K);
  // Phase row length: the block's frames rounded up to the 64-frame tile, plus the taps' reach.
  const std::int64_t pitch = kEncFrames + (K - 1) / s + 16;
  std::int64_t tap_offset[kEncMaxTaps];
  for (std::int64_t k = 0; k < K; ++k) tap_offset[k] = (k % s) * pitch + k / s;
  const bool streaming = use_streaming_stores(p, whole_frames);
  const std::int64_t blocks = ceil_div(p.out_frames, kEncFrames);
  const std::int64_t tasks = p.batch * p.groups * blocks;
  std::vector<std::vector<float>> scratch(threads_for(tasks));
  for (auto& v : scratch) v.resize(static_cast<std::size_t>(phases * pitch + 4 * kEncFrames));
  parallel_for(tasks, [&](std::int64_t task, int thread) {
    const std::int64_t b = task / (p.groups * blocks);
    const std::int64_t g = (task / blocks) % p.groups;
    const std::int64_t t0 = (task % blocks) * kEncFrames;
    const std::int64_t n = std::min(kEncFrames, p.out_frames - t0);
    float* xp = scratch[static_cast<std::size_t>(thread)].data();
    float* buf = xp + phases * pitch;
    const float* xr = x.channel(b, g);
    for (std::int64_t r = 0; r < phases; ++r) {
      for (std::int64_t q = 0; q < pitch; ++q) {
        const std::int64_t pos = (t0 + q) * s + r - pad_left;
        xp[r * pitch + q] = pos >= 0 && pos < x.frames() ? xr[pos] : 0.0f;
      }
    }
    for (std::int64_t o = 0; o < og; o += 4) {
      const std::int64_t rows = std::min<std::int64_t>(4, og - o);
      const std::int64_t oc = g * og + o;
      const float* w = weight + oc * K;
      const float* bo = bias != nullptr ? bias + oc : nullptr;
      if (rows == 4) {
        encoder_tile<4>(xp, tap_offset, w, bo, K, n, buf);
      } else {
        for (std::int64_t i = 0; i < rows; ++i) {
          encoder_tile<1>(xp, tap_offset, w + i * K, bo != nullptr ? bo + i : nullptr, K, n,
                          buf + i * kEncFrames);
        }
      }
      for (std::int64_t i = 0; i < rows; ++i) {
        float* dst = out.channel(b, oc + i) + t0;
        if (streaming) {
          store_row(dst, buf + i * kEncFrames, n);
        } else {
          std::memcpy(dst, buf + i * kEncFrames, static_cast<std::size_t>(n) * sizeof(float));
        }
      }
    }
    if (streaming) fence_streaming_stores();
  });
#else
  // Not chosen without AVX-512 (use_encoder); should it be, the GEMM path computes the layer.
  conv1d_gemm(p, x, pad_left, weight, bias, out, whole_frames);
#endif
}

// Winograd F(4, 3) for K = 3, stride 1, dilation 1 (the long-buffer layers): four outputs
// from a six-sample input tile take six multiplies per (out, in) channel pair instead of
// twelve, so the GEMM work halves. The transforms use the points 0, +-1, +-2 and infinity
// (Lavin & Gray); their fp32 rounding error is about three times that of direct summation,
// still far below the 1e-6 accuracy bar (tests/test_conv_grid.cpp checks it).
constexpr int kWinoTile = 4;    // outputs per tile
constexpr int kWinoPoints = 6;  // transformed values per tile
constexpr double kWinoG[kWinoPoints][3] = {{1.0 / 4, 0, 0},
                                           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                           {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                           {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                           {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                           {0, 0, 1}};

// V[point][j] = B^T d for the tiles d = (p0, p1, p2, p3)[j] followed by (p0, p1)[j + 1]: the
// input row split into its four phases, so every access is unit-stride and the loop vectorizes.
void winograd_input_transform(const float* __restrict p0, const float* __restrict p1,
                              const float* __restrict p2, const float* __restrict p3,
                              std::int64_t nt, float* __restrict v0, float* __restrict v1,
                              float* __restrict v2, float* __restrict v3, float* __restrict v4,
                              float* __restrict v5) {
  for (std::int64_t j = 0; j < nt; ++j) {
    const float d0 = p0[j], d1 = p1[j], d2 = p2[j], d3 = p3[j], d4 = p0[j + 1], d5 = p1[j + 1];
    v0[j] = 4 * d0 - 5 * d2 + d4;
    v1[j] = -4 * (d1 + d2) + d3 + d4;
    v2[j] = 4 * (d1 - d2) - d3 + d4;
    v3[j] = 2 * (d3 - d1) + d4 - d2;
    v4[j] = 2 * (d1 - d3) + d4 - d2;
    v5[j] = 4 * d1 - 5 * d3 + d5;
  }
}

void winograd_input_tile(const float* __restrict seg, std::int64_t nt, float* __restrict v,
                         std::int64_t stride_v, float* __restrict ph) {
  const std::int64_t n = nt + 1;
  for (std::int64_t j = 0; j < n; ++j) {
    ph[j] = seg[4 * j];
    ph[n + j] = seg[4 * j + 1];
    ph[2 * n + j] = seg[4 * j + 2];
    ph[3 * n + j] = seg[4 * j + 3];
  }
  winograd_input_transform(ph, ph + n, ph + 2 * n, ph + 3 * n, nt, v, v + stride_v,
                           v + 2 * stride_v, v + 3 * stride_v, v + 4 * stride_v, v + 5 * stride_v);
}

// out[i * tiles + j] = bias + (A^T M)[i] for tile j: the four output phases, unit-stride.
void winograd_output_tile(const float* __restrict m, std::int64_t stride_m, std::int64_t nt,
                          float bias, float* __restrict out, std::int64_t stride_out) {
  const float* __restrict m0 = m;
  const float* __restrict m1 = m + stride_m;
  const float* __restrict m2 = m + 2 * stride_m;
  const float* __restrict m3 = m + 3 * stride_m;
  const float* __restrict m4 = m + 4 * stride_m;
  const float* __restrict m5 = m + 5 * stride_m;
  float* __restrict o0 = out;
  float* __restrict o1 = out + stride_out;
  float* __restrict o2 = out + 2 * stride_out;
  float* __restrict o3 = out + 3 * stride_out;
  for (std::int64_t j = 0; j < nt; ++j) {
    const float a0 = m0[j], a1 = m1[j], a2 = m2[j], a3 = m3[j], a4 = m4[j], a5 = m5[j];
    o0[j] = bias + (a0 + a1 + a2 + a3 + a4);
    o1[j] = bias + (a1 - a2 + 2 * (a3 - a4));
    o2[j] = bias + (a1 + a2 + 4 * (a3 + a4));
    o3[j] = bias + (a1 - a2 + 8 * (a3 - a4) + a5);
  }
}

// y[4j + i] = phase i of tile j, for the first n frames.
void interleave4(const float* __restrict phases, std::int64_t stride, std::int64_t n,
                 float* __restrict y) {
  const float* __restrict q0 = phases;
  const float* __restrict q1 = phases + stride;
  const float* __restrict q2 = phases + 2 * stride;
  const float* __restrict q3 = phases + 3 * stride;
  const std::int64_t full = n / 4;
  for (std::int64_t j = 0; j < full; ++j) {
    y[4 * j] = q0[j];
    y[4 * j + 1] = q1[j];
    y[4 * j + 2] = q2[j];
    y[4 * j + 3] = q3[j];
  }
  for (std::int64_t t = full * 4; t < n; ++t) y[t] = phases[(t & 3) * stride + (t >> 2)];
}

// NaN and Inf are the floats whose exponent bits are all ones. An integer max over the
// exponent fields vectorizes (a float sum would not, without reassociation).
bool all_finite(const float* x, std::int64_t n) {
  std::uint32_t exponent = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    exponent = std::max(exponent, bits & 0x7f800000u);
  }
  return exponent != 0x7f800000u;
}

bool use_winograd(const Conv1dParams& p) {
  return p.kernel_size == 3 && p.stride == 1 && p.dilation == 1 && p.in_channels / p.groups >= 16 &&
         p.out_channels / p.groups >= 16 && p.out_frames >= 64;
}

// Tiles per task: keep V (6 x cg x tiles) and M (6 x og x tiles) within about 512 KiB, so
// the transforms run from L2 (1 MiB spilled to L3 and doubled their cost).
std::int64_t winograd_tiles(const Conv1dParams& p, std::int64_t whole_frames) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  std::int64_t tiles =
      std::clamp<std::int64_t>(kColumnFloats / 2 / (kWinoPoints * (cg + og)), 16, 1024);
  tiles = tiles / 16 * 16;
  return std::min(tiles, ceil_div(whole_frames, kWinoTile));
}

#if defined(__AVX512F__)
// M (rows x n) = A (rows x depth) * B (depth x n), register-blocked with AVX-512, for
// the GEMMs of the Winograd points (A: the transformed weights, depth = in/groups; B: a task's
// transformed input, row-major and compact): 8 rows x 48 frames of M in 24 registers, per
// reduction step 3 loads of B and 8 broadcasts of A for 24 FMAs. A comes packed once per call
// as [rows / 8][depth][8] (rows past the end zero). Against Eigen's GEMM, which repacks both
// operands at every call: seedA 23.4-26.9 vs 27.6-32.2 ms on two threads (five interleaved
// rounds, `convbank bench --workload seedA --threads 2 --repeat 20`). On im2col's operands
// (input rows 64 KB apart, reductions of 512) it was slower than Eigen, which packs them:
// tcn_pointwise 27-30 vs 14-16 ms, so the other GEMMs stay Eigen's.
// Each output sums its first 256 products in order, then adds the sum of each next 256
// (wide layers): one serial fp32 sum over a reduction of 8192 (tried on an im2col GEMM, 512
// channels x 16 taps) measured 1.9e-6 relative L2, over the 1e-6 bar.
constexpr std::int64_t kGemmRows = 8;
constexpr std::int64_t kGemmChunk = 256;

// Floats of A packed (rows rounded up to the 8-row block).
std::int64_t gemm_packed_floats(std::int64_t rows, std::int64_t depth) {
  return ceil_div(rows, kGemmRows) * kGemmRows * depth;
}

// A (rows x depth, row-major) into dst[gemm_packed_floats()], zero-filled.
void gemm_pack_rows(const float* a, std::int64_t rows, std::int64_t depth, float* dst) {
  std::fill(dst, dst + gemm_packed_floats(rows, depth), 0.0f);
  for (std::int64_t o = 0; o < rows; ++o) {
    for (std::int64_t c = 0; c < depth; ++c) {
      dst[((o / kGemmRows) * depth + c) * kGemmRows + o % kGemmRows] = a[o * depth + c];
    }
  }
}

// Rows [0, rows) of an 8-row block, J x 16 frames (the last 16 masked by `last`), reduction
// steps [0, depth) of ap and b: into m (first), or added to it.
template <int J>
void gemm_tile(const float* ap, const float* b, std::int64_t ldb, std::int64_t depth, float* m,
               std::int64_t ldm, std::int64_t rows, __mmask16 last, bool first) {
  // Every index into acc a constant (unrolled loops, rows tested per row): GCC keeps the array
  // in registers only then (a runtime row count in the store loop put it on the stack, with
  // 24 stores per reduction step).
  __m512 acc[kGemmRows][J];
#pragma GCC unroll 8
  for (int r = 0; r < kGemmRows; ++r) {
#pragma GCC unroll 3
    for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  for (std::int64_t c = 0; c < depth; ++c) {
    __m512 bv[J];
#pragma GCC unroll 3
    for (int j = 0; j < J; ++j) {
      bv[j] = j + 1 < J ? _mm512_loadu_ps(b + c * ldb + 16 * j)
                        : _mm512_maskz_loadu_ps(last, b + c * ldb + 16 * j);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kGemmRows; ++r) {
      const __m512 av = _mm512_set1_ps(ap[c * kGemmRows + r]);
#pragma GCC unroll 3
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kGemmRows; ++r) {
    if (r >= rows) break;
#pragma GCC unroll 3
    for (int j = 0; j < J; ++j) {
      float* mr = m + r * ldm + 16 * j;
      if (j + 1 < J) {
        _mm512_storeu_ps(mr, first ? acc[r][j] : _mm512_add_ps(_mm512_loadu_ps(mr), acc[r][j]));
      } else {
        _mm512_mask_storeu_ps(
            mr, last,
            first ? acc[r][j] : _mm512_add_ps(_mm512_maskz_loadu_ps(last, mr), acc[r][j]));
      }
    }
  }
}

void gemm_avx512(const float* ap, std::int64_t rows, std::int64_t depth, const float* b,
                 std::int64_t ldb, std::int64_t n, float* m, std::int64_t ldm) {
  // The columns [t, t + width) of one 8-row block, chunk by chunk of the reduction.
  auto columns = [&](auto tile, const float* ab, std::int64_t r, std::int64_t t, float* mo,
                     __mmask16 last) {
    for (std::int64_t c = 0; c < depth; c += kGemmChunk) {
      tile(ab + c * kGemmRows, b + c * ldb + t, ldb, std::min(kGemmChunk, depth - c), mo + t, ldm,
           r, last, c == 0);
    }
  };
  for (std::int64_t o = 0; o < rows; o += kGemmRows) {
    const float* ab = ap + o * depth;
    const std::int64_t r = std::min(kGemmRows, rows - o);
    float* mo = m + o * ldm;
    std::int64_t t = 0;
    for (; t + 48 <= n; t += 48) columns(gemm_tile<3>, ab, r, t, mo, 0xffff);
    const std::int64_t rest = n - t;
    if (rest > 0) {
      const __mmask16 last =
          static_cast<__mmask16>(rest % 16 == 0 ? 0xffff : (1u << (rest % 16)) - 1);
      if (rest > 32) {
        columns(gemm_tile<3>, ab, r, t, mo, last);
      } else if (rest > 16) {
        columns(gemm_tile<2>, ab, r, t, mo, last);
      } else {
        columns(gemm_tile<1>, ab, r, t, mo, last);
      }
    }
  }
}
#endif

void conv1d_winograd(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                     const float* weight, const float* bias, TensorView<float> out,
                     std::int64_t whole_frames) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  // Transformed weights U[group][point] (og x cg), computed once per call in double.
  std::vector<float> u(static_cast<std::size_t>(p.groups * kWinoPoints * og * cg));
  for (std::int64_t g = 0; g < p.groups; ++g) {
    for (int xi = 0; xi < kWinoPoints; ++xi) {
      float* dst = u.data() + (g * kWinoPoints + xi) * og * cg;
      for (std::int64_t o = 0; o < og; ++o) {
        for (std::int64_t c = 0; c < cg; ++c) {
          const float* w = weight + ((g * og + o) * cg + c) * 3;
          dst[o * cg + c] = static_cast<float>(kWinoG[xi][0] * w[0] + kWinoG[xi][1] * w[1] +
                                               kWinoG[xi][2] * w[2]);
        }
      }
    }
  }
#if defined(__AVX512F__)
  // U per (group, point) as gemm_avx512 reads it.
  const std::int64_t packed_len = gemm_packed_floats(og, cg);
  std::vector<float> packed(static_cast<std::size_t>(p.groups * kWinoPoints * packed_len));
  for (std::int64_t i = 0; i < p.groups * kWinoPoints; ++i) {
    gemm_pack_rows(u.data() + i * og * cg, og, cg, packed.data() + i * packed_len);
  }
#endif
  const std::int64_t tiles = winograd_tiles(p, whole_frames);
  const std::int64_t block = tiles * kWinoTile;
  const std::int64_t blocks = ceil_div(p.out_frames, block);
  const std::int64_t tasks = p.batch * p.groups * blocks;
  const int threads = threads_for(tasks);
  const std::int64_t seg_len = block + kWinoTile;
  const bool streaming = use_streaming_stores(p, whole_frames);
  TaskScratch& scratch = task_scratch();
  scratch.reserve(threads,
                  kWinoPoints * (cg + og) * tiles + seg_len + kWinoTile * (tiles + 1) + block);

  parallel_for(tasks, [&](std::int64_t task, int thread) {
    const std::int64_t b = task / (p.groups * blocks);
    const std::int64_t g = (task / blocks) % p.groups;
    const std::int64_t t0 = (task % blocks) * block;
    const std::int64_t tn = std::min(block, p.out_frames - t0);
    const std::int64_t nt = ceil_div(tn, kWinoTile);
    float* v = scratch[thread];                     // [point][c][tile]
    float* m = v + kWinoPoints * cg * tiles;        // [point][o][tile]
    float* seg = m + kWinoPoints * og * tiles;      // one input row, zero-extended
    float* phases = seg + seg_len;                  // 4 x (tiles + 1) de-interleaved values
    float* row = phases + kWinoTile * (tiles + 1);  // one output row before streaming
    const std::int64_t stride_v = cg * nt;
    bool finite = true;
    const std::int64_t stride_m = og * nt;
    for (std::int64_t c = 0; c < cg; ++c) {
      const float* xr = x.channel(b, g * cg + c);
      const std::int64_t first = t0 - pad_left;  // input index of seg[0]
      const std::int64_t len = (nt + 1) * kWinoTile;
      const Range r = valid_outputs(first, 1, x.frames(), 0, len);
      if (r.begin == 0 && r.end == len) {
        // Wholly inside the input: transformed straight from it, no zero-extended copy.
        finite = finite && all_finite(xr + first, len);
        winograd_input_tile(xr + first, nt, v + c * nt, stride_v, phases);
        continue;
      }
      std::fill(seg, seg + r.begin, 0.0f);
      std::memcpy(seg + r.begin, xr + first + r.begin,
                  static_cast<std::size_t>(r.end - r.begin) * sizeof(float));
      std::fill(seg + r.end, seg + len, 0.0f);
      finite = finite && all_finite(seg + r.begin, r.end - r.begin);
      winograd_input_tile(seg, nt, v + c * nt, stride_v, phases);
    }
    if (!finite) {
      // The transforms mix the samples of a tile, so one NaN or Inf would reach outputs that do
      // not read it (and Inf - Inf makes NaN). PyTorch's semantics need the direct formula here.
      for (std::int64_t o = g * og; o < (g + 1) * og; ++o) {
        conv1d_direct_row(p, x, pad_left, weight, bias, b, o, t0, t0 + tn, out.channel(b, o) + t0);
      }
      return;
    }
    for (int xi = 0; xi < kWinoPoints; ++xi) {
#if defined(__AVX512F__)
      gemm_avx512(packed.data() + (g * kWinoPoints + xi) * packed_len, og, cg, v + xi * stride_v,
                  nt, nt, m + xi * stride_m, nt);
#else
      ConstRowMap uw(u.data() + (g * kWinoPoints + xi) * og * cg, og, cg);
      RowMap(m + xi * stride_m, og, nt).noalias() = uw * ConstRowMap(v + xi * stride_v, cg, nt);
#endif
    }
    for (std::int64_t o = 0; o < og; ++o) {
      const float b0 = bias != nullptr ? bias[g * og + o] : 0.0f;
      winograd_output_tile(m + o * nt, stride_m, nt, b0, phases, tiles);
      float* y = out.channel(b, g * og + o) + t0;
      if (streaming) {
        interleave4(phases, tiles, tn, row);
        store_row(y, row, tn);
      } else {
        interleave4(phases, tiles, tn, y);
      }
    }
    if (streaming) fence_streaming_stores();
  });
}

// Output row (b, o), frames [t0, t1): bias, then every (c, k) contribution in that order.
void conv_transpose1d_direct_row(const ConvTranspose1dParams& p, TensorView<const float> x,
                                 const float* weight, const float* bias, std::int64_t b,
                                 std::int64_t o, std::int64_t t0, std::int64_t t1, float* y) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t g = o / og;
  const std::int64_t ol = o % og;
  fill_bias(y + t0, t1 - t0, bias, o);
  for (std::int64_t c = 0; c < cg; ++c) {
    const std::int64_t ci = g * cg + c;
    const float* xr = x.channel(b, ci);
    for (std::int64_t k = 0; k < p.kernel_size; ++k) {
      const float w = weight[(ci * og + ol) * p.kernel_size + k];
      // Input i lands on output t = i * stride - padding + k * dilation.
      const std::int64_t shift = k * p.dilation - p.padding;
      const std::int64_t i0 = std::max<std::int64_t>(0, ceil_div(t0 - shift, p.stride));
      const std::int64_t i1 = std::min(x.frames(), floor_div(t1 - 1 - shift, p.stride) + 1);
      if (p.stride == 1) {
        for (std::int64_t i = i0; i < i1; ++i) y[i + shift] += w * xr[i];
      } else {
        for (std::int64_t i = i0; i < i1; ++i) y[i * p.stride + shift] += w * xr[i];
      }
    }
  }
}

void conv_transpose1d_direct(const ConvTranspose1dParams& p, TensorView<const float> x,
                             const float* weight, const float* bias, TensorView<float> out) {
  const std::int64_t blocks = ceil_div(p.out_frames, kDirectBlockFrames);
  const std::int64_t rows = p.batch * p.out_channels;
  parallel_for(rows * blocks, [&](std::int64_t task, int) {
    const std::int64_t row = task / blocks;
    const std::int64_t t0 = (task % blocks) * kDirectBlockFrames;
    const std::int64_t t1 = std::min(p.out_frames, t0 + kDirectBlockFrames);
    const std::int64_t b = row / p.out_channels;
    const std::int64_t o = row % p.out_channels;
    conv_transpose1d_direct_row(p, x, weight, bias, b, o, t0, t1, out.channel(b, o));
  });
}

std::int64_t conv_transpose1d_gemm_block(const ConvTranspose1dParams& p,
                                         std::int64_t whole_frames) {
  const std::int64_t ok = p.out_channels / p.groups * p.kernel_size;
  const std::int64_t reach = ceil_div(p.dilation * (p.kernel_size - 1), p.stride) + 1;
  std::int64_t block_inputs = std::max<std::int64_t>(kColumnFloats / ok, 8 * reach);
  block_inputs = std::clamp<std::int64_t>(block_inputs, 16, 8192);
  return std::min(block_inputs * p.stride, whole_frames);
}

#if defined(__AVX512F__)
// col = w^T x for a product of at most 16 rows (out/groups x K: a decoder to one or a few
// channels), w [cg][R], x [cg][ni] with rows xcs apart, col [R][ni]. Eigen packs all of x for a
// product whose 16 columns take few multiply-adds (dec_tasnet on one thread: the packing 28 % of
// a `perf record`, the multiply-adds 17 %). Here each 16-frame vector of a channel is loaded
// once and multiplied into R row sums by broadcast weights. Channels go 16 at a time, each
// group's sums added to col in order: 16 rows read side by side along time (the hardware
// prefetches 16 streams; all 512 channels at one time position touched 512 pages per vector
// and ran twice as slow as Eigen), and no chain longer than 16 products.
constexpr std::int64_t kSmallRowsChannels = 16;
template <int R>
void small_rows_gemm(const float* w, std::int64_t cg, const float* x, std::int64_t xcs,
                     std::int64_t ni, float* col) {
  for (std::int64_t c0 = 0; c0 < cg; c0 += kSmallRowsChannels) {
    const std::int64_t c1 = std::min(cg, c0 + kSmallRowsChannels);
    for (std::int64_t i = 0; i < ni; i += 16) {
      const __mmask16 m = ni - i >= 16 ? static_cast<__mmask16>(0xffff)
                                       : static_cast<__mmask16>((1u << (ni - i)) - 1);
      __m512 acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
      for (std::int64_t c = c0; c < c1; ++c) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + c * xcs + i);
        const float* wc = w + c * R;
        for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(wc[r]), xv, acc[r]);
      }
      for (int r = 0; r < R; ++r) {
        float* dst = col + r * ni + i;
        _mm512_mask_storeu_ps(
            dst, m, c0 == 0 ? acc[r] : _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), acc[r]));
      }
    }
  }
}

template <int... R>
constexpr auto small_rows_table(std::integer_sequence<int, R...>) {
  return std::array{&small_rows_gemm<R + 1>...};
}
constexpr auto kSmallRowsGemm = small_rows_table(std::make_integer_sequence<int, 16>{});
#endif

// The columns of a ConvTranspose1d block, col = w^T x (w [cg][ok] of the group, x [cg][ni] with
// rows xcs apart): the small-rows product for decoders to a few channels with a real reduction,
// else Eigen's GEMM.
void transpose_columns(const float* w, std::int64_t ok, std::int64_t cg, const float* x,
                       std::int64_t xcs, std::int64_t ni, float* col,
                       Eigen::internal::level3_blocking<float, float>& blocking) {
#if defined(__AVX512F__)
  if (ok <= 16 && cg >= 8) {
    kSmallRowsGemm[static_cast<std::size_t>(ok - 1)](w, cg, x, xcs, ni, col);
    return;
  }
#endif
  std::fill(col, col + ok * ni, 0.0f);
  RowMajorGemm<Eigen::ColMajor, Eigen::RowMajor>::run(ok, ni, cg, w, ok, x, xcs, col, 1, ni, 1.0f,
                                                      blocking);
}

void conv_transpose1d_gemm(const ConvTranspose1dParams& p, TensorView<const float> x,
                           const float* weight, const float* bias, TensorView<float> out,
                           std::int64_t whole_frames) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t ok = og * p.kernel_size;
  // Inputs that touch `block` output frames: block / stride plus the kernel's reach.
  const std::int64_t reach = ceil_div(p.dilation * (p.kernel_size - 1), p.stride) + 1;
  const std::int64_t block = conv_transpose1d_gemm_block(p, whole_frames);
  const std::int64_t blocks = ceil_div(p.out_frames, block);
  const std::int64_t tasks = p.batch * p.groups * blocks;
  const int threads = threads_for(tasks);
  const std::int64_t max_inputs = block / p.stride + reach + 1;
  // Per task: the columns and Eigen's packing blocks.
  const std::int64_t col_floats = round_up16(ok * max_inputs);
  const std::int64_t a_floats = round_up16(cg * max_inputs);
  TaskScratch& scratch = task_scratch();
  scratch.reserve(threads, col_floats + a_floats + round_up16(cg * ok));

  parallel_for(tasks, [&](std::int64_t task, int thread) {
    const std::int64_t b = task / (p.groups * blocks);
    const std::int64_t g = (task / blocks) % p.groups;
    const std::int64_t t0 = (task % blocks) * block;
    const std::int64_t t1 = std::min(p.out_frames, t0 + block);
    for (std::int64_t o = 0; o < og; ++o) {
      fill_bias(out.channel(b, g * og + o) + t0, t1 - t0, bias, g * og + o);
    }
    const std::int64_t i_lo = std::max<std::int64_t>(
        0, ceil_div(t0 + p.padding - p.dilation * (p.kernel_size - 1), p.stride));
    const std::int64_t i_hi = std::min(x.frames(), floor_div(t1 - 1 + p.padding, p.stride) + 1);
    if (i_lo >= i_hi) return;
    const std::int64_t ni = i_hi - i_lo;
    float* col = scratch[thread];
    float* packs = col + col_floats;
    // The blocking Eigen's own product would pick.
    const GemmPlan plan = plan_gemm(ni, ok, cg);
    WorkspaceBlocking blocking(plan.kc, plan.mc, plan.nc, packs, packs + a_floats);
    transpose_columns(weight + g * cg * ok, ok, cg, x.channel(b, g * cg) + i_lo, x.channel_stride(),
                      ni, col, blocking);
    for (std::int64_t o = 0; o < og; ++o) {
      float* y = out.channel(b, g * og + o);
      for (std::int64_t k = 0; k < p.kernel_size; ++k) {
        const float* cr = col + (o * p.kernel_size + k) * ni;
        const std::int64_t shift = k * p.dilation - p.padding;
        const std::int64_t i0 = std::max(i_lo, ceil_div(t0 - shift, p.stride));
        const std::int64_t i1 = std::min(i_hi, floor_div(t1 - 1 - shift, p.stride) + 1);
        if (p.stride == 1) {
          for (std::int64_t i = i0; i < i1; ++i) y[i + shift] += cr[i - i_lo];
        } else {
          for (std::int64_t i = i0; i < i1; ++i) y[i * p.stride + shift] += cr[i - i_lo];
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Real-time entries (cpu/workspace.hpp): one thread, every buffer in the caller's workspace.

// Blocks of about 64 KiB of columns: a stream's chunk is short, and the buffers stay in L1/L2.
constexpr std::int64_t kWorkspaceColumnFloats = 1 << 14;
// Weights (per group) from which a streaming call folds its batch into one GEMM: 1 MiB, about
// this class of machine's L2 per core.
constexpr std::int64_t kFoldWeightFloats = std::int64_t{1} << 18;

bool direct_shape(std::int64_t in_channels, std::int64_t out_channels, std::int64_t groups) {
  return in_channels / groups <= 2 && out_channels / groups <= 2;
}

// Conv1d adds stride-1 layers of few outputs per group (a vocoder's last layer, 32 -> 1, K 7):
// im2col and a GEMM of 1-4 rows run far below the FMA rate there, and the direct formula sums
// eight 16-frame vectors per output in registers (conv1d_direct_row). Measured on one core of the
// development machine: see docs/performance.md, "Conv1d layers of few outputs".
bool conv1d_direct_shape(const Conv1dParams& p) {
  if (direct_shape(p.in_channels, p.out_channels, p.groups)) return true;
#if defined(__AVX512F__)
  return p.stride == 1 && p.out_channels / p.groups <= 4;
#else
  return false;
#endif
}

struct Conv1dWorkspacePlan {
  bool direct = false;
  std::int64_t block = 0;  // output frames per GEMM
  std::int64_t col_floats = 0;
  std::int64_t y_floats = 0;  // the batch-folded GEMM's output (conv1d_workspace)
  GemmPlan gemm;
};
Conv1dWorkspacePlan plan_conv1d_workspace(const Conv1dParams& p) {
  Conv1dWorkspacePlan plan;
  plan.direct = conv1d_direct_shape(p);
  if (plan.direct) return plan;
  const std::int64_t kc = p.in_channels / p.groups * p.kernel_size;
  plan.block = std::clamp<std::int64_t>(kWorkspaceColumnFloats / kc, 16, 512) / 16 * 16;
  plan.col_floats = round_up16(kc * plan.block);
  plan.y_floats = round_up16(p.out_channels / p.groups * plan.block);
  // Eigen's column-major view of y = W * col is y^T = col^T * W^T: rows are output frames.
  plan.gemm = plan_gemm(plan.block, p.out_channels / p.groups, kc);
  return plan;
}

struct TransposeWorkspacePlan {
  bool direct = false;
  std::int64_t block = 0;       // output frames per GEMM
  std::int64_t max_inputs = 0;  // GEMM columns at most
  std::int64_t col_floats = 0;
  std::int64_t x_floats = 0;  // the batch-folded GEMM's packed input (conv_transpose1d_workspace)
  GemmPlan gemm;
};
TransposeWorkspacePlan plan_transpose_workspace(const ConvTranspose1dParams& p) {
  TransposeWorkspacePlan plan;
  plan.direct = direct_shape(p.in_channels, p.out_channels, p.groups);
  if (plan.direct) return plan;
  const std::int64_t ok = p.out_channels / p.groups * p.kernel_size;
  const std::int64_t reach = ceil_div(p.dilation * (p.kernel_size - 1), p.stride) + 1;
  const std::int64_t block_inputs = std::clamp<std::int64_t>(kWorkspaceColumnFloats / ok, 16, 512);
  plan.block = block_inputs * p.stride;
  const std::int64_t max_inputs = block_inputs + reach + 1;
  plan.max_inputs = max_inputs;
  plan.col_floats = round_up16(ok * max_inputs);
  plan.x_floats = round_up16(p.in_channels / p.groups * max_inputs);
  plan.gemm = plan_gemm(max_inputs, ok, p.in_channels / p.groups);
  return plan;
}

}  // namespace

bool conv1d_is_direct(const Conv1dParams& p) {
  return conv1d_direct_shape(p);
}

void set_num_threads(int threads) {
  g_threads = threads;
}

int num_threads() {
  if (g_threads > 0) return g_threads;
#if defined(CONVBANK_HAVE_OPENMP)
  return omp_get_num_procs();
#else
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#endif
}

const char* description() {
#if defined(CONVBANK_HAVE_OPENMP)
  return "Eigen " EIGEN_MAKESTRING(EIGEN_WORLD_VERSION) "." EIGEN_MAKESTRING(
      EIGEN_MAJOR_VERSION) "." EIGEN_MAKESTRING(EIGEN_MINOR_VERSION) ", OpenMP";
#else
  return "Eigen " EIGEN_MAKESTRING(EIGEN_WORLD_VERSION) "." EIGEN_MAKESTRING(
      EIGEN_MAJOR_VERSION) "." EIGEN_MAKESTRING(EIGEN_MINOR_VERSION) ", single thread";
#endif
}

namespace {

enum class Conv1dPath { kDirect, kEncoder, kWinograd, kGemm };

// Chosen for the whole call (Winograd needs enough output frames), so pieces take it too.
Conv1dPath conv1d_path(const Conv1dParams& p) {
  if (conv1d_direct_shape(p)) return Conv1dPath::kDirect;
  if (use_encoder(p)) return Conv1dPath::kEncoder;
  return use_winograd(p) ? Conv1dPath::kWinograd : Conv1dPath::kGemm;
}

// One piece (or the whole call): `p` describes the piece, `whole_frames` the whole output.
void conv1d_piece(const Conv1dParams& p, Conv1dPath path, TensorView<const float> input,
                  const float* weight, const float* bias, TensorView<float> output,
                  std::int64_t whole_frames) {
  TensorView<const float> x = input;
  std::int64_t pad_left = p.pad_left;
  std::vector<float> padded;
  if (p.padding_mode != PaddingMode::kZeros && (p.pad_left > 0 || p.pad_right > 0)) {
    padded = pad_input(input, p.pad_left, p.pad_right, p.padding_mode);
    x = TensorView<const float>(
        padded.data(), Shape{p.batch, p.in_channels, p.in_frames + p.pad_left + p.pad_right});
    pad_left = 0;
  }
  switch (path) {
    case Conv1dPath::kDirect:
      conv1d_direct(p, x, pad_left, weight, bias, output, whole_frames);
      break;
    case Conv1dPath::kEncoder:
      conv1d_encoder(p, x, pad_left, weight, bias, output, whole_frames);
      break;
    case Conv1dPath::kWinograd:
      conv1d_winograd(p, x, pad_left, weight, bias, output, whole_frames);
      break;
    case Conv1dPath::kGemm:
      conv1d_gemm(p, x, pad_left, weight, bias, output, whole_frames);
      break;
  }
}

// Output frames per piece: at most `limit` input frames per piece, and a multiple of the
// path's block, so each block of a piece is a block of the whole call, summed the same way.
std::int64_t piece_frames(std::int64_t limit_outputs, std::int64_t block) {
  block = std::max<std::int64_t>(1, block);
  return std::max<std::int64_t>(1, limit_outputs / block) * block;
}

}  // namespace

void conv1d(const Conv1dParams& p, TensorView<const float> input, const float* weight,
            const float* bias, TensorView<float> output) {
  const Conv1dPath path = conv1d_path(p);
  const std::int64_t limit = convbank::working_set_frames();
  if (p.in_frames + p.pad_left + p.pad_right <= limit) {
    conv1d_piece(p, path, input, weight, bias, output, p.out_frames);
    return;
  }
  // Longer than the working set: pieces of output frames, each reading only the input (and
  // padding) it needs, so padded copies and per-call buffers stay bounded by the limit.
  const std::int64_t span = p.dilation * (p.kernel_size - 1) + 1;
  const std::int64_t block = path == Conv1dPath::kGemm ? conv1d_gemm_block(p, p.out_frames)
                             : path == Conv1dPath::kWinograd
                                 ? kWinoTile * winograd_tiles(p, p.out_frames)
                             : path == Conv1dPath::kEncoder ? kEncFrames
                                                            : kDirectBlockFrames;
  const std::int64_t step =
      piece_frames(std::max<std::int64_t>(1, (limit - span) / p.stride + 1), block);
  const std::int64_t padded_frames = p.in_frames + p.pad_left + p.pad_right;
  for (std::int64_t t0 = 0; t0 < p.out_frames; t0 += step) {
    const std::int64_t t1 = std::min(p.out_frames, t0 + step);
    // Padded-coordinate window [w0, w1) of the piece, and its part inside the real input.
    // Winograd's last tile reads up to two tiles past the window: those frames round into its
    // outputs, so the piece sees them as the whole call does.
    const std::int64_t w0 = t0 * p.stride;
    const std::int64_t w1 = std::min(padded_frames, (t1 - 1) * p.stride + span + 2 * kWinoTile);
    const std::int64_t a = std::clamp<std::int64_t>(w0 - p.pad_left, 0, p.in_frames);
    const std::int64_t b = std::clamp<std::int64_t>(w1 - p.pad_left, a, p.in_frames);
    Conv1dParams q = p;
    q.out_frames = t1 - t0;
    TensorView<float> out = output.slice_frames(t0, t1 - t0);
    if (p.padding_mode == PaddingMode::kZeros || (p.pad_left == 0 && p.pad_right == 0)) {
      q.padding_mode = PaddingMode::kZeros;
      q.in_frames = b - a;
      q.pad_left = p.pad_left - w0 + a;  // negative when the window lies in the right padding
      q.pad_right = 0;
      conv1d_piece(q, path, input.slice_frames(a, b - a), weight, bias, out, p.out_frames);
    } else {
      // reflect / replicate / circular: materialize just this window of the padded signal.
      const std::int64_t n = w1 - w0;
      std::vector<float> window(static_cast<std::size_t>(p.batch * p.in_channels * n));
      for (std::int64_t bi = 0; bi < p.batch; ++bi) {
        for (std::int64_t c = 0; c < p.in_channels; ++c) {
          const float* src = input.channel(bi, c);
          float* dst = window.data() + (bi * p.in_channels + c) * n;
          for (std::int64_t j = 0; j < n; ++j) {
            dst[j] = src[pad_index(w0 + j - p.pad_left, p.in_frames, p.padding_mode)];
          }
        }
      }
      q.padding_mode = PaddingMode::kZeros;
      q.in_frames = n;
      q.pad_left = q.pad_right = 0;
      conv1d_piece(q, path,
                   TensorView<const float>(window.data(), Shape{p.batch, p.in_channels, n}), weight,
                   bias, out, p.out_frames);
    }
  }
}

void conv_transpose1d(const ConvTranspose1dParams& p, TensorView<const float> input,
                      const float* weight, const float* bias, TensorView<float> output) {
  const bool direct = direct_shape(p.in_channels, p.out_channels, p.groups);
  const std::int64_t limit = convbank::working_set_frames();
  const std::int64_t reach = p.dilation * (p.kernel_size - 1);
  if (p.in_frames <= limit && p.out_frames <= limit) {
    if (direct) {
      conv_transpose1d_direct(p, input, weight, bias, output);
    } else {
      conv_transpose1d_gemm(p, input, weight, bias, output, p.out_frames);
    }
    return;
  }
  // Pieces of output frames; each reads the inputs that reach it, at most about
  // (piece + reach) / stride of them.
  const std::int64_t block =
      direct ? kDirectBlockFrames : conv_transpose1d_gemm_block(p, p.out_frames);
  const std::int64_t step = piece_frames(std::max<std::int64_t>(1, limit - reach), block);
  for (std::int64_t t0 = 0; t0 < p.out_frames; t0 += step) {
    const std::int64_t t1 = std::min(p.out_frames, t0 + step);
    const std::int64_t i_lo =
        std::clamp<std::int64_t>(ceil_div(t0 + p.padding - reach, p.stride), 0, p.in_frames);
    const std::int64_t i_hi =
        std::clamp<std::int64_t>(floor_div(t1 - 1 + p.padding, p.stride) + 1, i_lo, p.in_frames);
    ConvTranspose1dParams q = p;
    q.in_frames = std::max<std::int64_t>(0, i_hi - i_lo);
    q.padding = t0 + p.padding - i_lo * p.stride;
    q.out_frames = t1 - t0;
    const TensorView<const float> x = input.slice_frames(i_lo, q.in_frames);
    TensorView<float> out = output.slice_frames(t0, t1 - t0);
    if (direct) {
      conv_transpose1d_direct(q, x, weight, bias, out);
    } else {
      conv_transpose1d_gemm(q, x, weight, bias, out, p.out_frames);
    }
  }
}

std::int64_t conv1d_workspace_floats(const Conv1dParams& p) {
  const Conv1dWorkspacePlan plan = plan_conv1d_workspace(p);
  return plan.col_floats + plan.gemm.a_floats + plan.gemm.b_floats + plan.y_floats;
}

void conv1d_workspace(const Conv1dParams& p, TensorView<const float> x, const float* weight,
                      const float* bias, TensorView<float> out, float* workspace) noexcept {
  const Conv1dWorkspacePlan plan = plan_conv1d_workspace(p);
  if (plan.direct) {
    for (std::int64_t b = 0; b < p.batch; ++b) {
      for (std::int64_t o = 0; o < p.out_channels; ++o) {
        conv1d_direct_row(p, x, p.pad_left, weight, bias, b, o, 0, p.out_frames, out.channel(b, o));
      }
    }
    return;
  }
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t kc = cg * p.kernel_size;
  float* col = workspace;
  WorkspaceBlocking blocking(plan.gemm.kc, plan.gemm.mc, plan.gemm.nc, col + plan.col_floats,
                             col + plan.col_floats + plan.gemm.a_floats);
  if (p.batch > 1 && p.batch * p.out_frames <= plan.block && og * kc >= kFoldWeightFloats) {
    // A streaming chunk of a few frames for several signals, with weights larger than the L2
    // (megabytes for a Fourier bank): one GEMM over the whole batch, so the weights pass through
    // the cache once per call instead of once per signal. Smaller weights stay cached anyway,
    // and there the fold's extra output pass costs more than it saves (TasNet chain, batch 8:
    // 250 vs 195 us per 256-frame chunk). Same blocking, so each output sums in the same order.
    const std::int64_t tn = p.out_frames;
    const std::int64_t n = p.batch * tn;
    float* ybuf = col + plan.col_floats + plan.gemm.a_floats + plan.gemm.b_floats;
    for (std::int64_t g = 0; g < p.groups; ++g) {
      for (std::int64_t b = 0; b < p.batch; ++b) {
        for (std::int64_t c = 0; c < cg; ++c) {
          const float* xr = x.channel(b, g * cg + c);
          for (std::int64_t k = 0; k < p.kernel_size; ++k) {
            float* dst = col + (c * p.kernel_size + k) * n + b * tn;
            const std::int64_t offset = k * p.dilation - p.pad_left;
            const Range r = valid_outputs(offset, p.stride, x.frames(), 0, tn);
            std::fill(dst, dst + r.begin, 0.0f);
            for (std::int64_t j = r.begin; j < r.end; ++j) dst[j] = xr[j * p.stride + offset];
            std::fill(dst + r.end, dst + tn, 0.0f);
          }
        }
      }
      std::fill(ybuf, ybuf + og * n, 0.0f);
      RowMajorGemm<Eigen::RowMajor, Eigen::RowMajor>::run(og, n, kc, weight + g * og * kc, kc, col,
                                                          n, ybuf, 1, n, 1.0f, blocking);
      for (std::int64_t b = 0; b < p.batch; ++b) {
        for (std::int64_t o = 0; o < og; ++o) {
          float* row = out.channel(b, g * og + o);
          const float* src = ybuf + o * n + b * tn;
          const float b0 = bias != nullptr ? bias[g * og + o] : 0.0f;
          for (std::int64_t t = 0; t < tn; ++t) row[t] = bias != nullptr ? src[t] + b0 : src[t];
        }
      }
    }
    return;
  }
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      for (std::int64_t t0 = 0; t0 < p.out_frames; t0 += plan.block) {
        const std::int64_t tn = std::min(plan.block, p.out_frames - t0);
        for (std::int64_t c = 0; c < cg; ++c) {
          const float* xr = x.channel(b, g * cg + c);
          for (std::int64_t k = 0; k < p.kernel_size; ++k) {
            float* dst = col + (c * p.kernel_size + k) * tn;
            const std::int64_t offset = t0 * p.stride + k * p.dilation - p.pad_left;
            const Range r = valid_outputs(offset, p.stride, x.frames(), 0, tn);
            std::fill(dst, dst + r.begin, 0.0f);
            for (std::int64_t j = r.begin; j < r.end; ++j) dst[j] = xr[j * p.stride + offset];
            std::fill(dst + r.end, dst + tn, 0.0f);
          }
        }
        float* y = out.channel(b, g * og) + t0;
        for (std::int64_t o = 0; o < og; ++o) {
          std::fill(y + o * out.channel_stride(), y + o * out.channel_stride() + tn, 0.0f);
        }
        RowMajorGemm<Eigen::RowMajor, Eigen::RowMajor>::run(og, tn, kc, weight + g * og * kc, kc,
                                                            col, tn, y, 1, out.channel_stride(),
                                                            1.0f, blocking);
        if (bias != nullptr) {
          for (std::int64_t o = 0; o < og; ++o) {
            float* row = y + o * out.channel_stride();
            const float b0 = bias[g * og + o];
            for (std::int64_t t = 0; t < tn; ++t) row[t] += b0;
          }
        }
      }
    }
  }
}

std::int64_t conv_transpose1d_workspace_floats(const ConvTranspose1dParams& p) {
  const TransposeWorkspacePlan plan = plan_transpose_workspace(p);
  return plan.col_floats + plan.gemm.a_floats + plan.gemm.b_floats + plan.x_floats;
}

void conv_transpose1d_workspace(const ConvTranspose1dParams& p, TensorView<const float> x,
                                const float* weight, const float* bias, TensorView<float> out,
                                float* workspace) noexcept {
  const TransposeWorkspacePlan plan = plan_transpose_workspace(p);
  if (plan.direct) {
    for (std::int64_t b = 0; b < p.batch; ++b) {
      for (std::int64_t o = 0; o < p.out_channels; ++o) {
        conv_transpose1d_direct_row(p, x, weight, bias, b, o, 0, p.out_frames, out.channel(b, o));
      }
    }
    return;
  }
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t ok = og * p.kernel_size;
  float* col = workspace;
  WorkspaceBlocking blocking(plan.gemm.kc, plan.gemm.mc, plan.gemm.nc, col + plan.col_floats,
                             col + plan.col_floats + plan.gemm.a_floats);
  const std::int64_t f_lo =
      std::max<std::int64_t>(0, ceil_div(p.padding - p.dilation * (p.kernel_size - 1), p.stride));
  const std::int64_t f_hi =
      std::min(x.frames(), floor_div(p.out_frames - 1 + p.padding, p.stride) + 1);
  if (p.batch > 1 && p.out_frames <= plan.block && f_lo < f_hi && ok * cg >= kFoldWeightFloats &&
      p.batch * (f_hi - f_lo) <= plan.max_inputs) {
    // As in conv1d_workspace: a streaming chunk for several signals as one GEMM, the inputs of
    // the batch packed side by side, then each signal's columns added into place.
    const std::int64_t ni = f_hi - f_lo;
    const std::int64_t n = p.batch * ni;
    float* xp = col + plan.col_floats + plan.gemm.a_floats + plan.gemm.b_floats;
    for (std::int64_t g = 0; g < p.groups; ++g) {
      for (std::int64_t c = 0; c < cg; ++c) {
        for (std::int64_t b = 0; b < p.batch; ++b) {
          std::memcpy(xp + c * n + b * ni, x.channel(b, g * cg + c) + f_lo,
                      static_cast<std::size_t>(ni) * sizeof(float));
        }
      }
      std::fill(col, col + ok * n, 0.0f);
      RowMajorGemm<Eigen::ColMajor, Eigen::RowMajor>::run(ok, n, cg, weight + g * cg * ok, ok, xp,
                                                          n, col, 1, n, 1.0f, blocking);
      for (std::int64_t b = 0; b < p.batch; ++b) {
        for (std::int64_t o = 0; o < og; ++o) {
          float* y = out.channel(b, g * og + o);
          fill_bias(y, p.out_frames, bias, g * og + o);
          for (std::int64_t k = 0; k < p.kernel_size; ++k) {
            const float* cr = col + (o * p.kernel_size + k) * n + b * ni;
            const std::int64_t shift = k * p.dilation - p.padding;
            const std::int64_t i0 = std::max(f_lo, ceil_div(-shift, p.stride));
            const std::int64_t i1 =
                std::min(f_hi, floor_div(p.out_frames - 1 - shift, p.stride) + 1);
            for (std::int64_t i = i0; i < i1; ++i) y[i * p.stride + shift] += cr[i - f_lo];
          }
        }
      }
    }
    return;
  }
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      for (std::int64_t t0 = 0; t0 < p.out_frames; t0 += plan.block) {
        const std::int64_t t1 = std::min(p.out_frames, t0 + plan.block);
        for (std::int64_t o = 0; o < og; ++o) {
          fill_bias(out.channel(b, g * og + o) + t0, t1 - t0, bias, g * og + o);
        }
        const std::int64_t i_lo = std::max<std::int64_t>(
            0, ceil_div(t0 + p.padding - p.dilation * (p.kernel_size - 1), p.stride));
        const std::int64_t i_hi = std::min(x.frames(), floor_div(t1 - 1 + p.padding, p.stride) + 1);
        if (i_lo >= i_hi) continue;
        const std::int64_t ni = i_hi - i_lo;
        transpose_columns(weight + g * cg * ok, ok, cg, x.channel(b, g * cg) + i_lo,
                          x.channel_stride(), ni, col, blocking);
        for (std::int64_t o = 0; o < og; ++o) {
          float* y = out.channel(b, g * og + o);
          for (std::int64_t k = 0; k < p.kernel_size; ++k) {
            const float* cr = col + (o * p.kernel_size + k) * ni;
            const std::int64_t shift = k * p.dilation - p.padding;
            const std::int64_t i0 = std::max(i_lo, ceil_div(t0 - shift, p.stride));
            const std::int64_t i1 = std::min(i_hi, floor_div(t1 - 1 - shift, p.stride) + 1);
            if (p.stride == 1) {
              for (std::int64_t i = i0; i < i1; ++i) y[i + shift] += cr[i - i_lo];
            } else {
              for (std::int64_t i = i0; i < i1; ++i) y[i * p.stride + shift] += cr[i - i_lo];
            }
          }
        }
      }
    }
  }
}

void set_eigen_malloc_allowed(bool allowed) {
  Eigen::internal::set_is_malloc_allowed(allowed);
  eigen_check::g_strict.store(!allowed, std::memory_order_relaxed);
}

std::int64_t eigen_malloc_violations() {
  return eigen_check::g_violations.load(std::memory_order_relaxed);
}

void eigen_heap_probe() {
  Eigen::MatrixXf m(64, 64);  // heap-allocated by Eigen, in this translation unit
  m.setZero();
}

}  // namespace convbank::detail::cpu
