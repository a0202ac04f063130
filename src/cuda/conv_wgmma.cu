// Conv1d as an implicit GEMM on Hopper tensor cores (wgmma, sm_90a) at fp32 accuracy through
// split precision (3xTF32): every operand x = big + small with big = tf32(x) and small =
// tf32(x - big); small*big + big*small + big*big in the tensor cores (the dropped small*small
// is 2^-22 of a product).
//
// Two kernels. The register-fragment kernel, described here, runs strided Conv1d, K = 1 and the
// phase convolutions of strided ConvTranspose1d where depth-to-space (at the end of this file)
// does not apply; the stride-1 convolutions, depth-to-space included, run on the
// shared-memory-operand kernel further below (the section "both operands in shared memory").
//
// GEMM per (batch, group): rows = output frames (M), columns = output channels (N), reduction
// = (tap, input channel). One warpgroup per block computes 128 frames x 64 channels as two
// m64n64k8 wgmma tiles.
//   A (activations) lives in registers: each thread reads its fragment straight from the
//     block's input slab in shared memory at (channel, frame * stride + tap * dilation), so the
//     per-tap shift costs nothing and no im2col exists anywhere; it is split into big/small
//     there.
//   B (weights) must come from shared memory, K-major. A small kernel splits the weights once
//     per call into big and small planes in the canonical no-swizzle core-matrix layout (8
//     columns x 4 reduction values = 128 contiguous bytes; LBO 128 B along the reduction, SBO
//     256 B along the columns), one contiguous block per (column tile, chunk of 8 or 16 input
//     channels x all taps), into a stream-ordered workspace of about twice the weights. The
//     main kernel copies each block to shared memory with 16-byte cp.async.
//   A ring of kWgRing slots keeps kWgAhead chunks of copies in flight ahead of the chunk
//     computed; each 8-deep reduction step issues 6 wgmmas and retires them before the next.
//
// Accuracy: wgmma accumulates with truncation, so one long accumulation drifts (1.2e-6 on a
// 512-deep reduction). Each chunk accumulates from zero in the tensor cores and is then added
// to fp32 registers with round-to-nearest; the drift then no longer grows with the reduction.
//
// ConvTranspose1d at stride 1 is the same convolution with w'[co][ci][k] = w[ci][co][K-1-k]
// and the input shifted by padding - dilation * (K-1): done by the weight split's index map. At
// stride s (dilation 1, K a multiple of s) it is s phase convolutions of K / s taps, phase p
// with w'[co][ci][k] = w[ci][co][p + (K/s-1-k) s], writing every s-th output: one launch, the
// phase the fastest-varying block index, so that blocks filling the same output lines run
// together.
//
// Non-finite values: the split turns Inf into Inf + NaN (Inf - Inf), and Inf times a zero
// small part into NaN, so the classes would differ from PyTorch's. An input NaN/Inf (or a
// finite value whose tf32 rounding overflows) makes every output whose window holds it NaN, so
// a block with a non-finite stored output, or any block when the weight split flagged a
// non-finite weight, recomputes its outputs with the direct fp32 formula, which gives
// PyTorch's classes exactly. Finite data pays one compare per output.
#include <cuda.h>  // CUtensorMap (the tensor map itself comes from the driver at run time)
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/dispatch.hpp"
#include "cuda/tma.cuh"
#include "cuda/wgmma.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kWgThreads = 128;  // one warpgroup
constexpr int kWgRows = 128;     // output frames per block (two m64 wgmma tiles)
constexpr int kWgCols = 64;      // output channels per block (m64n64k8 wgmma tiles)
constexpr int kWgAhead = 3;      // chunks whose copies are in flight ahead of the one computed
constexpr int kWgRing = kWgAhead + 1;
constexpr int kWgMaxTaps = 8;
// The SS kernel's windows per tap (WgArgs::window) take any dilation up to this.
constexpr int kSsMaxDilation = 1 << 16;
// The SS kernel takes up to this many taps where its stages fit (13 do on 64-row tiles with
// three stages, 16 with two).
constexpr int kSsMaxTaps = 16;
// Reduction steps (8 deep) the tensor cores accumulate before the fp32 running sum: a chunk of
// more than 8 taps (8 channels each) is summed every 8 steps. The tensor cores add with
// truncation, so the error grows with the depth of one accumulation: 96 and 128 deep measured
// up to 1.07e-6 on all-positive data where 64 stay at 4.2e-7 (log step 77).
constexpr int kSsSumSteps = 8;

struct WgArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t groups, bg_count;
  int cin_g, cout_g, taps, stride, dilation;
  std::int64_t in_frames, out_frames;
  std::int64_t in_offset;  // input frame of output 0, tap 0
  // Weight (group g, out co, in ci, tap k) at w[g*w_gs + co*w_co + ci*w_ci + k'], k' = k for
  // Conv1d and phase + (taps-1-k) * phases for ConvTranspose1d (w_co = K there, w_ci = K for
  // Conv1d).
  std::int64_t w_gs, w_co, w_ci;
  bool transposed;
  float* planes;  // split weights: [group][phase][column tile][chunk][big, small][plane]
  // SS kernel, 3xFP16 (see "products in fp16 pairs" below): the launch may take it (the tap
  // groups' launches do not), and the planes' per-row scales 2^r and 2^-r, [group][row].
  bool half_ok;
  const float* row_scale;
  const float* row_inv;
  int cols;      // columns (output channels) per tile and plane
  int ci_chunk;  // input channels per chunk (8 or 16; 8 to 32 in the SS kernel)
  int rt;        // reduction rows per chunk: taps * ci_chunk
  int nchunks;
  int span, pitch;  // input frames a block reads per channel (+3 for alignment); pitch
  std::uint32_t span_div, quads_div;  // ceil(2^32 / span), ceil(2^32 / (span / 4)): i / span
                                      // = __umulhi(i, span_div) for the indices used here
  bool x_vec;                         // input rows 16-byte aligned: 16-byte copies
  bool y_vec2;                        // output rows 8-byte aligned: 8-byte stores of two frames
  // SS kernel, 3xFP16: the split takes the scale its chunk had last time and checks it against
  // the maximum it finds on the way, splitting again only where that scale no longer fits
  // (CONVBANK_CUDA_SS_MAX_GUESS=0: every job finds its maximum first, two passes; A/B runs).
  bool max_guess;
  // SS kernel, 3xFP16, one-tap layers on 128 x 128 tiles whose jobs copy exactly the tile's 128
  // frames (span 128): producer warp w splits frames 32 w .. 32 w + 31 of every channel group,
  // which are the consumers' columns 32 w .. 32 w + 31, so each warp scales its own columns by
  // its own maximum and the producer exchanges no maximum (no barrier); the consumers take four
  // scales per job. CONVBANK_CUDA_SS_WARP_SCALE=0 turns it off (A/B runs).
  bool warp_scale;
  // SS kernel: the two consumers take turns at issuing their wgmmas (the kernel's turn
  // barriers), where ss_turns() says so.
  bool turns;
  // SS kernel: the copied input's row pitch and ceil(2^32 / (raw_pitch / 4)). Without x_vec
  // (rows of odd length start anywhere) each row is copied in 16-byte pieces from the aligned
  // address at or below its first frame, e frames early (e < 4, per row), and read e frames on:
  // raw_pitch = span + 4 (span with x_vec).
  int raw_pitch;
  std::uint32_t raw_quads_div;
  // SS kernel: the input of a job as bulk tensor copies (TMA) from the kernel's tensor map
  // instead of the producer's 16-byte pieces. kTmaRows: rows 16-byte aligned (x_vec), one copy
  // of the chunk's rows, (frame, channel, group, batch), zeros past every edge. kTmaQuads: rows
  // of any length (odd frame counts), four channels as one 16-byte aligned "quad row" of 4 x_cs
  // frames; four copies per job, channels u, u + 4, ... of the chunk at raw + u * quad_stride;
  // interior jobs only (past a row's end lies the next channel), the others copy pieces.
  // x_parts > 1: a copy wider than the copy engine's 256 elements per dimension goes as
  // x_parts parts of raw_pitch / x_parts frames (a 5-d map, see set_input_map), interior jobs
  // only.
  int x_tma;
  int x_parts;
  // Input frames from a job's first copied frame (slab0) to the end of its copy: an interior
  // job's copy in parts must end inside the row.
  int x_extent;
  // SS kernel, dilated layers whose taps lie far apart (window > 0): each tap's window of
  // `window` frames is copied on its own, the windows back to back (span = taps x window), so
  // that a block copies and splits taps x window frames per channel instead of the frames
  // between the taps too. Window k starts at the 16-byte boundary at or below the tap's frame,
  // (k x dilation) & ~3 frames after the first. The consumers find tap k at k x tap_pitch +
  // ((k x tap_lead) & 3) frames: tap_pitch = dilation and tap_lead = 0 without windows,
  // tap_pitch = window and tap_lead = dilation with them.
  int window, tap_pitch, tap_lead;
  std::uint32_t window_quads_div;  // ceil(2^32 / (window / 4))
  int quad_stride;
  int raw_plane;  // floats per copy buffer: ci_chunk * raw_pitch, or 4 * quad_stride
  std::int64_t t_tiles;
  int n_tiles;
  // SS kernel: where its work items (bg_count x t_tiles x n_tiles) number below 2^32, it finds
  // an item's tile with 32-bit divisions by multiply-high (div_u32) by these, each
  // floor((2^32 - 1) / divisor) (tiles = t_tiles x n_tiles, groups, n_tiles); 64-bit divisions
  // otherwise (items32 false). A 64-bit division is about 40 instructions, and each block finds
  // every tile of its run twice (producer and consumers).
  bool items32;
  std::uint32_t tiles_magic, groups_magic, n_tiles_magic;
  // ConvTranspose1d at stride s > 1 runs as s phase convolutions (phases = s, dilation 1,
  // taps = K / s): phase p computes outputs t = (q0 + u) * s + p - pad, u = 0, 1, ..., from
  // x[q0 + u - m] and w[.][.][p + m * s]. phases = 1 everywhere else.
  int phases;
  std::int64_t pad;
  // Depth-to-space (SS kernel only): a ConvTranspose1d of stride d2s > 1 as ONE stride-1
  // convolution whose output channel co' = co * d2s + p is phase p of channel co (cout_g counts
  // co'). Its tap m reads w[.][co][p + (taps - 1 - m) * d2s] (zero from d2s_k = K on), and its
  // output frame f is frame (d2s_q0 + f) * d2s + p - pad of y, which has y_frames. d2s = 1: none.
  int d2s, d2s_k;
  std::int64_t d2s_q0, y_frames;
};

// Where phase p of a call reads and writes: input frame of its output 0 and tap 0, output frame
// of its output u = y0 + u * phases, and its output count.
struct PhaseView {
  std::int64_t in_offset, y0, frames;
};
__host__ __device__ __forceinline__ PhaseView phase_view(const WgArgs& a, int p) {
  if (a.phases == 1) return {a.in_offset, 0, a.out_frames};
  const std::int64_t s = a.phases;
  const std::int64_t q0 = (a.pad - p + s - 1) / s;  // first block with an output at t >= 0
  const std::int64_t y0 = q0 * s + p - a.pad;
  const std::int64_t frames = a.out_frames > y0 ? (a.out_frames - y0 + s - 1) / s : 0;
  return {q0 - (a.taps - 1), y0, frames};
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// d (+)= a * b; kScaleD = 0 overwrites d (the first product of a chunk).
template <int kScaleD = 1>
__device__ __forceinline__ void wgmma_tf32(float (&d)[32], const std::uint32_t (&a)[4],
                                           std::uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" CONVBANK_WGMMA_D32
               "}, {%32, %33, %34, %35}, %36, %37, 1, 1;\n"
               : CONVBANK_WGMMA_D32_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kScaleD));
}

// 3xFP16: x = hi + lo 2^-11 with hi = fp16(x) and lo = fp16((x - hi) 2^11) carries the 22
// significant bits of the tf32 pair, and Hopper's fp16 wgmma does twice the tf32 rate (k16 per
// instruction in the same time as tf32's k8) reading the same bytes per instruction: the three
// products cost the tensor time and shared-memory reads of 1.5 tf32 ones. fp16's range (2^-14
// to 65504 at full precision) asks for scales: the weights are scaled per row (2^r brings the
// row's largest |w| into [8, 16), so that 2^11 hi stays below 2^15), the input per job (2^e
// brings the job's largest |x| into [2^14, 2^15)); both are powers of two (exact), undone in
// fp32 (the job's in the running sum, the row's in the epilogue). A value far below its row's
// or job's largest loses bits it could not have added to the sum anyway: relative to that
// largest value the representation error is below 2^-40. Non-finite values give NaN rests, so
// the kernel's non-finite fallback runs as for 3xTF32. The exponent that scales the largest
// magnitude (bits of |v|) into [2^top, 2^(top + 1)), kept to +-100 so that the scales and their
// inverses (with 2^-11) stay normal floats.
__device__ __forceinline__ int pow2_scale_exponent(std::uint32_t max_bits, int top) {
  const int e = top + 127 - static_cast<int>(max_bits >> 23);
  return e < -100 ? -100 : e > 100 ? 100 : e;
}
__device__ __forceinline__ float exp2_int(int e) {
  return __uint_as_float(static_cast<std::uint32_t>(127 + e) << 23);
}
// Two values (already scaled) as hi and lo fp16 pairs, packed.
__device__ __forceinline__ void split_f16x2(float x0, float x1, std::uint32_t& hi,
                                            std::uint32_t& lo) {
  const __half2 h = __floats2half2_rn(x0, x1);
  const float2 f = __half22float2(h);
  const __half2 l = __floats2half2_rn((x0 - f.x) * 2048.0f, (x1 - f.y) * 2048.0f);
  hi = *reinterpret_cast<const std::uint32_t*>(&h);
  lo = *reinterpret_cast<const std::uint32_t*>(&l);
}

// f(std::integral_constant<int, v>{}) when First <= v <= Last, else f(std::integral_constant<int,
// 0>{}) (the runtime-count fallback): a loop unrolled for each count the caller expects.
template <int First, int Last, typename F>
__device__ __forceinline__ void with_constant(int v, F&& f) {
  if constexpr (First > Last) {
    f(std::integral_constant<int, 0>{});
  } else if (v == First) {
    f(std::integral_constant<int, First>{});
  } else {
    with_constant<First + 1, Last>(v, f);
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// Frames pos .. pos + 3 of an input row into d with 4-byte copies: the quad straddles the
// row's start or end, and frames outside it read as zeros.
__device__ __forceinline__ void copy_quad_edge(const WgArgs& a, float* d, const float* row,
                                               std::int64_t pos) {
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const bool in = pos + u >= 0 && pos + u < a.in_frames;
    cp_async4(smem_addr(d + u), in ? row + pos + u : a.x, in);
  }
}

// The input frame, from the copy's first, of copied frame 4 q: the same, or with windows per
// tap (WgArgs::window) frame 4 q - k window of tap k's window, which starts (k x dilation) & ~3
// frames on (16-byte aligned like the first).
__device__ __forceinline__ int copied_frame(const WgArgs& a, int q) {
  if (a.window == 0) return 4 * q;
  const int k = static_cast<int>(__umulhi(static_cast<unsigned>(q), a.window_quads_div));
  return ((k * a.dilation) & ~3) + 4 * q - k * a.window;
}

// Copies input rows 0 .. rows - 1 of a channel chunk (xc: its first row) at frames slab0 ..
// slab0 + a.span - 1 (or a window per tap) into dst[r * pitch + j]; positions outside the input
// and rows rows .. a.ci_chunk - 1 read as zeros. 16-byte copies when a.x_vec (slab0 is then a
// multiple of 4). kWindows: the SS kernel's copies, which may be windowed (the register-fragment
// kernel's never are).
template <bool kWindows = false>
__device__ __forceinline__ void copy_slab(const WgArgs& a, float* dst, int pitch, const float* xc,
                                          int rows, std::int64_t slab0, int tid, int nthreads) {
  if (a.x_vec) {
    const int quads = a.span >> 2;  // span is a multiple of 4
    for (int i = tid; i < a.ci_chunk * quads; i += nthreads) {
      const int r = static_cast<int>(__umulhi(i, a.quads_div)), j = i - r * quads;
      const std::int64_t pos = slab0 + (kWindows ? copied_frame(a, j) : 4 * j);
      const float* row = xc + r * a.x_cs;
      float* d = dst + r * pitch + 4 * j;
      if (r >= rows || (pos >= 0 && pos + 4 <= a.in_frames)) {
        cp_async16(smem_addr(d), r < rows ? row + pos : a.x, r < rows);
      } else {
        copy_quad_edge(a, d, row, pos);
      }
    }
  } else {
    for (int i = tid; i < a.ci_chunk * a.span; i += nthreads) {
      const int r = static_cast<int>(__umulhi(i, a.span_div)), j = i - r * a.span;
      const std::int64_t pos = slab0 + j;
      const bool in = r < rows && pos >= 0 && pos < a.in_frames;
      cp_async4(smem_addr(dst + r * pitch + j), in ? xc + r * a.x_cs + pos : a.x, in);
    }
  }
}

// Input frame e (< 4) of a row whose frame slab0 is at p: the row's copy starts at the 16-byte
// aligned address at or below p.
__device__ __forceinline__ int row_lead(const float* p) {
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(p) >> 2) & 3);
}

