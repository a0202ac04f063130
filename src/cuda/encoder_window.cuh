// What the one-channel encoders share (conv_memory.cu's FFMA encoders, conv_encoder_wgmma.cu's
// tensor-core one): their argument fields and the copy of an input window into shared memory,
// split into phase rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"

namespace convbank::detail::cuda {

// The argument fields the encoders share (set by set_encoder_args).
struct EncoderArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t batch, cout_g, groups, c_tiles, t_tiles;
  std::int64_t pad, in_frames, out_frames;
  int K, stride, mode;
  // i / stride == __umulhi(i, s_magic) for every window position i (stride >= 2): the staging
  // loop's integer division by a runtime value was about 20 instructions per word.
  unsigned s_magic;
  // copy_phase_window_inside's loop without the phase row's wrap where the stride divides the
  // threads (1: the local-order encoder, unless CONVBANK_CUDA_ENC_FIXED_PHASE=0; 0: always the
  // general loop).
  int fixed_phase;
};

void set_encoder_args(EncoderArgs& a, const Conv1dParams& p, TensorView<const float> x,
                      const float* w, const float* bias, TensorView<float> y);

// Words per phase row for a window of `window` positions split into `stride` rows
// (copy_phase_window's `row`): consecutive threads copy positions i .. i + 31 to rows i % s at
// columns i / s, so for strides that divide 32 a row length of 32 / s modulo 32 puts them on 32
// banks.
inline std::int64_t phase_row_words(std::int64_t window, std::int64_t stride) {
  std::int64_t words = (window + stride - 1) / stride;
  if (stride > 1 && 32 % stride == 0) {
    while (words % 32 != 32 / stride) ++words;
  }
  return words;
}

// Copies input positions pos0 .. pos0 + window - 1 of xrow into sx split into `stride` phase rows
// of `row` words (position i at (i % s) * row + i / s, so that lanes on consecutive frames read
// consecutive words of a phase row): asynchronously where they lie inside the row (the caller
// commits the group), the padding around it by plain stores. tid: the thread's index among the
// kThreads that share the copy.
template <int kThreads>
__device__ __forceinline__ void copy_phase_window(const EncoderArgs& a, const float* xrow,
                                                  std::int64_t pos0, int window, int row, float* sx,
                                                  int tid) {
  const int s = a.stride;
  for (int i = tid; i < window; i += kThreads) {
    const int q = s == 1 ? i : static_cast<int>(__umulhi(static_cast<unsigned>(i), a.s_magic));
    float* dst = sx + (i - q * s) * row + q;
    const std::int64_t pos = pos0 + i;
    if (static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames)) {
      cp_async4(smem_addr(dst), xrow + pos, true);
    } else {
      *dst = load_padded(xrow, pos, a.in_frames, a.mode);
    }
  }
}

// copy_phase_window for a window that lies inside its row (src: its first position): no bounds
// test, and each thread's phase row and column advanced by kThreads positions (kThreads = dq s +
// dr) instead of divided per word.
template <int kThreads>
__device__ __forceinline__ void copy_phase_window_inside(const EncoderArgs& a, const float* src,
                                                         int window, int row, float* sx, int tid) {
  const int s = a.stride;
  const auto quotient = [&](unsigned i) { return s == 1 ? i : __umulhi(i, a.s_magic); };
  const int dq = static_cast<int>(quotient(kThreads)), dr = kThreads - dq * s;
  const int q = static_cast<int>(quotient(tid));
  int r = tid - q * s;
  unsigned dst = smem_addr(sx + r * row + q);
  const unsigned step = 4u * static_cast<unsigned>(dr * row + dq);
  if (dr == 0 && a.fixed_phase) {
    // The stride divides kThreads: each thread stays on its phase row. The general loop below
    // took 54 instructions per 4 words on enc_tasnet (ncu, log step 127), a tenth of the kernel's.
    for (int i = tid; i < window; i += kThreads) {
      cp_async4(dst, src + i, true);
      dst += step;
    }
    return;
  }
  const unsigned wrap = 4u * static_cast<unsigned>(1 - s * row);
  for (int i = tid; i < window; i += kThreads) {
    cp_async4(dst, src + i, true);
    dst += step;
    r += dr;
    if (r >= s) {
      r -= s;
      dst += wrap;
    }
  }
}

}  // namespace convbank::detail::cuda