// The SS kernel's copy: input rows 0 .. rows - 1 of a channel chunk (xc: its first row) at
// frames slab0 - e .. slab0 - e + a.raw_pitch - 1 (e = row_lead of the row's frame slab0; or a
// window per tap, each from e frames early) into dst[r * a.raw_pitch + j], in 16-byte pieces
// whatever the rows' alignment; positions outside the input and rows rows .. a.ci_chunk - 1
// read as zeros.
__device__ __forceinline__ void copy_slab_rows(const WgArgs& a, float* dst, const float* xc,
                                               int rows, std::int64_t slab0, int tid,
                                               int nthreads) {
  const int quads = a.raw_pitch >> 2;
  for (int i = tid; i < a.ci_chunk * quads; i += nthreads) {
    const int r = static_cast<int>(__umulhi(i, a.raw_quads_div)), j = i - r * quads;
    float* d = dst + r * a.raw_pitch + 4 * j;
    if (r >= rows) {
      cp_async16(smem_addr(d), a.x, false);
      continue;
    }
    const float* row = xc + r * a.x_cs;
    const std::int64_t pos = slab0 - row_lead(row + slab0) + copied_frame(a, j);
    if (pos >= 0 && pos + 4 <= a.in_frames) {
      cp_async16(smem_addr(d), row + pos, true);
    } else {
      copy_quad_edge(a, d, row, pos);
    }
  }
}

// Weight (tap, input channel ci) of GEMM column or row co of group g, phase ph, through the
// layer's index map (WgArgs::w_*, transposed, d2s); zero past the channel counts.
__device__ __forceinline__ float plane_weight(const WgArgs& a, std::int64_t g, int ph, int co,
                                              int ci, int tap) {
  if (ci >= a.cin_g || co >= a.cout_g) return 0.0f;
  if (a.d2s > 1) {
    const int cw = co / a.d2s, k = co - cw * a.d2s + (a.taps - 1 - tap) * a.d2s;
    return k < a.d2s_k ? a.w[g * a.w_gs + cw * a.w_co + ci * a.w_ci + k] : 0.0f;
  }
  const int k = a.transposed ? ph + (a.taps - 1 - tap) * a.phases : tap;
  return a.w[g * a.w_gs + co * a.w_co + ci * a.w_ci + k];
}

// Splits the weights into the planes the main kernel copies: one thread per plane element.
// Elements past the channel counts are zero. Sets *nonfinite when a split is not exact.
__global__ void wgmma_split_weights_kernel(WgArgs a, int* nonfinite) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int plane = a.cols * a.rt;
  const std::int64_t total = a.groups * a.phases * a.n_tiles * a.nchunks * std::int64_t{plane};
  bool ok = true;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const int n = static_cast<int>(e % a.cols);
    const int r = static_cast<int>(e / a.cols % a.rt);
    const std::int64_t block = e / plane;  // (group, phase, column tile, chunk)
    const int c = static_cast<int>(block % a.nchunks);
    const int nt = static_cast<int>(block / a.nchunks % a.n_tiles);
    const int ph = static_cast<int>(block / a.nchunks / a.n_tiles % a.phases);
    const std::int64_t g = block / a.nchunks / a.n_tiles / a.phases;
    const float v =
        plane_weight(a, g, ph, nt * a.cols + n, c * a.ci_chunk + r % a.ci_chunk, r / a.ci_chunk);
    std::uint32_t hi, lo;
    ok &= split_tf32(v, hi, lo);
    float* big = a.planes + block * 2 * plane;
    big[plane_offset(r, n, a.cols)] = __uint_as_float(hi);
    big[plane + plane_offset(r, n, a.cols)] = __uint_as_float(lo);
  }
  if (!ok) atomicOr(nonfinite, 1);
#endif
}

// 3xFP16: the per-row weight scales (see pow2_scale_exponent), one warp per GEMM row of a group
// (the SS kernel has one phase), [group][row] into scale and inv.
__global__ void wgmma_weight_scales_kernel(WgArgs a, float* scale, float* inv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= a.groups * a.cout_g) return;
  const std::int64_t g = row / a.cout_g;
  const int co = static_cast<int>(row - g * a.cout_g);
  std::uint32_t m = 0;
  for (int e = lane; e < a.cin_g * a.taps; e += 32) {
    m = max(m, __float_as_uint(plane_weight(a, g, 0, co, e / a.taps, e % a.taps)) & 0x7fffffffu);
  }
  m = __reduce_max_sync(0xffffffffu, m);
  if (lane == 0) {
    const int r = pow2_scale_exponent(m, 3);
    scale[row] = exp2_int(r);
    inv[row] = exp2_int(-r);
  }
#endif
}

// 3xFP16: the planes [group][column tile][chunk][2^11 hi, hi, lo][plane] of halves in
// half_plane_offset's layout, the weights scaled by their row's 2^r first. Sets *nonfinite for
// a non-finite weight.
__global__ void wgmma_split_weights_half_kernel(WgArgs a, int* nonfinite) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int plane = a.cols * a.rt;
  const std::int64_t total = a.groups * a.n_tiles * a.nchunks * std::int64_t{plane};
  bool ok = true;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const int n = static_cast<int>(e % a.cols);
    const int r = static_cast<int>(e / a.cols % a.rt);
    const std::int64_t block = e / plane;  // (group, column tile, chunk)
    const int c = static_cast<int>(block % a.nchunks);
    const int nt = static_cast<int>(block / a.nchunks % a.n_tiles);
    const std::int64_t g = block / a.nchunks / a.n_tiles;
    const int co = nt * a.cols + n;
    const float v = plane_weight(a, g, 0, co, c * a.ci_chunk + r % a.ci_chunk, r / a.ci_chunk);
    ok &= fabsf(v) < INFINITY;
    const float x = co < a.cout_g ? v * a.row_scale[g * a.cout_g + co] : 0.0f;
    const __half hi = __float2half_rn(x);
    const __half lo = __float2half_rn((x - __half2float(hi)) * 2048.0f);
    __half* p = reinterpret_cast<__half*>(a.planes) + block * 3 * plane;
    const int o = half_plane_offset(r, n, a.cols);
    p[o] = __float2half_rn(__half2float(hi) * 2048.0f);  // exact: a power of two, below 2^16
    p[plane + o] = hi;
    p[2 * plane + o] = lo;
  }
  if (!ok) atomicOr(nonfinite, 1);
#endif
}

// The direct fp32 formula for the outputs (channel co0 + col, frame t0 + row), col < cols,
// row < rows, of batch b, group g, phase ph (start: input frame of output t0, tap 0): PyTorch's
// NaN/Inf classes, where the split products would turn Inf into NaN. kD2s: the channels and
// frames are those of the depth-to-space convolution (WgArgs::d2s).
template <bool kTransposed, bool kPhased, bool kD2s = false>
__device__ void direct_outputs(const WgArgs& a, std::int64_t b, std::int64_t g, int ph,
                               const PhaseView& pv, std::int64_t start, int co0, int cols,
                               std::int64_t t0, int rows, int tid, int nthreads) {
  const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
  const float* wg = a.w + g * a.w_gs;
  const int K = a.taps;
  const int y_cout_g = kD2s ? a.cout_g / a.d2s : a.cout_g;
  for (int e = tid; e < rows * cols; e += nthreads) {
    const int row = e % rows, col = e / rows;
    int co = co0 + col;
    const std::int64_t t = t0 + row;
    if (co >= a.cout_g || t >= pv.frames) continue;
    std::int64_t out = kPhased ? pv.y0 + t * a.phases : t;
    if constexpr (kD2s) {
      ph = co % a.d2s;
      co /= a.d2s;
      out = (a.d2s_q0 + t) * a.d2s + ph - a.pad;
      if (out < 0 || out >= a.y_frames) continue;
    }
    float s = 0.0f;
    for (int ci = 0; ci < a.cin_g; ++ci) {
      const float* xr = xg + ci * a.x_cs;
      for (int k = 0; k < K; ++k) {
        const std::int64_t pos = start + row * a.stride + k * a.dilation;
        const float xv = (pos >= 0 && pos < a.in_frames) ? __ldg(xr + pos) : 0.0f;
        float wv;
        if constexpr (kD2s) {
          const int kw = ph + (K - 1 - k) * a.d2s;
          wv = kw < a.d2s_k ? __ldg(wg + ci * a.w_ci + co * a.w_co + kw) : 0.0f;
        } else {
          wv = kTransposed ? __ldg(wg + ci * a.w_ci +
                                   (kPhased ? co * a.w_co + ph + (K - 1 - k) * a.phases
                                            : co * K + (K - 1 - k)))
                           : __ldg(wg + co * a.w_co + ci * K + k);
        }
        s = fmaf(xv, wv, s);
      }
    }
    if (a.bias != nullptr) s += __ldg(a.bias + g * y_cout_g + co);
    a.y[b * a.y_bs + (g * y_cout_g + co) * a.y_cs + out] = s;
  }
}

// kPhased: a strided ConvTranspose1d's phase convolutions (a.phases > 1); a template flag so
// that the other kernels' code is untouched by the phase arithmetic.
template <bool kTransposed, bool kPhased, int kMinBlocks>
__global__ void __launch_bounds__(kWgThreads, kMinBlocks)
    conv1d_wgmma_3xtf32_kernel(WgArgs a, const int* weights_nonfinite) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kN = kWgCols;
  extern __shared__ __align__(128) float smem[];
  const int plane = kN * a.rt;  // floats per weight plane
  const int xslot = a.ci_chunk * a.pitch;
  const int slot = 2 * plane + xslot;  // [big, small][plane], then [ci_chunk][pitch]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int steps = a.rt >> 3;            // 8-deep reduction steps per chunk
  const int tap_steps = a.ci_chunk >> 3;  // steps per tap
  const bool w_ok = *weights_nonfinite == 0;
  // This thread's A fragment (m64nNk8 tf32 layout): rows g and g + 8 of the warp's 16,
  // reduction columns q and q + 4.
  const int frag_row = warp * 16 + (lane >> 2);
  const int q = lane & 3;
  int a_off[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a_off[i] = (q + (i >> 1) * 4) * a.pitch + (frag_row + (i & 1) * 8) * a.stride;
  }
  const int m_off = 64 * a.stride;
  const std::int64_t tiles = a.t_tiles * a.n_tiles * (kPhased ? a.phases : 1);
  const int plane_quads = plane / 2;  // 16-byte pieces of the two planes

  for (std::int64_t bg = blockIdx.z; bg < a.bg_count; bg += gridDim.z) {
    const std::int64_t b = bg / a.groups, g = bg % a.groups;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    // The phases, then the column tiles of one frame tile are neighbours in the grid: they
    // share the input slab through L2, and the phases fill each other's output lines there.
    for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int ph = kPhased ? static_cast<int>(tile % a.phases) : 0;
      const std::int64_t rest = kPhased ? tile / a.phases : tile;
      const int nt = static_cast<int>(rest % a.n_tiles);
      const int co0 = nt * kN;
      const std::int64_t t0 = rest / a.n_tiles * kWgRows;
      const PhaseView pv = kPhased ? phase_view(a, ph) : PhaseView{a.in_offset, 0, a.out_frames};
      const std::int64_t start = (kPhased ? pv.in_offset : a.in_offset) + t0 * a.stride;
      // With 16-byte copies the slab starts at the 4-frame boundary at or before `start`.
      const std::int64_t slab0 = a.x_vec ? (start & ~std::int64_t{3}) : start;
      const int shift = static_cast<int>(start - slab0);
      const float* wplanes =
          a.planes + (((kPhased ? g * a.phases + ph : g) * a.n_tiles + nt) * a.nchunks) *
                         std::int64_t{2 * plane};

      // Chunk c's planes and input slab into ring slot c % kWgRing, one commit group (empty
      // past the last chunk, so that wait_group counts stay uniform).
      auto load_chunk = [&](int c) {
        if (c < a.nchunks) {
          float* dst = smem + (c % kWgRing) * slot;
          const float* src = wplanes + c * std::int64_t{2 * plane};
          for (int i = tid; i < plane_quads; i += kWgThreads)
            cp_async16(smem_addr(dst + 4 * i), src + 4 * i, true);
          const int ci0 = c * a.ci_chunk;
          copy_slab(a, dst + 2 * plane, a.pitch, xg + ci0 * a.x_cs, min(a.ci_chunk, a.cin_g - ci0),
                    slab0, tid, kWgThreads);
        }
        cp_async_commit();
      };

      // The tensor cores accumulate one chunk from zero (acc); fp32 registers keep the sum.
      float acc[2][kN / 2], sum[2][kN / 2];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int i = 0; i < kN / 2; ++i) sum[m][i] = 0.0f;
      }
      bool ok = w_ok;
#pragma unroll 1
      for (int c = 0; c < kWgAhead; ++c) load_chunk(c);

      for (int c = 0; c < a.nchunks; ++c) {
        // Slot c landed when at most kWgAhead - 1 newer groups are pending; the fence makes the
        // copied planes visible to wgmma (async proxy) once everyone is past the barrier.
        cp_async_wait<kWgAhead - 1>();
        fence_proxy_async();
        __syncthreads();
        const float* base = smem + (c % kWgRing) * slot;
        const float* xst = base + 2 * plane + shift;
        const std::uint32_t big_addr = smem_addr(base);
        const std::uint32_t small_addr = big_addr + plane * 4;
        // One 8-deep reduction step per wgmma group: fragment loads and splits, six wgmmas,
        // then wait for them. The wait retires the group before anything else runs: wgmma reads
        // its A registers asynchronously and the compiler does not know it, so the fragment is
        // pinned (an empty asm that "modifies" it) after the wait and its registers are not
        // reused earlier. The chunk's first product overwrites acc (scale-d 0) instead of a
        // zeroing pass.
        auto step = [&](auto first, int st) {
          const int tap = st / tap_steps;
          const int x0 = (st - tap * tap_steps) * 8 * a.pitch + tap * a.dilation;
          std::uint32_t hi[2][4], lo[2][4];
#pragma unroll
          for (int m = 0; m < 2; ++m) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
              split_tf32(xst[x0 + m * m_off + a_off[i]], hi[m][i], lo[m][i]);
          }
          const std::uint32_t step_bytes = st * (kN / 8) * 256;
          const std::uint64_t db = b_desc(big_addr + step_bytes);
          const std::uint64_t ds = b_desc(small_addr + step_bytes);
          wgmma_fence();
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            wgmma_tf32<decltype(first)::value ? 0 : 1>(acc[m], lo[m], db);
            wgmma_tf32(acc[m], hi[m], ds);
            wgmma_tf32(acc[m], hi[m], db);
          }
          wgmma_commit();
          wgmma_wait<0>();
          pin_operands(hi, lo);
        };
        step(std::true_type{}, 0);
        for (int st = 1; st < steps; ++st) step(std::false_type{}, st);
        fence_operands(acc[0]);
        fence_operands(acc[1]);
#pragma unroll
        for (int m = 0; m < 2; ++m) {
#pragma unroll
          for (int i = 0; i < kN / 2; ++i) sum[m][i] += acc[m][i];
        }
        // Everyone is done with slot c before chunk c + kWgAhead's copies overwrite it.
        __syncthreads();
        load_chunk(c + kWgAhead);
      }
      cp_async_wait<0>();

      // Calls fn(value, channel, frame) for each output of this thread the block stores.
      // Accumulator layout: element [m][4j + v] is frame m*64 + frag_row + (v/2)*8, channel
      // 8j + 2q + v%2; one store instruction covers 8 consecutive frames of 4 channels: whole
      // 32-byte sectors.
      auto for_each_stored = [&](auto&& fn) {
#pragma unroll
        for (int m = 0; m < 2; ++m) {
#pragma unroll
          for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
            for (int v = 0; v < 4; ++v) {
              const int co = co0 + j * 8 + 2 * q + (v & 1);
              const std::int64_t t = t0 + m * 64 + frag_row + (v >> 1) * 8;
              if (co < a.cout_g && t < (kPhased ? pv.frames : a.out_frames))
                fn(sum[m][j * 4 + v], co, t);
            }
          }
        }
      };
      // Non-finite inputs show up as non-finite outputs (their split gives NaN small parts);
      // non-finite weights were flagged by the split kernel.
      for_each_stored([&](float v, int, std::int64_t) { ok &= isfinite(v); });
      if (__syncthreads_or(!ok)) {
        // A NaN/Inf in this block's outputs or in the weights: the direct formula, whose
        // classes (NaN, +-Inf) are PyTorch's.
        direct_outputs<kTransposed, kPhased>(a, b, g, ph, pv, start, co0, kN, t0, kWgRows, tid,
                                             kWgThreads);
      } else {
        float* yb = a.y + b * a.y_bs + g * a.cout_g * a.y_cs;
        for_each_stored([&](float v, int co, std::int64_t t) {
          yb[co * a.y_cs + (kPhased ? pv.y0 + t * a.phases : t)] =
              a.bias != nullptr ? v + __ldg(a.bias + g * a.cout_g + co) : v;
        });
      }
      __syncthreads();  // the next tile's copies reuse the ring
    }
  }
#endif
}

// ---- both operands in shared memory (SS), warp-specialized: the stride-1 convolutions ------
//
// The GEMM turned around: rows (M) = output channels, columns (N) = output frames. The
// activations are split into big/small planes once per block and chunk, in shared memory laid
// out [4-channel group][frame][4 channels] (K-major, a 16-byte row per frame): a core matrix is
// then 8 consecutive frames, so the tap shift is a descriptor offset of 16 bytes per frame and
// every tap reads the same planes. The weights are the A operand, split once per call by the
// weight split kernel (kCoTile-column planes). No fragment lives in registers.
// Three warpgroups: a producer copies the weights and the input of each job (tile, chunk of
// input channels) into one of kStages stages (3, or 2 where three do not fit) and splits the input;
// two consumers issue the wgmmas (3 per 8-deep step), each m64 x n128 of the block's kCoTile
// channels x ss_block_frames() frames, and store their part of the tile. Named barriers hand the
// stages over (full: producer -> consumers, empty: consumers -> producer): the consumers wait for
// copies only when the producer falls more than kStages - 1 jobs behind. Each consumer has its own
// full barrier per stage, and with WgArgs::turns the two take turns at issuing their wgmmas (the
// turn barriers: consumer 1 issues job j after consumer 0 has, consumer 0 job j + 1 after
// consumer 1 has issued job j), so that one consumer's running sum and epilogue run while the
// other's products keep the tensor pipe busy. With one full barrier for both they started each
// job together, and the pipe idled while both summed.

constexpr int kSsThreads = 384;  // producer warpgroup, two consumer warpgroups
constexpr int kSsStages = 3;     // stages where they fit; 2 where only two do (ss_plan)
constexpr int kSsWgFrames = 128;
__host__ __device__ constexpr int ss_block_frames(int co_tile) {
  return co_tile == 128 ? kSsWgFrames : 2 * kSsWgFrames;
}

// Named barriers (0 is __syncthreads, 15 the last): full[s][consumer] at kBarFull + 2 s + w,
// empty[s] (ids for three stages whatever kStages), the producer's own, one per consumer for its
// non-finite vote, and one per consumer that says it has issued its current job's wgmmas.
constexpr int kBarFull = 1, kBarEmpty = kBarFull + 2 * kSsStages,
              kBarProducer = kBarEmpty + kSsStages, kBarConsumer = kBarProducer + 1,
              kBarTurn = kBarConsumer + 2;
static_assert(kBarTurn + 1 <= 15, "the SS kernel's named barriers");
constexpr int kTmaNone = 0, kTmaRows = 1, kTmaQuads = 2;
// The SS kernel's 3xFP16 producer: a chunk index with no input scale yet.
constexpr int kNoExp = 1 << 20;

// kD2s: a strided ConvTranspose1d as one depth-to-space convolution (WgArgs::d2s); a template
// flag so that the other convolutions' epilogue is untouched. kSectors: the epilogue for output
// rows that start off 32-byte boundaries (see there), also its own instantiation: the same code
// behind a runtime flag made every shape's kernel 3-8 % slower (ptxas spilled). kStages: the
// ring of stages, 2 for layers whose three stages exceed the shared memory at 8 channels per
// chunk (large dilations at K >= 4, 14-16 taps), where the producer then runs one job ahead.
// kHalf: the products in fp16 pairs (3xFP16, see split_f16x2): weight planes [2^11 hi, hi,
// lo] of halves, input planes [hi, lo] laid out [8-channel group][frame][8 channels] (a 16-byte
// row per frame as before, so the descriptors and tap offsets are the same), m64n128k16
// wgmmas, half the steps; the producer scales each job by a power of two it computes from the
// job's largest value, the consumers undo it in the running sum and the row scales in the
// epilogue. Chunks of a multiple of 16 channels, at most 64 reduction rows.
template <bool kTransposed, int kCoTile, bool kD2s = false, bool kSectors = false,
          int kStages = kSsStages, bool kHalf = false>
__global__ void __launch_bounds__(kSsThreads, 1)
    conv1d_wgmma_ss_kernel(WgArgs a, const int* weights_nonfinite,
                           const __grid_constant__ CUtensorMap x_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kFrames = ss_block_frames(kCoTile);
  extern __shared__ __align__(128) float smem[];
  // Floats: [big, small][kCoTile x rt] (kHalf: [2^11 hi, hi, lo] of halves), and per input
  // plane [ci_chunk / 4][span][4] (kHalf: halves [ci_chunk / 8][span][8]).
  const int a_stage = kHalf ? 3 * kCoTile * a.rt / 2 : 2 * kCoTile * a.rt;
  const int b_plane = kHalf ? a.ci_chunk * a.span / 2 : a.ci_chunk * a.span;
  const int stage = a_stage + 2 * b_plane;    // weights, then the input's big and small planes
  float* const raw = smem + kStages * stage;  // [2][raw_plane], the copied input
  const int raw_plane = a.raw_plane;
  // The stages' weight barriers, after the copy buffers (8-byte aligned: every size above is
  // even), then the copy buffers' barriers (x_tma); kHalf: then each stage's input scales (the
  // consumers' factor 2^-(e + 11) for their four 32-column blocks, equal unless warp_scale) and
  // the producer warps' largest magnitudes: the 16 floats after the barriers.
  static_assert(!kHalf || 4 * kStages + 4 <= 16, "the input scales take 16 floats");
  const std::uint32_t wbar = smem_addr(raw + 2 * raw_plane);
  const std::uint32_t rbar = wbar + 8 * kStages;
  float* const job_scale = raw + 2 * raw_plane + 2 * (kStages + 2);
  std::uint32_t* const warp_max = reinterpret_cast<std::uint32_t*>(job_scale + 4 * kStages);
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const std::int64_t tiles = a.t_tiles * a.n_tiles;
  const std::int64_t items = a.bg_count * tiles;
  if (blockIdx.x >= items) return;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages + 2; ++s) mbar_init(wbar + 8 * s, 1);
    mbar_fence_init();
  }
  __syncthreads();
  // This block's jobs: its tiles (blockIdx.x, + gridDim.x, ...) x the chunks of each.
  const std::int64_t my_tiles = (items - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const std::int64_t jobs = my_tiles * a.nchunks;

  struct Tile {
    std::int64_t b, g, t0, start, slab0;
    int nt, shift;
  };
  // The channel tiles of one frame tile are neighbours in the work order: they share the input
  // through L2.
  auto tile_at = [&](std::int64_t item) {
    Tile t;
    std::int64_t tq;
    if (a.items32) {
      const auto i = static_cast<std::uint32_t>(item);
      const std::uint32_t bg = div_u32(i, static_cast<std::uint32_t>(tiles), a.tiles_magic);
      const std::uint32_t r = i - bg * static_cast<std::uint32_t>(tiles);
      const std::uint32_t b = div_u32(bg, static_cast<std::uint32_t>(a.groups), a.groups_magic);
      const std::uint32_t q = div_u32(r, static_cast<std::uint32_t>(a.n_tiles), a.n_tiles_magic);
      t.b = b;
      t.g = bg - b * static_cast<std::uint32_t>(a.groups);
      t.nt = static_cast<int>(r - q * static_cast<std::uint32_t>(a.n_tiles));
      tq = q;
    } else {
      const std::int64_t bg = item / tiles;
      const std::int64_t rest = item - bg * tiles;
      t.b = bg / a.groups;
      t.g = bg - t.b * a.groups;
      t.nt = static_cast<int>(rest % a.n_tiles);
      tq = rest / a.n_tiles;
    }
    t.t0 = tq * kFrames;
    t.start = a.in_offset + t.t0;
    // Without x_vec the copy aligns each row itself (copy_slab_rows).
    t.slab0 = a.x_vec ? (t.start & ~std::int64_t{3}) : t.start;
    t.shift = static_cast<int>(t.start - t.slab0);
    return t;
  };

  if (wg == 0) {
    // The registers go to the consumers (acc and sum are 128 per thread): 56 + 2 x 224 = 3 x
    // 168, exactly what the launch allocated (__launch_bounds__(384, 1), ptxas reports 168).
    // Asking for more than the allocation makes setmaxnreg.inc wait forever.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    // Producer. Job j: weights -> stage j % kStages (one bulk copy, which the consumers wait
    // for), input -> raw[j % 2] a job ahead (x_tma: one bulk tensor copy and a transaction
    // barrier per buffer; otherwise a cp.async group of 16-byte pieces), then split into the
    // stage's planes. It waited for the weights itself before (a cp.async group per job): an L2
    // round trip per job that, with the consumers idle, took tcn_pointwise 0.61 ms and seedA
    // 1.90. The 16-byte pieces cost about 40 instructions each (addresses, edge tests): with the
    // tensor copy tcn_pointwise went from 0.607 to 0.414 ms.
    std::int64_t item = blockIdx.x;
    Tile t = tile_at(item);
    int c = 0;
    const float* wsrc = nullptr;
    auto chunk_x = [&](const Tile& tt, int cc) {
      return a.x + tt.b * a.x_bs + (tt.g * a.cin_g + cc * a.ci_chunk) * a.x_cs;
    };
    // True when the job's input comes as tensor copies (uniform over the warpgroup).
    auto copy_input = [&](const Tile& tt, int cc, int slot) {
      const std::uint32_t dst = smem_addr(raw + slot * raw_plane), bar = rbar + 8 * slot;
      const int g = static_cast<int>(tt.g), b = static_cast<int>(tt.b);
      // Parts: each is bounds-checked at the first's frames, so interior jobs only.
      if (a.x_tma == kTmaRows &&
          (a.x_parts == 1 || (tt.slab0 >= 0 && tt.slab0 + a.x_extent <= a.in_frames))) {
        if (tid == 0) {
          mbar_expect(bar, static_cast<std::uint32_t>(sizeof(float) * a.ci_chunk * a.raw_pitch));
          tensor_copy_input(dst, x_map, a.x_parts, static_cast<int>(tt.slab0), cc * a.ci_chunk, g,
                            b, bar);
        }
        return true;
      }
      // Like the pieces, each row's copy starts at the 16-byte boundary at or below its first
      // frame and is raw_pitch frames long.
      if (a.x_tma == kTmaQuads && tt.slab0 >= 3 && tt.slab0 + a.x_extent <= a.in_frames) {
        if (tid == 0) {
          mbar_expect(bar, static_cast<std::uint32_t>(sizeof(float) * a.ci_chunk * a.raw_pitch));
          for (int u = 0; u < 4; ++u) {
            tensor_copy_input(dst + sizeof(float) * u * a.quad_stride, x_map, a.x_parts,
                              static_cast<int>((u * a.x_cs + tt.slab0) & ~std::int64_t{3}),
                              cc * a.ci_chunk / 4, g, b, bar);
          }
        }
        return true;
      }
      const int rows = min(a.ci_chunk, a.cin_g - cc * a.ci_chunk);
      if (a.x_vec) {
        copy_slab<true>(a, raw + slot * raw_plane, a.raw_pitch, chunk_x(tt, cc), rows, tt.slab0,
                        tid, 128);
      } else {
        copy_slab_rows(a, raw + slot * raw_plane, chunk_x(tt, cc), rows, tt.slab0, tid, 128);
      }
      return false;
    };
    bool tma = copy_input(t, 0, 0);
    // kHalf: lane l holds the input scale's exponent chunk index l (mod 8) had last, for this
    // warp's split; no scale yet: every chunk's first split finds its maximum and splits again.
    int lane_exp = kNoExp;
    const bool warp_scale = kCoTile == 128 && a.warp_scale;
    std::uint32_t phases = 0;  // bit k: the parity of copy buffer k's barrier's next phase
    cp_async_commit();
    // s = j % kStages, kept as a counter: j is 64-bit, and its division was a dozen instructions
    // on the path of every job.
    int s = 0;
    for (std::int64_t j = 0; j < jobs; ++j, s = s + 1 == kStages ? 0 : s + 1) {
      if (j >= kStages) bar_sync(kBarEmpty + s, kSsThreads);  // consumers are done with s
      bar_sync(kBarProducer, 128);  // everyone's split of job j - 1 is done (raw slot reuse)
      float* st = smem + s * stage;
      if (c == 0) wsrc = a.planes + (t.g * a.n_tiles + t.nt) * a.nchunks * std::int64_t{a_stage};
      if (tid == 0) {
        bulk_copy(smem_addr(st), wsrc + c * std::int64_t{a_stage},
                  static_cast<std::uint32_t>(sizeof(float) * a_stage), wbar + 8 * s);
      }
      // The next job's input.
      int nc = c + 1;
      std::int64_t nitem = item;
      Tile nt = t;
      if (nc == a.nchunks) {
        nc = 0;
        nitem += gridDim.x;
        if (nitem < items) nt = tile_at(nitem);
      }
      const bool next_tma =
          nitem < items ? copy_input(nt, nc, static_cast<int>((j + 1) & 1)) : false;
      cp_async_commit();
      if (tma) {
        mbar_wait(rbar + 8 * (j & 1), (phases >> (j & 1)) & 1);
        phases ^= 1u << (j & 1);
      } else {
        cp_async_wait<1>();  // this job's input has landed (this thread's copies)
        bar_sync(kBarProducer, 128);
      }
      const float* r = raw + (j & 1) * raw_plane;
      uint4* big = reinterpret_cast<uint4*>(st + a_stage);
      uint4* small = big + b_plane / 4;
      // Row i's copy starts (lead0 + i * lead_step) mod 4 frames early (0 with x_vec): for row
      // 4 grp + u that is (lead0 + u * lead_step) mod 4 whatever grp, four offsets per job.
      // Quad tensor copies put row 4 grp + u at u * quad_stride + grp * raw_pitch.
      const bool quads = tma && a.x_tma == kTmaQuads;
      const int lead0 = a.x_vec ? 0 : row_lead(chunk_x(t, c) + t.slab0);
      const int lead_step = a.x_vec ? 0 : static_cast<int>(a.x_cs & 3);
      const int row_step = quads ? a.quad_stride : a.raw_pitch;
      const int grp_step = quads ? a.raw_pitch : 4 * a.raw_pitch;
      int base[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) base[u] = u * row_step + ((lead0 + u * lead_step) & 3);
      if constexpr (kHalf) {
        // Rows 8 grp + u: rows 4 (2 grp) + u and 4 (2 grp + 1) + u of the layout above. The
        // values are scaled by 2^e: e is the scale this chunk index had last (its largest
        // magnitude then in [2^14, 2^15)), kept where the job's largest magnitude lands in
        // [2^12, 2^15) with it (fp16 holds values below 2^16; values more than about 2^27
        // instead of 2^29 below the job's largest lose bits, log steps 93 and 99 in
        // docs/performance.md). Otherwise (the chunk's first job, or its magnitude moved) the
        // split runs again with the scale this job's maximum gives, each thread over the same
        // rows. The maximum is taken over the frames the consumers read only: a value in the
        // others, the alignment frames, belongs to a neighbouring tile and must not scale this
        // one's away. fmaxf passes over NaN: a NaN input stays NaN through the split and makes
        // the outputs whose windows hold it NaN, as in 3xTF32. One copy of the loop: a version
        // that kept the maximum pass beside it, with the split written out three times, made the
        // whole kernel 6-11 % slower (seedA).
        const int n8 = b_plane / 4;  // 16-byte rows: (8-channel group, frame)
        const int f_lo = t.shift, f_hi = t.shift + kFrames + (a.taps - 1) * a.dilation;
        const int lane = tid & 31;
        int e = a.max_guess ? __shfl_sync(0xffffffffu, lane_exp, c & 7) : kNoExp;
        float xs = e == kNoExp ? 1.0f : exp2_int(e);
        for (bool check = true;; check = false) {
          float mf = 0.0f;
          for (int i = tid; i < n8; i += 128) {
            const int grp = static_cast<int>(__umulhi(i, a.span_div)), f = i - grp * a.span;
            const float* rg = r + 2 * grp * grp_step + f;
            float v[8];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              v[u] = rg[base[u]];
              v[4 + u] = rg[grp_step + base[u]];
            }
            if (f >= f_lo && f < f_hi) {
#pragma unroll
              for (int u = 0; u < 8; ++u) mf = fmaxf(mf, fabsf(v[u]));
            }
            std::uint32_t hi[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) split_f16x2(v[2 * u] * xs, v[2 * u + 1] * xs, hi[u], lo[u]);
            big[i] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
            small[i] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
          }
          if (!check) break;
          // Non-negative floats order like their bits.
          std::uint32_t m = __reduce_max_sync(0xffffffffu, __float_as_uint(mf));
          if (!warp_scale) {
            if (lane == 0) warp_max[tid >> 5] = m;
            bar_sync(kBarProducer, 128);
            m = max(max(warp_max[0], warp_max[1]), max(warp_max[2], warp_max[3]));
          }
          const int em = pow2_scale_exponent(m, 14);
          if (m >= 0x7f800000u) {
            // An Inf among them: every value NaN, so that every output of the tile is and the
            // consumers' fallback computes the tile with the direct formula (scaled by Inf, the
            // tile's finite values would vanish, also in outputs whose windows do not hold it).
            e = em;
            xs = __uint_as_float(0x7fc00000u);
          } else if (e == kNoExp || e < em - 2 || e > em) {
            e = em - 1;  // the middle of the window: the next job's maximum may move either way
            xs = exp2_int(e);
            if (lane == (c & 7)) lane_exp = e;
          } else {
            break;
          }
        }
        // Without warp_scale every warp found the same e.
        if (lane == 0) {
          const int w = tid >> 5;
          if (warp_scale) {
            job_scale[4 * s + w] = exp2_int(-(e + 11));
          } else if (w == 0) {
            for (int u = 0; u < 4; ++u) job_scale[4 * s + u] = exp2_int(-(e + 11));
          }
        }
      } else {
        for (int i = tid; i < b_plane / 4; i += 128) {
          const int grp = static_cast<int>(__umulhi(i, a.span_div)), f = i - grp * a.span;
          const float* rg = r + grp * grp_step + f;
          std::uint32_t hi[4], lo[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) split_tf32(rg[base[u]], hi[u], lo[u]);
          big[i] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
          small[i] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        }
      }
      fence_proxy_async();
      bar_arrive(kBarFull + 2 * s, 256);
      bar_arrive(kBarFull + 2 * s + 1, 256);
      c = nc;
      item = nitem;
      t = nt;
      tma = next_tma;
    }
    cp_async_wait<0>();
    // The consumers' releases of the last stages, so that no barrier is left with arrivals
    // pending.
    for (std::int64_t k = jobs > kStages ? jobs - kStages : 0; k < jobs; ++k)
      bar_sync(kBarEmpty + static_cast<int>(k % kStages), kSsThreads);
    return;
  }

  // Consumers.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
  const int cw = wg - 1, lane = tid & 31, q = lane & 3;
  const int row_in_wg = (tid >> 5) * 16 + (lane >> 2);  // accumulator row (channel)
  const int wg_co = kCoTile == 128 ? cw * 64 : 0;
  const int wg_t = kCoTile == 128 ? 0 : cw * kSsWgFrames;
  // Reduction steps (8 deep, kHalf 16) per chunk and tap, and the steps one accumulation in the
  // tensor cores may take (64 rows, kSsSumSteps).
  constexpr int kStepLog = kHalf ? 4 : 3;
  constexpr int kSumSteps = kHalf ? kSsSumSteps / 2 : kSsSumSteps;
  const int steps = a.rt >> kStepLog, tap_steps = a.ci_chunk >> kStepLog;
  const bool w_ok = *weights_nonfinite == 0;
  // sum: the tile's running sums, which a tile's first accumulation sets (fresh) rather than
  // adds to, so that no pass zeroes them.
  float acc[64], sum[64];
  bool fresh = true;
  std::int64_t item = blockIdx.x;
  Tile t = tile_at(item);
  int c = 0;
  // s = j % kStages and the weight barrier's parity (j / kStages) & 1, as counters (see the
  // producer).
  int s = 0;
  std::uint32_t w_parity = 0;
  auto next_stage = [&] {
    if (++s == kStages) {
      s = 0;
      w_parity ^= 1u;
    }
  };
  for (std::int64_t j = 0; j < jobs; ++j, next_stage()) {
    bar_sync(kBarFull + 2 * s + cw, 256);
    mbar_wait(wbar + 8 * s, w_parity);
    // Per 8-deep step (one tap, 8 channels): small*big, big*small, big*big. Descriptors hold
    // address / 16 in their low bits, so steps add offsets / 16 to them.
    const float* st = smem + s * stage;
    // kHalf: a_big is 2^11 hi, a_small hi and a_lo lo; b_big is hi, b_small lo.
    const std::uint64_t a_big = smem_desc(smem_addr(st) + wg_co / 8 * 256, 128, 256);
    const std::uint64_t a_small = a_big + kCoTile * a.rt / (kHalf ? 8 : 4);  // + plane bytes / 16
    const std::uint64_t a_lo = a_small + kCoTile * a.rt / 8;
    const std::uint64_t b_big =
        smem_desc(smem_addr(st + a_stage) + (t.shift + wg_t) * 16, a.span * 16, 128);
    const std::uint64_t b_small = b_big + b_plane / 4;
    // kHalf: the running sums take the chunk at 2^-(e + 11), the producer's scales, one per 32
    // columns (accumulator i holds column 8 (i / 4) + ...: block i / 16).
    float chunk_scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    if constexpr (kHalf && kCoTile == 128) {
      // 4-byte reads: job_scale lies 8 bytes off a 16-byte boundary (after the barriers).
#pragma unroll
      for (int u = 0; u < 4; ++u) chunk_scale[u] = job_scale[4 * s + u];
    } else if constexpr (kHalf) {
      chunk_scale[0] = chunk_scale[1] = chunk_scale[2] = chunk_scale[3] = job_scale[4 * s];
    }
    auto add_chunk = [&] {
      if (fresh) {
#pragma unroll
        for (int i = 0; i < 64; ++i) sum[i] = kHalf ? acc[i] * chunk_scale[i / 16] : acc[i];
        fresh = false;
        return;
      }
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        if constexpr (kHalf) {
          sum[i] = fmaf(acc[i], chunk_scale[i / 16], sum[i]);
        } else {
          sum[i] += acc[i];
        }
      }
    };
    wgmma_fence();
    // The chunk's steps, unrolled for the counts the chunk rule gives (taps x channels / 8, 2 to
    // 8): around a loop ptxas inserts a warpgroup.arrive per iteration, and the unrolled
    // sequence measured 2-4 % faster (seedA 2.93 vs 2.98 ms, x_k7 2.09 vs 2.18). More than 8
    // taps run the loop, summed every kSsSumSteps steps.
    auto mainloop = [&](auto n) {
      constexpr int kSteps = decltype(n)::value;
      int tap = 0, sub = 0;
#pragma unroll
      for (int k = 0; k < (kSteps > 0 ? kSteps : steps); ++k) {
        if constexpr (kSteps == 0) {
          if (k > 0 && k % kSumSteps == 0) {
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(acc);
            add_chunk();
            wgmma_fence();
          }
        }
        const std::uint64_t ao = k * (kCoTile / 8) * 16;  // k * step bytes / 16
        const std::uint64_t bo =                          // rows of 16 bytes
            2 * sub * a.span + tap * a.tap_pitch + ((tap * a.tap_lead) & 3);
        if constexpr (kHalf) {  // 2^11 hi x hi, hi x lo, lo x hi
          wgmma_ss<true>(acc, a_big + ao, b_big + bo, k % kSumSteps);
          wgmma_ss<true>(acc, a_small + ao, b_small + bo, 1);
          wgmma_ss<true>(acc, a_lo + ao, b_big + bo, 1);
        } else {  // small x big, big x small, big x big
          wgmma_ss<false>(acc, a_small + ao, b_big + bo, k % kSumSteps);
          wgmma_ss<false>(acc, a_big + ao, b_small + bo, 1);
          wgmma_ss<false>(acc, a_big + ao, b_big + bo, 1);
        }
        if (++sub == tap_steps) {
          sub = 0;
          ++tap;
        }
      }
    };
    // This consumer's turn: the other one has issued its previous job (consumer 0, from its second
    // job on) or this one (consumer 1). No wgmma is in flight here, so the branch is free.
    if (a.turns && (cw == 1 || j > 0)) bar_sync(kBarTurn + 1 - cw, 256);
    // kHalf: 1 to 4 steps (64 rows) unrolled, the same rows as 2 to 8 of 3xTF32.
    with_constant<kHalf ? 1 : 2, kSumSteps>(steps, mainloop);
    wgmma_commit();
    bar_arrive_if(a.turns, kBarTurn + cw, 256);
    wgmma_wait<0>();
    fence_operands(acc);
    bar_arrive(kBarEmpty + s, kSsThreads);
    add_chunk();
    if (++c < a.nchunks) continue;

    // This warpgroup's part of the tile. Accumulator element 4i + 2h + p: channel row_in_wg +
    // 8h, frame 8i + 2q + p of its 128.
    c = 0;
    fresh = true;
    const int co0 = t.nt * kCoTile + wg_co + row_in_wg;
    const std::int64_t tb = t.t0 + wg_t + 2 * q;
    const int y_cout_g = kD2s ? a.cout_g / a.d2s : a.cout_g;
    // Output = fma(sum, rs[h], rb[h]) for row co0 + 8h: rs undoes the row's weight scale (kHalf),
    // rb is the bias. Rows past cout_g (partial channel tiles) store nothing.
    float rs[2], rb[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int co = co0 + 8 * h;
      const bool live = co < a.cout_g;
      rs[h] = kHalf ? (live ? __ldg(a.row_inv + t.g * a.cout_g + co) : 0.0f) : 1.0f;
      const int bco = kD2s ? co / a.d2s : co;
      rb[h] = live && a.bias != nullptr ? __ldg(a.bias + t.g * y_cout_g + bco) : 0.0f;
    }
    // The stores come first and the non-finite vote after them, over the values stored: a NaN
    // or Inf among them (or in the weights) sends the warpgroup's part of the tile to the direct
    // formula, whose classes (NaN, +-Inf) are PyTorch's and which then overwrites what was
    // stored (the vote's barrier orders the two). The vote is fmaf(v, 0, z) chains, NaN once any
    // v is not finite (one instruction per value; the bounds-tested isfinite() it replaces was
    // about three). It takes in the values past the layer's last frame too: those are finite
    // unless the frames the tile reads hold a NaN or Inf, and then so are outputs inside. Voting
    // before the stores made ptxas spill in the sector epilogue and measured no faster in the
    // others (log step 106 in docs/performance.md).
    float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    auto out = [&](float x, int h, int k) {
      const float v = fmaf(x, rs[h], rb[h]);
      z[k & 3] = fmaf(v, 0.0f, z[k & 3]);
      return v;
    };
    if constexpr (kD2s) {
      // Row co' = co * s + p is phase p of channel co: frame f goes to (q0 + f) * s + p - pad.
      // A warp's 8 rows x 8 frames cover whole 32-byte runs of the output rows.
      const int ds = a.d2s;
      float* yb = a.y + t.b * a.y_bs + t.g * y_cout_g * a.y_cs;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int cr = co0 + 8 * h;
        if (cr >= a.cout_g) continue;
        const int co = cr / ds, p = cr - co * ds;
        float* row = yb + co * a.y_cs;
        const std::int64_t o0 = (a.d2s_q0 + tb) * ds + p - a.pad;  // output frame of frame tb
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const std::int64_t o = o0 + ((i >> 1) * 8 + (i & 1)) * ds;
          const float v = out(sum[4 * (i >> 1) + 2 * h + (i & 1)], h, i);
          if (o >= 0 && o < a.y_frames) row[o] = v;
        }
      }
    } else if constexpr (kSectors) {
      // Output rows that do not all start on a 32-byte boundary (seedA's 131070 frames, any
      // odd length). A 32-byte run of a row (8 frames) is held by one quad of lanes, but here
      // it straddles two sectors of memory, and sectors written in two parts measured 2x
      // slower as a store pattern (seedA's output alone: 2.05 vs 1.04 ms,
      // scripts/cuda_ceilings.cu). So each quad rotates its values by the a0 frames from the
      // tile's start to the row's first boundary and stores whole sectors, as 8-byte pairs,
      // from there; the pieces before and after them are shared with the neighbouring tiles.
      // Destination lane q's element p comes from lane q + c_p (mod 4), c_p = (a0 + p) / 2,
      // element (a0 + p) % 2, of run i, or of run i + 1 where the source lane is below c_p.
      float* yb = a.y + t.b * a.y_bs + t.g * a.cout_g * a.y_cs;
      const std::int64_t t0w = t.t0 + wg_t;  // this warpgroup's first frame, a multiple of 128
      const int quad = lane & ~3;
      // Every pair the loop stores lies before frame t0w + 135: where that is inside the row,
      // its stores need no bounds test (an instantiation of the loop each way).
      const bool whole = t0w + kSsWgFrames + 8 <= a.out_frames;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int co = co0 + 8 * h;
        const bool live = co < a.cout_g;  // not a branch: every lane takes part in the shuffles
        float* row = yb + co * a.y_cs;
        const int a0 = (8 - static_cast<int>((reinterpret_cast<std::uintptr_t>(row) >> 2) & 7)) & 7;
        const int c0 = a0 >> 1, c1 = (a0 + 1) >> 1;
        const int src0 = quad + ((q + c0) & 3), src1 = quad + ((q + c1) & 3);
        const bool odd = (a0 & 1) != 0;
        float* const rq = row + t0w + a0 + 2 * q;  // 8-byte aligned
        auto runs = [&](auto whole_tile) {
#pragma unroll
          for (int i = 0; i < 16; ++i) {
            const int n = i < 15 ? i + 1 : i;
            // Selects between fixed indices: an index computed at run time would put sum[] in
            // local memory.
            const float* ri = sum + 4 * i + 2 * h;
            const float* rn = sum + 4 * n + 2 * h;
            const float x0 = q < c0 ? (odd ? rn[1] : rn[0]) : (odd ? ri[1] : ri[0]);
            const float x1 = q < c1 ? (odd ? rn[0] : rn[1]) : (odd ? ri[0] : ri[1]);
            const float v0 = out(__shfl_sync(0xffffffffu, x0, src0), h, 2 * i);
            const float v1 = out(__shfl_sync(0xffffffffu, x1, src1), h, 2 * i + 1);
            if (live && (i < 15 || a0 == 0)) {
              const std::int64_t f = t0w + a0 + 2 * q + 8 * i;
              if (decltype(whole_tile)::value || f + 1 < a.out_frames) {
                *reinterpret_cast<float2*>(rq + 8 * i) = make_float2(v0, v1);
              } else if (f < a.out_frames) {
                rq[8 * i] = v0;
              }
            }
          }
        };
        with_constant<1, 1>(whole, runs);  // runs(1): no bounds tests
        if (live && a0 != 0) {             // run 0 before the first boundary, run 15 after the last
#pragma unroll
          for (int p = 0; p < 2; ++p) {
            const int k = 2 * q + p;
            const std::int64_t f = t0w + (k < a0 ? k : 120 + k);
            const float v = out(k < a0 ? sum[2 * h + p] : sum[60 + 2 * h + p], h, p);
            if (f < a.out_frames) row[f] = v;
          }
        }
      }
    } else {
      float* yb = a.y + t.b * a.y_bs + t.g * a.cout_g * a.y_cs;
      // Whole tiles of 8-byte aligned rows store every pair without a bounds test.
      const bool whole = a.y_vec2 && t.t0 + wg_t + kSsWgFrames <= a.out_frames;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int co = co0 + 8 * h;
        if (co >= a.cout_g) continue;
        float* row = yb + co * a.y_cs;
        auto runs = [&](auto whole_tile) {
#pragma unroll
          for (int i = 0; i < 16; ++i) {
            const std::int64_t f = tb + 8 * i;  // even
            const float v0 = out(sum[4 * i + 2 * h], h, 2 * i);
            const float v1 = out(sum[4 * i + 2 * h + 1], h, 2 * i + 1);
            if (decltype(whole_tile)::value || (a.y_vec2 && f + 1 < a.out_frames)) {
              *reinterpret_cast<float2*>(row + f) = make_float2(v0, v1);
            } else {
              if (f < a.out_frames) row[f] = v0;
              if (f + 1 < a.out_frames) row[f + 1] = v1;
            }
          }
        };
        with_constant<1, 1>(whole, runs);  // runs(1): no bounds tests
      }
    }
    const bool ok = w_ok && (z[0] + z[1]) + (z[2] + z[3]) == 0.0f;
    if (bar_any(kBarConsumer + cw, 128, !ok)) {
      direct_outputs<kTransposed, false, kD2s>(
          a, t.b, t.g, 0, PhaseView{a.in_offset, 0, a.out_frames}, t.start + wg_t,
          t.nt * kCoTile + wg_co, 64, t.t0 + wg_t, kSsWgFrames, tid, 128);
    }
    item += gridDim.x;
    if (item < items) t = tile_at(item);
  }
  // Consumer 1's arrival after its last job, so that no barrier is left with arrivals pending.
  if (a.turns && cw == 0 && jobs > 0) bar_sync(kBarTurn + 1, 256);
#endif
}

}  // namespace
}  // namespace convbank::detail::cuda

namespace convbank::detail::cuda {

namespace {

int ci_chunk_for(int taps) {
  return taps == 1 ? 16 : 8;
}

// Frames of input a block reads per channel, plus 3 so that a 16-byte aligned copy can start
// up to 3 frames early; a multiple of 4.
int span_for(int stride, int dilation, int taps) {
  return ((kWgRows - 1) * stride + (taps - 1) * dilation + 1 + 3 + 3) / 4 * 4;
}

// Row pitch = 8 mod 32 floats: the 4 channels x 8 frames of a fragment load hit 32 banks.
int pitch_for(int span) {
  return (span + 31) / 32 * 32 + 8;
}

std::size_t smem_bytes(int taps, int stride, int dilation) {
  const int ci = ci_chunk_for(taps);
  const std::size_t plane = static_cast<std::size_t>(kWgCols) * taps * ci;
  const std::size_t xs = static_cast<std::size_t>(ci) * pitch_for(span_for(stride, dilation, taps));
  return kWgRing * (2 * plane + xs) * sizeof(float);
}

constexpr std::size_t kWgMaxSmem = 227 * 1024;

// ceil(2^32 / d): the kernels divide i by d as __umulhi(i, reciprocal(d)), exact for the
// indices they use.
constexpr std::uint32_t reciprocal(int d) {
  return static_cast<std::uint32_t>(((std::uint64_t{1} << 32) + d - 1) / d);
}

// The SS kernel's 32-bit tile divisions (WgArgs::items32), where its items number below 2^32.
void set_tile_magic(WgArgs& a) {
  const std::int64_t tiles = a.t_tiles * a.n_tiles;
  a.items32 = a.bg_count * tiles < (std::int64_t{1} << 32);
  if (!a.items32) return;
  a.tiles_magic = div_magic(tiles);
  a.groups_magic = div_magic(a.groups);
  a.n_tiles_magic = div_magic(a.n_tiles);
}

// a.span and the reciprocals the kernels divide by.
void set_span(WgArgs& a, int span) {
  a.span = span;
  a.span_div = reciprocal(span);
  a.quads_div = reciprocal(span / 4);
}

// The SS kernel's chunk: ci_chunk input channels x all taps, about 64 reduction rows (fewer
// barriers and running-sum passes per wgmma than 8 channels), halved while its stages (weights
// and input planes) and the two copy buffers exceed the shared memory.
struct SsGeometry {
  int stages;
  int ci_chunk, span;
  int window;    // WgArgs::window
  int raw_room;  // floats per copy buffer
  std::size_t smem;
};
// The chunk for g.span: the most channels (up to the rule's) whose stages and copy buffers fit.
// The shared memory allows for both copies (WgArgs::raw_pitch), and 128 floats more per copy
// buffer where that does not halve the chunk (the quad tensor copies' alignment,
// WgArgs::quad_stride).
// half: the stages of 3xFP16 (the SS kernel's kHalf), 3/4 of the weights' bytes and half the
// input planes', and the input scales after the barriers.
SsGeometry ss_chunk(SsGeometry g, int co_tile, int taps, bool half) {
  const std::size_t stages = static_cast<std::size_t>(g.stages);
  for (g.ci_chunk = taps == 1 ? 32 : std::max(8, 64 / taps / 8 * 8);; g.ci_chunk /= 2) {
    const std::size_t rt = static_cast<std::size_t>(taps) * g.ci_chunk;
    const std::size_t b_plane = static_cast<std::size_t>(g.ci_chunk) * g.span;
    const std::size_t stage =
        half ? 3 * co_tile * rt / 2 + b_plane : 2 * co_tile * rt + 2 * b_plane;
    auto smem = [&](std::size_t raw_room) {
      return (stages * stage + 2 * raw_room) * sizeof(float) +
             (stages + 2) * sizeof(std::uint64_t) + (half ? 64 : 0);
    };
    g.raw_room = g.ci_chunk * (g.span + 4);
    if (smem(g.raw_room + 128) <= kWgMaxSmem) g.raw_room += 128;
    g.smem = smem(g.raw_room);
    if (g.smem <= kWgMaxSmem || g.ci_chunk == 8) return g;
  }
}

// aligned: the input frame of every tile's first output is a multiple of 4 (in_offset % 4 == 0;
// tiles start at multiples of 128 frames), so 16-byte copies of aligned rows start exactly
// there.
SsGeometry ss_geometry(int co_tile, int taps, int dilation, bool aligned, int stages,
                       bool half = false) {
  SsGeometry g{};
  g.stages = stages;
  // Input frames a block reads per channel, +3 (unless aligned) so that a 16-byte aligned copy
  // can start up to 3 frames early; a multiple of 4.
  const int frames = ss_block_frames(co_tile);
  g.span = (frames + (taps - 1) * dilation + (aligned ? 0 : 3) + 3) / 4 * 4;
  // Windows per tap where that is less (dilation well above the tile's frames): each holds the
  // tile's frames, 3 of alignment shift (aligned rows) or copy lead (the others), and 3 of the
  // tap's own lead (its first frame from the 16-byte boundary below it, 0 where the dilation is
  // a multiple of 4). A window is at most one box of the bulk tensor copies (256 frames).
  const int window = (frames + 3 + 3 + 3) / 4 * 4;
  if (taps > 1 && window <= 256 && taps * window < g.span) {
    // Windows a dilation apart that is not a multiple of 4 go as the producer's 16-byte pieces
    // (a bulk tensor copy's strides are whole 16-byte pieces): only where contiguous rows do
    // not fit.
    const SsGeometry rows = ss_chunk(g, co_tile, taps, half);
    if (dilation % 4 != 0 && rows.smem <= kWgMaxSmem) return rows;
    g.span = taps * window;
    g.window = window;
  }
  return ss_chunk(g, co_tile, taps, half);
}

// Two stages for the stride-1 convolutions of more than one tap whose three stages do not fit
// at 8 channels per chunk on either tile (not for depth-to-space, whose taps are at most 8 at
// dilation 1 and fit). CONVBANK_CUDA_SS_TWO_STAGES=0 turns them off: those layers then take the
// register-fragment kernel or the FFMA kernels, as before (read once).
bool ss_two_stages_allowed(int taps, bool d2s) {
  static const bool off = env_off("CONVBANK_CUDA_SS_TWO_STAGES");
  return !off && taps > 1 && !d2s;
}

// The geometry of a launch of the SS kernel's tile co_tile (chosen by wgmma_ss_tile): three
// stages where they fit, else two.
SsGeometry ss_plan(int co_tile, int taps, int dilation, bool aligned, bool d2s, bool half = false) {
  const SsGeometry three = ss_geometry(co_tile, taps, dilation, aligned, kSsStages, half);
  if (three.smem <= kWgMaxSmem || !ss_two_stages_allowed(taps, d2s)) return three;
  return ss_geometry(co_tile, taps, dilation, aligned, 2);
}

// 3xFP16 on the SS kernel (kHalf) where a launch's geometry allows it: three stages, chunks of a
// multiple of 16 channels and at most 64 reduction rows, contiguous rows (with windows per tap
// the split reads up to 3 frames past a row that are not the layer's, and the job's largest
// magnitude must be the layer's), and by default (kAuto) where it measured faster than 3xTF32:
// where the grid has at least two tiles per multiprocessor and the layer fills a tile's rows
// or has many products per input value (taps x channel tile > 256, the rule before log step 99,
// kept for the partly filled tiles that it measured on then).
// Its split costs the producer more than 3xTF32's (a per-job maximum, the fp16 conversions);
// since the split carries each chunk's scale over and finds the maximum on the way (log step
// 99 in docs/performance.md) that pays wherever the consumers have a full tile to work on:
// seedA 2.03 vs 2.53 ms, seedB 3.27 vs 4.18, tcn_pointwise 0.392 vs 0.414, up2x 0.174 vs
// 0.179, x_grouped_t 0.577 vs 0.598. Short grids and half-empty tiles were slower: dec_stft512
// (128 tiles) 0.149 vs 0.124, x_dec4 (32 rows on the 64-row tile) 0.488 vs 0.460.
// CONVBANK_CUDA_SS_HALF=0 turns it off, =1 takes it wherever it fits (read once;
// set_ss_half_policy for the tests).
std::atomic<WgmmaPolicy> g_ss_half{env_policy("CONVBANK_CUDA_SS_HALF")};
std::atomic<std::uint64_t> g_ss_half_launches;
std::atomic<std::uint64_t> g_ss_warp_scale_launches;
bool ss_half_fits(const SsGeometry& g, int taps) {
  return g.stages == kSsStages && g.window == 0 && g.ci_chunk % 16 == 0 && taps * g.ci_chunk <= 64;
}
bool ss_half_wins(int co_tile, int taps, std::int64_t rows, std::int64_t tiles) {
  switch (g_ss_half.load(std::memory_order_relaxed)) {
    case WgmmaPolicy::kNever:
      return false;
    case WgmmaPolicy::kAlways:
      return true;
    default:
      return (rows >= co_tile || co_tile * taps > 256) && tiles >= 2 * num_sms();
  }
}

// The SS geometry's `aligned` for a convolution whose output 0, tap 0 reads input frame
// in_offset.
bool ss_aligned(std::int64_t in_offset) {
  return in_offset % 4 == 0;
}

// ConvTranspose1d at stride 1: y[t] = sum_k x[t + padding - d*k] w[k]
// = sum_k' x[t + padding - d*(K-1) + d*k'] w[K-1-k']: output 0, tap 0 reads this frame.
std::int64_t transposed_in_offset(const ConvTranspose1dParams& p) {
  return p.padding - p.dilation * (p.kernel_size - 1);
}

template <bool kT, bool kP>
bool kernel_loaded() {
  static const bool ok = [] {
    const auto big_smem = [](auto kernel) {
      return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kWgMaxSmem)) == cudaSuccess;
    };
    cudaFuncAttributes attr{};
    const bool loaded =
        cudaFuncGetAttributes(&attr, conv1d_wgmma_3xtf32_kernel<kT, kP, 1>) == cudaSuccess &&
        cudaFuncGetAttributes(&attr, wgmma_split_weights_kernel) == cudaSuccess &&
        big_smem(conv1d_wgmma_3xtf32_kernel<kT, kP, 1>) &&
        big_smem(conv1d_wgmma_3xtf32_kernel<kT, kP, 3>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 128>) && big_smem(conv1d_wgmma_ss_kernel<kT, 64>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 128, false, true>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 64, false, true>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 128, false, false, 2>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 64, false, false, 2>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 128, false, false, kSsStages, true>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 64, false, false, kSsStages, true>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 128, false, true, kSsStages, true>) &&
        big_smem(conv1d_wgmma_ss_kernel<kT, 64, false, true, kSsStages, true>) &&
        (!kT || (big_smem(conv1d_wgmma_ss_kernel<kT, 128, kT>) &&
                 big_smem(conv1d_wgmma_ss_kernel<kT, 64, kT>) &&
                 big_smem(conv1d_wgmma_ss_kernel<kT, 128, kT, false, kSsStages, true>) &&
                 big_smem(conv1d_wgmma_ss_kernel<kT, 64, kT, false, kSsStages, true>)));
    if (!loaded) cudaGetLastError();
    return loaded;
  }();
  return ok;
}

// sm_90a code runs on compute capability 9.0 only; the weight planes live in stream-ordered
// memory (cudaMallocAsync). Read once.
bool device_is_sm90() {
  static const bool ok = [] {
    int device = 0, major = 0, minor = 0, pools = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major == 9 && minor == 0 && pools != 0;
  }();
  return ok;
}

// ss: the shared-memory-operand kernel takes the layer (wgmma_ss_tile), so the
// register-fragment kernel's slab need not fit.
bool shape_fits(std::int64_t cin_g, std::int64_t cout_g, std::int64_t taps, std::int64_t stride,
                std::int64_t dilation, bool ss) {
  if (cin_g < 8 || cout_g < 32 || taps < 1) return false;
  if (ss) return taps <= kSsMaxTaps;
  if (taps > kWgMaxTaps || stride > 64 || dilation > 1024) return false;
  return smem_bytes(static_cast<int>(taps), static_cast<int>(stride), static_cast<int>(dilation)) <=
         kWgMaxSmem;
}

// The weight planes (and the non-finite flag) in a stream-ordered workspace, split from a.w;
// returns the workspace, which the caller frees after its launch.
Workspace split_weights(WgArgs& a, int*& flag, cudaStream_t stream, const LaunchShape& shape) {
  const std::size_t plane_floats = static_cast<std::size_t>(a.groups) * a.phases * a.n_tiles *
                                   a.nchunks * 2 * a.cols * static_cast<std::size_t>(a.rt);
  Workspace ws(plane_floats * sizeof(float) + 16, stream, "tensor-core weight planes");
  a.planes = ws.floats();
  flag = reinterpret_cast<int*>(a.planes + plane_floats);
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), stream), "cudaMemsetAsync");
  const std::int64_t elems = static_cast<std::int64_t>(plane_floats / 2);
  wgmma_split_weights_kernel<<<grid_dim((elems + 255) / 256, 4096), 256, 0, stream>>>(a, flag);
  check_launch("wgmma_split_weights", shape);
  return ws;
}

// 3xFP16 (the SS kernel's kHalf): the rows' scales, then the planes of halves, then the flag.
Workspace split_weights_half(WgArgs& a, int*& flag, cudaStream_t stream, const LaunchShape& shape) {
  const std::size_t elems = static_cast<std::size_t>(a.groups) * a.n_tiles * a.nchunks * a.cols *
                            static_cast<std::size_t>(a.rt);
  const std::size_t plane_floats = 3 * elems / 2;  // cols is even
  const std::size_t rows = static_cast<std::size_t>(a.groups) * a.cout_g;
  Workspace ws((plane_floats + 2 * rows) * sizeof(float) + 16, stream, "tensor-core weight planes");
  a.planes = ws.floats();
  float* const scale = a.planes + plane_floats;
  float* const inv = scale + rows;
  a.row_scale = scale;
  a.row_inv = inv;
  flag = reinterpret_cast<int*>(inv + rows);
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), stream), "cudaMemsetAsync");
  wgmma_weight_scales_kernel<<<grid_dim((32 * rows + 255) / 256, kMaxGridX), 256, 0, stream>>>(
      a, scale, inv);
  check_launch("wgmma_weight_scales", shape);
  const std::int64_t n = static_cast<std::int64_t>(elems);
  wgmma_split_weights_half_kernel<<<grid_dim((n + 255) / 256, 4096), 256, 0, stream>>>(a, flag);
  check_launch("wgmma_split_weights_half", shape);
  return ws;
}

// 16-byte copies of whole input rows and 8-byte output stores where the views' alignment
// allows them (without x_vec the SS kernel aligns each row's copy: WgArgs::raw_pitch).
void set_alignment(WgArgs& a) {
  a.x_vec = reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0 && a.x_cs % 4 == 0 && a.x_bs % 4 == 0;
  a.y_vec2 = reinterpret_cast<std::uintptr_t>(a.y) % 8 == 0 && a.y_cs % 2 == 0 && a.y_bs % 2 == 0;
  static const bool max_guess = !env_off("CONVBANK_CUDA_SS_MAX_GUESS");
  a.max_guess = max_guess;
}

// The SS kernel's consumers take turns at issuing (the kernel's turn barriers) for layers of
// three taps and more, whose jobs have products enough to cover the other consumer's running sum
// and epilogue; one- and two-tap layers, whose producer holds them, measured 2-5 % slower with
// turns (log step 104 in docs/performance.md). CONVBANK_CUDA_SS_TURNS=0 never, =1 always (read
// once; A/B runs).
bool ss_turns(int taps) {
  static const WgmmaPolicy policy = env_policy("CONVBANK_CUDA_SS_TURNS");
  return policy == WgmmaPolicy::kAuto ? taps >= 3 : policy == WgmmaPolicy::kAlways;
}

// Windowed rows hold their copy lead inside their windows, so the split of a row whose copy
// starts early reads up to 3 frames past the row: past the last row, a pad of 32 floats (the
// next buffer stays 128-byte aligned) keeps those reads off the other buffer's copies.
int lead_pad(const WgArgs& a) {
  return a.window > 0 && !a.x_vec ? 32 : 0;
}

// The SS kernel's copied rows: raw_pitch frames apart (a multiple of 4), its reciprocal, and a copy
// buffer of ci_chunk such rows (the quad tensor copies' layout may widen it).
void set_raw_pitch(WgArgs& a, int pitch) {
  a.raw_pitch = pitch;
  a.raw_quads_div = reciprocal(pitch / 4);
  a.raw_plane = a.ci_chunk * pitch + lead_pad(a);
}

// Launches per input copy kind, indexed by WgArgs::x_tma, those of them with copies in parts,
// and the most parts (ss_input_copies()).
std::atomic<std::uint64_t> g_ss_input_copies[3];
std::atomic<std::uint64_t> g_ss_input_split[3];
std::atomic<int> g_ss_input_max_parts;
std::atomic<std::uint64_t> g_ss_input_windowed;  // launches with a window per tap
std::atomic<std::uint64_t> g_ss_two_stages;      // launches with two stages

// The input's tensor map for the SS kernel's bulk tensor copies and how it is used
// (WgArgs::x_tma, quad_stride): kTmaRows where rows are 16-byte aligned, kTmaQuads where
// only four rows together are (odd frame counts; channels per group a multiple of 4), kTmaNone
// where neither holds, the widened rows would not fit the copy buffer, coordinates could pass
// 2^30, the driver rejects the strides or has no tensor maps: the producer then copies 16-byte
// pieces.
// A box dimension holds at most 256 elements, so wider rows (the 64 x 256 tiles' 260-272
// frames, dilated layers' longer ones) are copied in x_parts = ceil(width / 256) parts: the
// map's frame dimension is split into (frame, part) with the part's stride raw_pitch / x_parts
// frames, and the box's parts land back to back, as the rows the consumers read. Only the first
// dimension is bounds-checked against the row, so such copies are for interior jobs; edge jobs
// copy pieces.
// CONVBANK_CUDA_SS_TMA=0: never (read once).
void set_input_map(WgArgs& a, CUtensorMap& map, int raw_room) {
  static const TensorMapEncode encode =
      env_off("CONVBANK_CUDA_SS_TMA") ? nullptr : tensor_map_encoder();
  a.x_tma = kTmaNone;
  a.x_parts = 1;
  constexpr std::int64_t kCoordMax = std::int64_t{1} << 30;
  constexpr int kBoxMax = 256;
  const bool aligned = reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0 && a.x_bs % 4 == 0;
  // Windows are the parts of one copy: their stride (the dilation) must be whole 16-byte pieces.
  const bool windows_fit = a.window == 0 || a.dilation % 4 == 0;
  if (encode == nullptr || !aligned || !windows_fit || a.ci_chunk > kBoxMax ||
      4 * a.x_cs + a.span >= kCoordMax || a.in_offset <= -kCoordMax ||
      a.in_offset + a.t_tiles * ss_block_frames(a.cols) >= kCoordMax) {
    return;
  }
  const auto u64 = [](std::int64_t v) { return static_cast<cuuint64_t>(v); };
  const std::int64_t batch = a.bg_count / a.groups;
  const cuuint32_t steps[5] = {1, 1, 1, 1, 1};
  // A copy of `width` frames goes in parts of width / parts frames, each a whole number of
  // 16-byte pieces: fit() rounds a width up to a multiple of 4 x its parts. Windowed copies
  // (WgArgs::window) are one part per tap, `dilation` frames apart in the row.
  const auto parts_of = [](int width) { return (width + kBoxMax - 1) / kBoxMax; };
  const auto fit = [&](int width) {
    const int q = 4 * parts_of(width);
    return a.window > 0 ? width : (width + q - 1) / q * q;
  };
  // (frame, channel or quad row, group, batch), a box `box[0]` frames wide (a fit() width);
  // in parts as the 5-d map (frame, part, channel or quad row, group, batch).
  auto encode_map = [&](const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box) {
    const int parts = a.window > 0 ? a.taps : parts_of(static_cast<int>(box[0]));
    const int part = static_cast<int>(box[0]) / parts;
    const int part_stride = a.window > 0 ? a.dilation : part;
    const cuuint64_t dims5[5] = {dims[0], u64(parts), dims[1], dims[2], dims[3]};
    const cuuint64_t strides5[4] = {u64(part_stride) * sizeof(float), strides[0], strides[1],
                                    strides[2]};
    const cuuint32_t box5[5] = {static_cast<cuuint32_t>(part), static_cast<cuuint32_t>(parts),
                                box[1], box[2], box[3]};
    const bool split = parts > 1;
    const bool ok =
        encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, split ? 5 : 4, const_cast<float*>(a.x),
               split ? dims5 : dims, split ? strides5 : strides, split ? box5 : box, steps,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    if (ok) a.x_parts = parts;
    return ok;
  };
  const cuuint64_t group_stride = u64(a.x_cs * a.cin_g) * sizeof(float);
  const cuuint64_t batch_stride = u64(a.x_bs) * sizeof(float);
  if (a.x_vec && a.raw_pitch == a.span) {
    // The rows' pitch grows to the fit() width where the copy buffer has room for it.
    const int width = fit(a.span);
    const cuuint64_t dims[4] = {u64(a.in_frames), u64(a.cin_g), u64(a.groups), u64(batch)};
    const cuuint64_t strides[3] = {u64(a.x_cs) * sizeof(float), group_stride, batch_stride};
    const cuuint32_t box[4] = {static_cast<cuuint32_t>(width), static_cast<cuuint32_t>(a.ci_chunk),
                               1, 1};
    if (width * a.ci_chunk <= raw_room && encode_map(dims, strides, box)) {
      a.x_tma = kTmaRows;
      set_raw_pitch(a, width);
    }
    return;
  }
  // Rows of raw_pitch frames (the pieces' rows: up to 3 frames of lead, then span); each of the
  // four copies lands 128-byte aligned, all within the copy buffer. The pitch grows to the
  // fit() width where the copy buffer has room for it (more 16-byte pieces per row).
  const auto quad_stride = [&](int pitch) { return (a.ci_chunk / 4 * pitch + 31) / 32 * 32; };
  if (a.cin_g % 4 == 0 && fit(a.raw_pitch) != a.raw_pitch &&
      4 * quad_stride(fit(a.raw_pitch)) <= raw_room) {
    set_raw_pitch(a, fit(a.raw_pitch));
  }
  a.quad_stride = quad_stride(a.raw_pitch);
  if (a.cin_g % 4 != 0 || fit(a.raw_pitch) != a.raw_pitch ||
      4 * a.quad_stride + lead_pad(a) > raw_room) {
    return;
  }
  const cuuint64_t dims[4] = {u64(4 * a.x_cs), u64(a.cin_g / 4), u64(a.groups), u64(batch)};
  const cuuint64_t strides[3] = {u64(4 * a.x_cs) * sizeof(float), group_stride, batch_stride};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(a.raw_pitch),
                             static_cast<cuuint32_t>(a.ci_chunk / 4), 1, 1};
  if (encode_map(dims, strides, box)) {
    a.x_tma = kTmaQuads;
    a.raw_plane = 4 * a.quad_stride + lead_pad(a);
  }
}

template <bool kT, bool kD2s = false>
void launch_ss(WgArgs a, int co_tile, cudaStream_t stream, const char* name,
               const LaunchShape& shape) {
  set_alignment(a);
  // 3xFP16 by the dispatcher's rule (the kernel names follow it), in its own geometry: its
  // smaller stages may hold twice the channels.
  const bool aligned = ss_aligned(a.in_offset);
  const bool half = a.half_ok && wgmma_ss_half(a.taps, a.dilation, co_tile, aligned, a.bg_count,
                                               a.cout_g, a.out_frames, kD2s);
  const SsGeometry geo = ss_plan(co_tile, a.taps, a.dilation, aligned, kD2s, half);
  a.turns = ss_turns(a.taps);
  static const bool warp_scale_off = env_off("CONVBANK_CUDA_SS_WARP_SCALE");
  a.cols = co_tile;
  a.ci_chunk = geo.ci_chunk;
  a.rt = a.taps * a.ci_chunk;
  a.nchunks = (a.cin_g + a.ci_chunk - 1) / a.ci_chunk;
  set_span(a, geo.span);
  a.window = geo.window;
  a.tap_pitch = geo.window > 0 ? geo.window : a.dilation;
  a.tap_lead = geo.window > 0 ? a.dilation : 0;
  if (geo.window > 0) a.window_quads_div = reciprocal(geo.window / 4);
  // Windows hold their copy lead themselves; contiguous rows need 4 frames more for it.
  set_raw_pitch(a, a.x_vec || geo.window > 0 ? geo.span : geo.span + 4);
  const int frames = ss_block_frames(co_tile);
  a.t_tiles = (a.out_frames + frames - 1) / frames;
  a.n_tiles = (a.cout_g + co_tile - 1) / co_tile;
  set_tile_magic(a);
  a.warp_scale = half && !warp_scale_off && co_tile == 128 && a.taps == 1 && a.span == 128 &&
                 a.window == 0 && ss_block_frames(co_tile) == 128;
  CUtensorMap x_map{};
  set_input_map(a, x_map, geo.raw_room);
  a.x_extent = a.window > 0 ? (a.taps - 1) * a.dilation + a.window : a.raw_pitch;
  g_ss_input_copies[a.x_tma].fetch_add(1, std::memory_order_relaxed);
  if (a.window > 0) g_ss_input_windowed.fetch_add(1, std::memory_order_relaxed);
  if (a.x_parts > 1) {
    g_ss_input_split[a.x_tma].fetch_add(1, std::memory_order_relaxed);
    int seen = g_ss_input_max_parts.load(std::memory_order_relaxed);
    while (seen < a.x_parts && !g_ss_input_max_parts.compare_exchange_weak(seen, a.x_parts)) {
    }
  }
  int* flag = nullptr;
  Workspace ws =
      half ? split_weights_half(a, flag, stream, shape) : split_weights(a, flag, stream, shape);
  // Persistent blocks, one per multiprocessor (the shared memory of one block is most of it).
  const std::int64_t items = a.bg_count * a.t_tiles * a.n_tiles;
  const unsigned grid = grid_dim(items < num_sms() ? items : num_sms(), kMaxGridX);
  // Whole-sector stores for output rows that are not all 32-byte aligned (the kernel's kSectors
  // epilogue); CONVBANK_CUDA_SS_SECTORS=0 turns them off (read once).
  static const bool sectors_off = env_off("CONVBANK_CUDA_SS_SECTORS");
  const bool sectors =
      !kD2s && !sectors_off &&
      !(reinterpret_cast<std::uintptr_t>(a.y) % 32 == 0 && a.y_cs % 8 == 0 && a.y_bs % 8 == 0);
  if (half) {
    if (sectors) {
      if (co_tile == 128) {
        conv1d_wgmma_ss_kernel<kT, 128, false, true, kSsStages, true>
            <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
      } else {
        conv1d_wgmma_ss_kernel<kT, 64, false, true, kSsStages, true>
            <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
      }
    } else if (co_tile == 128) {
      conv1d_wgmma_ss_kernel<kT, 128, kD2s, false, kSsStages, true>
          <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
    } else {
      conv1d_wgmma_ss_kernel<kT, 64, kD2s, false, kSsStages, true>
          <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
    }
    g_ss_half_launches.fetch_add(1, std::memory_order_relaxed);
    if (a.warp_scale) g_ss_warp_scale_launches.fetch_add(1, std::memory_order_relaxed);
  } else if (geo.stages != kSsStages) {
    // Two stages (never for depth-to-space: ss_plan), with the plain epilogue (the sector stores
    // are not worth two more instantiations for these layers).
    if (co_tile == 128) {
      conv1d_wgmma_ss_kernel<kT, 128, false, false, 2>
          <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
    } else {
      conv1d_wgmma_ss_kernel<kT, 64, false, false, 2>
          <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
    }
    g_ss_two_stages.fetch_add(1, std::memory_order_relaxed);
  } else if (sectors) {
    if (co_tile == 128) {
      conv1d_wgmma_ss_kernel<kT, 128, false, true>
          <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
    } else {
      conv1d_wgmma_ss_kernel<kT, 64, false, true>
          <<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
    }
  } else if (co_tile == 128) {
    conv1d_wgmma_ss_kernel<kT, 128, kD2s><<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
  } else {
    conv1d_wgmma_ss_kernel<kT, 64, kD2s><<<grid, kSsThreads, geo.smem, stream>>>(a, flag, x_map);
  }
  check_launch(name, shape);
  ws.free("tensor-core weight planes");
}

template <bool kT, bool kP>
void launch(WgArgs a, cudaStream_t stream, const char* name, const LaunchShape& shape) {
  a.transposed = kT;
  const int co_tile =
      wgmma_ss_tile(a.stride, a.taps, a.dilation, a.cout_g, ss_aligned(a.in_offset));
  if (!kP && co_tile != 0) {
    launch_ss<kT>(a, co_tile, stream, name, shape);
    return;
  }
  set_alignment(a);
  a.cols = kWgCols;
  a.ci_chunk = ci_chunk_for(a.taps);
  a.rt = a.taps * a.ci_chunk;
  a.nchunks = (a.cin_g + a.ci_chunk - 1) / a.ci_chunk;
  set_span(a, span_for(a.stride, a.dilation, a.taps));
  a.pitch = pitch_for(a.span);
  a.t_tiles = ((a.out_frames + a.phases - 1) / a.phases + kWgRows - 1) / kWgRows;
  a.n_tiles = (a.cout_g + kWgCols - 1) / kWgCols;
  int* flag = nullptr;
  Workspace ws = split_weights(a, flag, stream, shape);
  const std::size_t bytes = smem_bytes(a.taps, a.stride, a.dilation);
  const dim3 grid(grid_dim(a.t_tiles * a.n_tiles * a.phases, kMaxGridX), 1,
                  grid_dim(a.bg_count, kMaxGridYZ));
  // Three blocks per multiprocessor where their shared memory fits (registers capped at 168,
  // no spill): the kernel is latency-bound, and 12 warps instead of 8 measured 4.64 vs 5.61 ms
  // on seedA and 8.64 vs 10.18 ms on seedB.
  if (3 * (bytes + 1024) <= 228 * 1024) {
    conv1d_wgmma_3xtf32_kernel<kT, kP, 3><<<grid, kWgThreads, bytes, stream>>>(a, flag);
  } else {
    conv1d_wgmma_3xtf32_kernel<kT, kP, 1><<<grid, kWgThreads, bytes, stream>>>(a, flag);
  }
  check_launch(name, shape);
  ws.free("tensor-core weight planes");
}

WgArgs common_args(TensorView<const float> x, const float* w, const float* bias,
                   TensorView<float> y, std::int64_t batch, std::int64_t groups,
                   std::int64_t in_channels, std::int64_t out_channels, std::int64_t taps,
                   std::int64_t dilation) {
  WgArgs a{};
  set_views(a, x, w, bias, y);
  a.groups = groups;
  a.bg_count = batch * groups;
  a.cin_g = static_cast<int>(in_channels / groups);
  a.cout_g = static_cast<int>(out_channels / groups);
  a.taps = static_cast<int>(taps);
  a.dilation = static_cast<int>(dilation);
  a.in_frames = x.frames();
  a.out_frames = y.frames();
  a.w_gs = std::int64_t{a.cin_g} * a.cout_g * taps;
  a.phases = 1;
  a.d2s = 1;
  return a;
}

}  // namespace

// The SS kernel takes the stride-1 convolutions (after the space-to-depth and depth-to-space
// rewrites) whose planes fit. At K = 1 only where its chunk holds 32 channels (4 steps per
// barrier), which needs the aligned geometry (no copy slack: span 128): there it measured
// faster than the register-fragment kernel (tcn_pointwise 0.726 / 0.721 vs 0.766 / 0.756 ms,
// 256 -> 256 0.722 / 0.719 vs 0.774 / 0.779), with 16 channels slower (0.882 vs 0.768).
// Where three stages fit neither tile at 8 channels per chunk (K >= 4 at dilations whose
// windows or rows are long, 14-16 taps), two stages (ss_plan).
// CONVBANK_CUDA_WGMMA_SS=0 keeps the register-fragment kernel everywhere, and
// CONVBANK_CUDA_WGMMA_SS_TILE=64|128 forces the SS kernel and its tile, K = 1 included (A/B
// runs).
int wgmma_ss_tile(std::int64_t stride, std::int64_t taps, std::int64_t dilation,
                  std::int64_t cout_g, bool aligned, bool d2s) {
  static const bool off = env_off("CONVBANK_CUDA_WGMMA_SS");
  static const int forced = env_int("CONVBANK_CUDA_WGMMA_SS_TILE");
  // Dilations past 1024 only with windows per tap (any dilation fits those).
  if (off || stride != 1 || taps < 1 || taps > kSsMaxTaps || dilation > kSsMaxDilation) return 0;
  const bool force = forced == 64 || forced == 128;
  const auto pick = [&](int stages) {
    const auto geometry = [&](int tile) {
      return ss_geometry(tile, static_cast<int>(taps), static_cast<int>(dilation), aligned, stages);
    };
    const auto fits = [&](int tile) {
      const SsGeometry g = geometry(tile);
      if (taps == 1 && g.ci_chunk < 32 && !force) return false;
      return g.smem <= kWgMaxSmem && g.span < (1 << 14);
    };
    const int tile = force ? forced : cout_g > 64 ? 128 : 64;
    if (fits(tile)) return tile;
    // Long kernels (9-13 taps) and wide spans: the 64-row tile's weight stages are half the
    // 128-row tile's.
    if (!force && tile == 128 && fits(64)) return 64;
    // Large dilations: the 128-frame tiles' windows per tap fit where 256 contiguous frames plus
    // the dilations do not (measured only with windows: 16 x 64 -> 64, K 3, dilation 512, 0.385
    // vs 0.90 ms on the register-fragment kernel).
    return !force && tile == 64 && geometry(128).window > 0 && fits(128) ? 128 : 0;
  };
  // Three stages on either tile before two (ss_plan gives a launch of the tile chosen here the
  // same stages).
  const int tile = pick(kSsStages);
  if (tile != 0 || !ss_two_stages_allowed(static_cast<int>(taps), d2s)) return tile;
  return pick(2);
}

bool wgmma_ss_half(std::int64_t taps, std::int64_t dilation, int co_tile, bool aligned,
                   std::int64_t batch_groups, std::int64_t rows, std::int64_t frames, bool d2s) {
  if (co_tile == 0 || taps > 4) return false;
  const std::int64_t frames_per_tile = ss_block_frames(co_tile);
  const std::int64_t tiles = batch_groups * ((frames + frames_per_tile - 1) / frames_per_tile) *
                             ((rows + co_tile - 1) / co_tile);
  const int k = static_cast<int>(taps);
  return ss_half_fits(ss_plan(co_tile, k, static_cast<int>(dilation), aligned, d2s, true), k) &&
         ss_half_wins(co_tile, k, rows, tiles);
}

void set_ss_half_policy(WgmmaPolicy policy) {
  g_ss_half.store(policy, std::memory_order_relaxed);
}
WgmmaPolicy ss_half_policy() {
  return g_ss_half.load(std::memory_order_relaxed);
}
std::uint64_t ss_half_launches() {
  return g_ss_half_launches.load(std::memory_order_relaxed);
}

std::uint64_t ss_warp_scale_launches() {
  return g_ss_warp_scale_launches.load(std::memory_order_relaxed);
}

bool wgmma_available() {
  return device_is_sm90() && kernel_loaded<false, false>();
}

SsInputCopies ss_input_copies() {
  SsInputCopies c;
  c.pieces = g_ss_input_copies[kTmaNone].load(std::memory_order_relaxed);
  c.rows = g_ss_input_copies[kTmaRows].load(std::memory_order_relaxed);
  c.quads = g_ss_input_copies[kTmaQuads].load(std::memory_order_relaxed);
  c.rows_split = g_ss_input_split[kTmaRows].load(std::memory_order_relaxed);
  c.quads_split = g_ss_input_split[kTmaQuads].load(std::memory_order_relaxed);
  c.max_parts = g_ss_input_max_parts.load(std::memory_order_relaxed);
  c.windowed = g_ss_input_windowed.load(std::memory_order_relaxed);
  c.two_stages = g_ss_two_stages.load(std::memory_order_relaxed);
  return c;
}

bool conv1d_wgmma_supported(const Conv1dParams& p) {
  return device_is_sm90() && p.padding_mode == PaddingMode::kZeros &&
         shape_fits(p.in_channels / p.groups, p.out_channels / p.groups, p.kernel_size, p.stride,
                    p.dilation, conv1d_ss_tile(p) != 0) &&
         kernel_loaded<false, false>();
}

bool conv_transpose1d_wgmma_supported(const ConvTranspose1dParams& p) {
  // At stride s > 1: s phase convolutions of K / s taps (dilation 1, K a multiple of s).
  const bool phased = p.stride > 1;
  if (phased && (p.dilation != 1 || p.kernel_size % p.stride != 0 || p.stride > 64)) return false;
  return device_is_sm90() &&
         shape_fits(p.in_channels / p.groups, p.out_channels / p.groups,
                    phased ? p.kernel_size / p.stride : p.kernel_size, 1, p.dilation,
                    !phased && conv_transpose1d_ss_tile(p) != 0) &&
         (phased ? kernel_loaded<true, true>() : kernel_loaded<true, false>());
}

int conv1d_ss_tile(const Conv1dParams& p) {
  return wgmma_ss_tile(p.stride, p.kernel_size, p.dilation, p.out_channels / p.groups,
                       ss_aligned(-p.pad_left));
}
bool conv1d_ss_half(const Conv1dParams& p) {
  return wgmma_ss_half(p.kernel_size, p.dilation, conv1d_ss_tile(p), ss_aligned(-p.pad_left),
                       p.batch * p.groups, p.out_channels / p.groups, p.out_frames);
}

namespace {

// shown: the layer that errors name (space-to-depth runs p in its place).
// half_ok: the launch may take 3xFP16 (the tap groups' launches do not: their kernel name says
// 3xTF32).
void launch_conv1d_wgmma_as(const Conv1dParams& p, TensorView<const float> x, const float* w,
                            const float* bias, TensorView<float> y, cudaStream_t stream,
                            const char* name, const LaunchShape& shown, bool half_ok = true) {
  WgArgs a = common_args(x, w, bias, y, p.batch, p.groups, p.in_channels, p.out_channels,
                         p.kernel_size, p.dilation);
  a.half_ok = half_ok;
  a.stride = static_cast<int>(p.stride);
  a.in_offset = -p.pad_left;
  a.w_co = std::int64_t{a.cin_g} * p.kernel_size;
  a.w_ci = p.kernel_size;
  launch<false, false>(a, stream, name, shown);
}

}  // namespace

void launch_conv1d_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                         const float* bias, TensorView<float> y, cudaStream_t stream,
                         const char* name) {
  launch_conv1d_wgmma_as(p, x, w, bias, y, stream, name, p);
}

namespace {

void launch_conv_transpose1d_wgmma_as(const ConvTranspose1dParams& p, TensorView<const float> x,
                                      const float* w, const float* bias, TensorView<float> y,
                                      cudaStream_t stream, const char* name, bool half_ok) {
  WgArgs a = common_args(x, w, bias, y, p.batch, p.groups, p.in_channels, p.out_channels,
                         p.kernel_size / p.stride, p.dilation);
  a.half_ok = half_ok;
  a.stride = 1;
  a.in_offset = transposed_in_offset(p);
  a.phases = static_cast<int>(p.stride);
  a.pad = p.padding;
  a.w_gs = std::int64_t{a.cin_g} * a.cout_g * p.kernel_size;
  a.w_co = p.kernel_size;
  a.w_ci = std::int64_t{a.cout_g} * p.kernel_size;
  if (a.phases > 1) {
    launch<true, true>(a, stream, name, p);
  } else {
    launch<true, false>(a, stream, name, p);
  }
}

}  // namespace

void launch_conv_transpose1d_wgmma(const ConvTranspose1dParams& p, TensorView<const float> x,
                                   const float* w, const float* bias, TensorView<float> y,
                                   cudaStream_t stream, const char* name) {
  launch_conv_transpose1d_wgmma_as(p, x, w, bias, y, stream, name, true);
}

// ---- tap groups: a stride-1 convolution as convolutions of fewer taps -------------------------
//
// Taps f .. f + G - 1 of a Conv1d read input frame t + k d - pad_left (k >= f): a convolution
// of G taps whose padding on the left is pad_left - f d (negative past the input's start); those
// of a stride-1 ConvTranspose1d read frame t + padding - k d, one of G taps with padding
// padding - f d. So a layer whose K taps the SS kernel's stages do not hold (large dilations,
// more than 16 taps) is the sum of n convolutions of consecutive taps that they do hold, the
// fewest such n. On the H200 (log step 89 in docs/performance.md), K 6 at dilation 150 went
// from 3.82 ms on the register-fragment kernel to 1.66 (cuDNN fp32 2.61), K 9 at dilation 128
// from 4.16 on GEMM v2 to 2.09 (cuDNN 3.83), K 31 from 7.57 to 2.30 (cuDNN 9.62). The first
// group writes the output, with the bias; each other group writes a workspace that a small
// kernel adds to the output. NaN and Inf come through the sums as through the direct one's.
// Groups differ by at most one tap.

namespace {

constexpr int kMaxTapGroups = 4;

struct TapGroup {
  std::int64_t first, taps;
};
TapGroup tap_group(std::int64_t taps, int n, int g) {
  const std::int64_t base = taps / n, extra = taps % n;
  return {g * base + std::min<std::int64_t>(g, extra), base + (g < extra ? 1 : 0)};
}
Conv1dParams tap_group_params(const Conv1dParams& p, const TapGroup& tg) {
  Conv1dParams q = p;
  q.kernel_size = tg.taps;
  q.pad_left = p.pad_left - tg.first * p.dilation;
  return q;
}
ConvTranspose1dParams tap_group_params(const ConvTranspose1dParams& p, const TapGroup& tg) {
  ConvTranspose1dParams q = p;
  q.kernel_size = tg.taps;
  q.padding = p.padding - tg.first * p.dilation;
  return q;
}
int ss_tile_of(const Conv1dParams& p) {
  return conv1d_ss_tile(p);
}
int ss_tile_of(const ConvTranspose1dParams& p) {
  return conv_transpose1d_ss_tile(p);
}
bool zeros_padding(const Conv1dParams& p) {
  return p.padding_mode == PaddingMode::kZeros;
}
bool zeros_padding(const ConvTranspose1dParams&) {
  return true;
}
// Rows of K taps in the weights: [out][in / groups][K] and [in][out / groups][K].
std::int64_t weight_rows(const Conv1dParams& p) {
  return p.out_channels * (p.in_channels / p.groups);
}
std::int64_t weight_rows(const ConvTranspose1dParams& p) {
  return p.in_channels * (p.out_channels / p.groups);
}

// y[b][c][t] += src[b][c][t] (src dense).
__global__ void add_into_kernel(float* y, std::int64_t y_bs, std::int64_t y_cs, const float* src,
                                std::int64_t channels, std::int64_t frames, std::int64_t rows) {
  for (std::int64_t row = blockIdx.z; row < rows; row += gridDim.z) {
    float* yr = y + row / channels * y_bs + row % channels * y_cs;
    const float* sr = src + row * frames;
    for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < frames;
         t += std::int64_t{gridDim.x} * blockDim.x) {
      yr[t] += __ldcs(sr + t);
    }
  }
}

// CONVBANK_CUDA_TAP_GROUPS=0 turns them off (read once): such layers take the register-fragment
// kernel or the FFMA kernels, as before.
template <class P>
int tap_groups(const P& p) {
  static const bool off = env_off("CONVBANK_CUDA_TAP_GROUPS");
  if (off || p.stride != 1 || p.kernel_size < 2 || !zeros_padding(p) || ss_tile_of(p) != 0) {
    return 0;
  }
  for (int n = 2; n <= kMaxTapGroups && n <= p.kernel_size; ++n) {
    bool fit = true;
    for (int g = 0; g < n && fit; ++g) {
      fit = ss_tile_of(tap_group_params(p, tap_group(p.kernel_size, n, g))) != 0;
    }
    if (fit) return n;
  }
  return 0;
}

template <class P>
int tap_groups_ss_tile(const P& p) {
  const int n = tap_groups(p);
  return n == 0 ? 0 : ss_tile_of(tap_group_params(p, tap_group(p.kernel_size, n, 0)));
}

template <bool kT, class P>
bool tap_groups_supported(const P& p) {
  const int n = tap_groups(p);
  return n != 0 && device_is_sm90() &&
         shape_fits(p.in_channels / p.groups, p.out_channels / p.groups,
                    tap_group(p.kernel_size, n, 0).taps, 1, p.dilation, true) &&
         kernel_loaded<kT, false>();
}

// Batch items [b0, b0 + n) of v.
template <class T>
TensorView<T> batch_slice(TensorView<T> v, std::int64_t b0, std::int64_t n) {
  return TensorView<T>(v.data() + b0 * v.batch_stride(), Shape{n, v.channels(), v.frames()},
                       v.batch_stride(), v.channel_stride(), Device::kCuda);
}

std::atomic<std::size_t> g_tap_groups_cap{std::size_t{1} << 30};

// launch(q, x, w, bias, y): the stride-1 tensor-core launch of group q. The groups' partial
// outputs take a workspace of at most tap_groups_workspace_cap() bytes (one batch item's at
// least): larger layers run in batch slices.
template <class P, class Launch>
void launch_tap_groups(const P& p, TensorView<const float> x, const float* w, const float* bias,
                       TensorView<float> y, cudaStream_t stream, Launch&& launch) {
  const int n = tap_groups(p);
  const std::int64_t item_floats = p.out_channels * p.out_frames;
  const std::int64_t cap_floats =
      static_cast<std::int64_t>(g_tap_groups_cap.load(std::memory_order_relaxed) / sizeof(float));
  const std::int64_t per_slice = std::max<std::int64_t>(1, cap_floats / item_floats);
  const std::int64_t slices = (p.batch + per_slice - 1) / per_slice;
  const std::int64_t slice = (p.batch + slices - 1) / slices;
  const std::int64_t w_rows = weight_rows(p);
  const std::int64_t w_floats = w_rows * tap_group(p.kernel_size, n, 0).taps;
  Workspace ws(static_cast<std::size_t>(slice * item_floats + w_floats) * sizeof(float), stream,
               "tap groups' outputs and weights");
  float* part = ws.floats();
  float* wg = part + slice * item_floats;
  for (int g = 0; g < n; ++g) {
    const TapGroup tg = tap_group(p.kernel_size, n, g);
    check_cuda(
        cudaMemcpy2DAsync(wg, sizeof(float) * tg.taps, w + tg.first, sizeof(float) * p.kernel_size,
                          sizeof(float) * tg.taps, w_rows, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpy2DAsync (tap group weights)");
    for (std::int64_t b0 = 0; b0 < p.batch; b0 += slice) {
      const std::int64_t nb = std::min(slice, p.batch - b0);
      P q = tap_group_params(p, tg);
      q.batch = nb;
      const TensorView<float> ys = batch_slice(y, b0, nb);
      if (g == 0) {
        launch(q, batch_slice(x, b0, nb), wg, bias, ys);
        continue;
      }
      const TensorView<float> pv(part, Shape{nb, p.out_channels, p.out_frames}, Device::kCuda);
      launch(q, batch_slice(x, b0, nb), wg, nullptr, pv);
      const std::int64_t rows = nb * p.out_channels;
      const dim3 grid(grid_dim((p.out_frames + 1023) / 1024, kMaxGridX), 1,
                      grid_dim(rows, kMaxGridYZ));
      add_into_kernel<<<grid, 256, 0, stream>>>(ys.data(), ys.batch_stride(), ys.channel_stride(),
                                                part, p.out_channels, p.out_frames, rows);
      check_launch("tap_groups_add", p);
    }
  }
  ws.free("tap groups' outputs and weights");
}

}  // namespace

void set_tap_groups_workspace_cap(std::size_t bytes) {
  g_tap_groups_cap.store(bytes, std::memory_order_relaxed);
}
std::size_t tap_groups_workspace_cap() {
  return g_tap_groups_cap.load(std::memory_order_relaxed);
}

int conv1d_tap_groups_ss_tile(const Conv1dParams& p) {
  return tap_groups_ss_tile(p);
}
bool conv1d_tap_groups_supported(const Conv1dParams& p) {
  return tap_groups_supported<false>(p);
}
void launch_conv1d_tap_groups_wgmma(const Conv1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name) {
  launch_tap_groups(p, x, w, bias, y, stream,
                    [&](const Conv1dParams& q, TensorView<const float> xq, const float* wq,
                        const float* bq, TensorView<float> yq) {
                      launch_conv1d_wgmma_as(q, xq, wq, bq, yq, stream, name, p, false);
                    });
}

int conv_transpose1d_tap_groups_ss_tile(const ConvTranspose1dParams& p) {
  return tap_groups_ss_tile(p);
}
bool conv_transpose1d_tap_groups_supported(const ConvTranspose1dParams& p) {
  return tap_groups_supported<true>(p);
}
void launch_conv_transpose1d_tap_groups_wgmma(const ConvTranspose1dParams& p,
                                              TensorView<const float> x, const float* w,
                                              const float* bias, TensorView<float> y,
                                              cudaStream_t stream, const char* name) {
  launch_tap_groups(p, x, w, bias, y, stream,
                    [&](const ConvTranspose1dParams& q, TensorView<const float> xq, const float* wq,
                        const float* bq, TensorView<float> yq) {
                      launch_conv_transpose1d_wgmma_as(q, xq, wq, bq, yq, stream, name, false);
                    });
}

// ---- depth-to-space: a strided ConvTranspose1d as one stride-1 convolution ---------------------
//
// With o + padding = q s + p (0 <= p < s), y[co][o] = sum_ci sum_j x[ci][q - j] w[ci][co][p + j s]
// over the T = ceil(K / s) taps j with p + j s < K. For every phase p the inputs are the same
// window x[q - T + 1 .. q], so the s phases are s x out/groups output channels of one stride-1
// convolution of T taps over q: their tile fills the tensor cores where one phase's few
// channels would not (STFT-like synthesis: 1 channel x 128 phases), and the input is read once
// for all phases. The epilogue writes each (channel, phase) row to every s-th output frame
// (WgArgs::d2s); K need not be a multiple of s (the taps past K are zero weights).

std::int64_t d2s_taps(const ConvTranspose1dParams& p) {
  return (p.kernel_size + p.stride - 1) / p.stride;
}

namespace {

// Input frame of output q0 = floor(padding / s) (the first with an output at o >= 0), tap 0.
std::int64_t d2s_in_offset(const ConvTranspose1dParams& p) {
  return p.padding / p.stride - (d2s_taps(p) - 1);
}

}  // namespace

int conv_transpose1d_ss_tile(const ConvTranspose1dParams& p) {
  const std::int64_t cout_g = p.out_channels / p.groups;
  if (p.stride == 1) {
    return wgmma_ss_tile(1, p.kernel_size, p.dilation, cout_g, ss_aligned(transposed_in_offset(p)));
  }
  return wgmma_ss_tile(1, d2s_taps(p), 1, p.stride * cout_g, ss_aligned(d2s_in_offset(p)), true);
}
bool conv_transpose1d_ss_half(const ConvTranspose1dParams& p) {
  const int tile = conv_transpose1d_ss_tile(p);
  const std::int64_t bg = p.batch * p.groups, cout_g = p.out_channels / p.groups;
  if (p.stride == 1) {
    return wgmma_ss_half(p.kernel_size, p.dilation, tile, ss_aligned(transposed_in_offset(p)), bg,
                         cout_g, p.out_frames);
  }
  // The depth-to-space convolution's rows and frames (launch_conv_transpose1d_d2s_wgmma).
  const std::int64_t s = p.stride;
  return wgmma_ss_half(d2s_taps(p), 1, tile, ss_aligned(d2s_in_offset(p)), bg, s * cout_g,
                       (p.out_frames - 1 + p.padding) / s - p.padding / s + 1, true);
}

bool conv_transpose1d_d2s_supported(const ConvTranspose1dParams& p) {
  const std::int64_t taps = d2s_taps(p), rows = p.stride * (p.out_channels / p.groups);
  if (p.stride < 2 || p.dilation != 1 || taps < 2 || taps > kWgMaxTaps ||
      p.in_channels / p.groups < 8 || rows < 32 || rows > (1 << 16)) {
    return false;
  }
  return device_is_sm90() && conv_transpose1d_ss_tile(p) != 0 && kernel_loaded<true, false>();
}

void launch_conv_transpose1d_d2s_wgmma(const ConvTranspose1dParams& p, TensorView<const float> x,
                                       const float* w, const float* bias, TensorView<float> y,
                                       cudaStream_t stream, const char* name) {
  const std::int64_t s = p.stride, taps = d2s_taps(p);
  WgArgs a =
      common_args(x, w, bias, y, p.batch, p.groups, p.in_channels, p.out_channels * s, taps, 1);
  const std::int64_t cout_g = p.out_channels / p.groups;
  a.transposed = true;
  a.stride = 1;
  a.d2s = static_cast<int>(s);
  a.d2s_k = static_cast<int>(p.kernel_size);
  a.d2s_q0 = p.padding / s;  // the first q with an output at o >= 0
  a.pad = p.padding;
  a.y_frames = p.out_frames;
  a.out_frames = (p.out_frames - 1 + p.padding) / s - a.d2s_q0 + 1;
  a.in_offset = d2s_in_offset(p);
  a.w_gs = std::int64_t{a.cin_g} * cout_g * p.kernel_size;
  a.w_co = p.kernel_size;
  a.w_ci = cout_g * p.kernel_size;
  a.half_ok = true;
  launch_ss<true, true>(a, conv_transpose1d_ss_tile(p), stream, name, p);
}

}  // namespace convbank::detail::cuda

// ---- space-to-depth: strided Conv1d with few input channels on the tensor-core kernel ----------
//
// A Conv1d of stride s whose kernel is T whole strides long (K = T s, dilation 1) is a
// stride-1 Conv1d of T taps over s * in_channels channels:
//   x'[b][c s + r][q] = xpad[b][c][q s + r - pad],   w'[o][c s + r][m] = w[o][c][m s + r],
// where xpad is the input as the padding mode presents it. One-channel encoders (STFT-like
// analysis, 1 -> 514, K 512, s 128) then have a 128-deep reduction per tap, and strided
// downsampling layers (128 -> 256, K 4, s 2) run on the shared-memory-operand kernel instead
// of the register-fragment one. Groups stay groups: channel c's s rows lie in c's group.
// K must be whole strides: a zero weight for a tap past K would still multiply an input that
// may be Inf, and make NaN where PyTorch has none. x' (the input's size) and w' live in a
// stream-ordered workspace from convbank's pool.

namespace convbank::detail::cuda {

namespace {

constexpr int kS2dTile = 32;

struct S2dArgs {
  const float* x;
  std::int64_t x_bs, x_cs, in_frames;
  float* xs;                              // x': [batch][cin * s][pitch]
  std::int64_t frames, pitch, pad, rows;  // frames of x' per row; rows = batch * cin
  int cin, s, mode;
};

// x' from x, one 32 x 32 tile of (q, r) per block through shared memory: the reads run along
// the input (r fastest), the writes along the rows of x' (q fastest).
__global__ void __launch_bounds__(kS2dTile * 8) s2d_input_kernel(S2dArgs a) {
  __shared__ float tile[kS2dTile][kS2dTile + 1];
  const int tx = threadIdx.x % kS2dTile, ty = threadIdx.x / kS2dTile;
  const std::int64_t q0 = std::int64_t{blockIdx.x} * kS2dTile;
  const int r0 = static_cast<int>(blockIdx.y) * kS2dTile;
  for (std::int64_t row = blockIdx.z; row < a.rows; row += gridDim.z) {
    const std::int64_t b = row / a.cin, c = row - b * a.cin;
    const float* xr = a.x + b * a.x_bs + c * a.x_cs;
    __syncthreads();                          // the previous row's tile is read
    for (int i = ty; i < kS2dTile; i += 8) {  // i: q in the tile; tx: r
      const std::int64_t pos = (q0 + i) * a.s + r0 + tx - a.pad;
      tile[i][tx] = r0 + tx < a.s ? load_padded(xr, pos, a.in_frames, a.mode) : 0.0f;
    }
    __syncthreads();
    float* out = a.xs + row * a.s * a.pitch;
    for (int i = ty; i < kS2dTile; i += 8) {  // i: r in the tile; tx: q
      const std::int64_t q = q0 + tx;
      if (r0 + i < a.s && q < a.frames) out[(r0 + i) * a.pitch + q] = tile[tx][i];
    }
  }
}

// Strides narrower than the tile above, which would leave most of its 32 r columns idle (at
// s = 2, 1/16 of the block worked and x_strided's x' took longer than the convolution): one
// thread per frame q of x', looping over the s rows. A warp's loads for one r touch s
// consecutive lines, which its next r reads again from L1; the stores are whole rows.
constexpr int kS2dNarrowThreads = 256;
__global__ void __launch_bounds__(kS2dNarrowThreads) s2d_input_narrow_kernel(S2dArgs a) {
  const std::int64_t q = blockIdx.x * std::int64_t{kS2dNarrowThreads} + threadIdx.x;
  if (q >= a.frames) return;
  const std::int64_t first = q * a.s - a.pad;
  for (std::int64_t row = blockIdx.z; row < a.rows; row += gridDim.z) {
    const std::int64_t b = row / a.cin, c = row - b * a.cin;
    const float* xr = a.x + b * a.x_bs + c * a.x_cs;
    float* out = a.xs + row * a.s * a.pitch + q;
#pragma unroll 4
    for (int r = 0; r < a.s; ++r)
      out[r * a.pitch] = load_padded(xr, first + r, a.in_frames, a.mode);
  }
}

// w'[o][c s + r][m] = w[o][c][m s + r], c within o's group: one thread per element of w'.
__global__ void s2d_weight_kernel(const float* w, float* ws, std::int64_t total, int cin_g, int s,
                                  int taps) {
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const int m = static_cast<int>(e % taps);
    const std::int64_t cr = e / taps % (std::int64_t{cin_g} * s);
    const std::int64_t o = e / taps / (std::int64_t{cin_g} * s);
    const std::int64_t c = cr / s, r = cr - c * s;
    ws[e] = w[(o * cin_g + c) * (std::int64_t{taps} * s) + m * s + r];
  }
}

// The stride-1 convolution the layer becomes.
Conv1dParams s2d_params(const Conv1dParams& p) {
  Conv1dParams q = p;
  q.in_channels = p.in_channels * p.stride;
  q.kernel_size = p.kernel_size / p.stride;
  q.stride = 1;
  q.pad_left = 0;
  q.pad_right = 0;
  q.padding_mode = PaddingMode::kZeros;  // x' holds the padding
  q.in_frames = p.out_frames + q.kernel_size - 1;
  return q;
}

}  // namespace

int conv1d_s2d_ss_tile(const Conv1dParams& p) {
  return conv1d_ss_tile(s2d_params(p));
}
bool conv1d_s2d_ss_half(const Conv1dParams& p) {
  return conv1d_ss_half(s2d_params(p));
}

bool conv1d_s2d_supported(const Conv1dParams& p) {
  if (p.dilation != 1 || p.stride < 2 || p.kernel_size % p.stride != 0 ||
      p.in_channels * p.stride > 4096) {
    return false;
  }
  return conv1d_wgmma_supported(s2d_params(p));
}

void launch_conv1d_s2d_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                             const float* bias, TensorView<float> y, cudaStream_t stream,
                             const char* name) {
  const Conv1dParams q = s2d_params(p);
  // Rows of x' padded to 4 floats: the tensor-core kernel copies 16-byte aligned rows whole.
  const std::int64_t pitch = (q.in_frames + 3) / 4 * 4;
  const std::size_t x_floats = static_cast<std::size_t>(q.batch * q.in_channels * pitch);
  const std::size_t w_floats = static_cast<std::size_t>(q.out_channels * q.in_channels / q.groups) *
                               static_cast<std::size_t>(q.kernel_size);
  Workspace ws((x_floats + w_floats) * sizeof(float), stream, "space-to-depth input and weights");
  float* xs = ws.floats();
  float* wsp = xs + x_floats;
  S2dArgs a{};
  a.x = x.data();
  a.x_bs = x.batch_stride();
  a.x_cs = x.channel_stride();
  a.in_frames = p.in_frames;
  a.xs = xs;
  a.frames = q.in_frames;
  a.pitch = pitch;
  a.pad = p.pad_left;
  a.rows = p.batch * p.in_channels;
  a.cin = static_cast<int>(p.in_channels);
  a.s = static_cast<int>(p.stride);
  a.mode = to_pad_mode(p.padding_mode);
  if (p.stride < kS2dTile) {
    const dim3 grid(grid_dim((q.in_frames + kS2dNarrowThreads - 1) / kS2dNarrowThreads, kMaxGridX),
                    1, grid_dim(a.rows, kMaxGridYZ));
    s2d_input_narrow_kernel<<<grid, kS2dNarrowThreads, 0, stream>>>(a);
  } else {
    const dim3 grid(grid_dim((q.in_frames + kS2dTile - 1) / kS2dTile, kMaxGridX),
                    grid_dim((p.stride + kS2dTile - 1) / kS2dTile, kMaxGridYZ),
                    grid_dim(a.rows, kMaxGridYZ));
    s2d_input_kernel<<<grid, kS2dTile * 8, 0, stream>>>(a);
  }
  check_launch("s2d_input", p);
  const std::int64_t wn = static_cast<std::int64_t>(w_floats);
  s2d_weight_kernel<<<grid_dim((wn + 255) / 256, 4096), 256, 0, stream>>>(
      w, wsp, wn, static_cast<int>(p.in_channels / p.groups), a.s, static_cast<int>(q.kernel_size));
  check_launch("s2d_weights", p);
  const TensorView<const float> xv(xs, Shape{q.batch, q.in_channels, q.in_frames},
                                   q.in_channels * pitch, pitch, Device::kCuda);
  launch_conv1d_wgmma_as(q, xv, wsp, bias, y, stream, name, p);
  ws.free("space-to-depth input and weights");
}

}  // namespace convbank::detail::cuda
