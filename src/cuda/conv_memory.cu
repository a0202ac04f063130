// Kernels for layers bound by memory traffic rather than arithmetic: one-channel encoders
// (1 -> many), depthwise layers and many -> few decoders. Each moves every element of its big
// tensor once, in whole 128-byte lines, and keeps the arithmetic in registers:
//   conv1d_encoder_ffma          one input channel per group, >= 16 outputs per group: a block
//                                stages its input window once in shared memory, split into
//                                `stride` phase rows so that lanes on consecutive frames read
//                                consecutive words, and writes 128 frames x 64 channels.
//   conv1d_encoder_aligned_ffma  the same layers with >= 64 outputs per group, dilation 1: each
//                                thread stores 4 frames from a 16-byte boundary of their row
//                                as one float4; a block walks 1024-frame tiles of one channel
//                                tile, the next window copied while the current is computed.
//   conv1d_encoder_local_ffma    the same layers with K <= 32: persistent blocks take tiles of
//                                32 channels x 1024 frames (64 x 512 above K 16) with the frame
//                                tiles fastest (the resident blocks write neighbouring rows),
//                                the next tile's window copied while the current is computed;
//                                a tile's rows start at one offset in a 32-byte sector, its
//                                frames that far before the tile's boundary (whole sectors).
//   conv1d_depthwise_staged      one input channel per group, < 16 outputs per group: a block
//                                stages the window of 1024..4096 frames of one row.
//   conv_transpose1d_decoder_ffma  few outputs per group (decoders), stride 2..16, K a multiple
//                                of the stride: each lane reads 4 consecutive input frames of a
//                                channel and streams all channels, adding its register sums to
//                                running sums in shared memory every 32.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/encoder_window.cuh"

namespace convbank::detail::cuda {

namespace {

// ---- encoder ---------------------------------------------------------------------------------

constexpr int kEncThreads = 256;
constexpr int kEncWarps = kEncThreads / 32;
constexpr int kEncRows = 8;                   // output channels per warp
constexpr int kEncPerLane = 4;                // frames per lane, 32 apart
constexpr int kEncFrames = 32 * kEncPerLane;  // frames per block
constexpr int kEncCo = kEncWarps * kEncRows;  // output channels per block
// Dynamic shared memory a block may use without opting in (48 KB): weights, bias, tap offsets
// and the input window.
constexpr int kEncSmemFloats = 12288;

struct EncArgs : EncoderArgs {
  int dilation;
  int window, phase_len;  // staged window (floats) and its length per phase row
};

std::int64_t encoder_window(const Conv1dParams& p) {
  return (kEncFrames - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1;
}
std::int64_t encoder_phase_len(const Conv1dParams& p) {
  return (encoder_window(p) + p.stride - 1) / p.stride;
}
// Weights [K][CO], bias [CO], tap offsets [K] (ints), window [stride][phase_len].
std::int64_t encoder_smem_floats(const Conv1dParams& p) {
  return kEncCo * p.kernel_size + kEncCo + p.kernel_size + p.stride * encoder_phase_len(p);
}

// RC output channels per warp (a block: 8 * RC channels x 128 frames). Per tap a lane reads 4
// input words and RC / 4 broadcast float4 weights for 4 * RC multiply-adds. 8 channels per warp
// (64 registers, four blocks per multiprocessor) measured faster than 16 (two blocks) on
// enc_tasnet: 0.273 vs 0.297 ms.
//
// The kernel is bound by its instruction stream, not by its stores (ncu: issue slots 76 % busy,
// DRAM 41 %, 210 M instructions for 67 M multiply-adds before the changes below), so everything
// around the multiply-adds is kept lean: the staging divides by the stride with a multiply-high,
// each tap's window offset is read from a table, the bias is the accumulators' initial value,
// and whole tiles store through one pointer per lane without bounds checks.
__global__ void __launch_bounds__(kEncThreads, 4) conv1d_encoder_kernel(EncArgs a) {
  constexpr int RC = kEncRows;
  static_assert(RC % 4 == 0, "weights and bias are read as float4");
  constexpr int CO = kEncCo;
  extern __shared__ __align__(16) float sm[];
  float* sw = sm;                               // [K][CO]
  float* sb = sw + a.K * CO;                    // [CO]
  int* soff = reinterpret_cast<int*>(sb + CO);  // [K]: tap k's first word in sx
  float* sx = sb + CO + a.K;                    // [stride][phase_len]: position i at (i % s, i / s)
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int s = a.stride;
  // Tap k reads window position t * s + k * d: phase row (k * d) % s, column t + (k * d) / s.
  for (int k = tid; k < a.K; k += kEncThreads) {
    const int kd = k * a.dilation;
    soff[k] = (kd % s) * a.phase_len + kd / s;
  }
  for (std::int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
    for (std::int64_t gy = blockIdx.y; gy < a.groups * a.c_tiles; gy += gridDim.y) {
      const std::int64_t g = gy / a.c_tiles;
      const std::int64_t o0 = (gy - g * a.c_tiles) * CO;  // first channel of the tile, in group
      const float* xrow = a.x + b * a.x_bs + g * a.x_cs;
      const bool full_c = o0 + CO <= a.cout_g;
      __syncthreads();  // the previous tile's weights are no longer read
      for (int i = tid; i < CO * a.K; i += kEncThreads) {
        const int c = i / a.K;
        const int k = i - c * a.K;
        sw[k * CO + c] = o0 + c < a.cout_g ? __ldg(a.w + (g * a.cout_g + o0 + c) * a.K + k) : 0.0f;
      }
      for (int c = tid; c < CO; c += kEncThreads) {
        sb[c] =
            o0 + c < a.cout_g && a.bias != nullptr ? __ldg(a.bias + g * a.cout_g + o0 + c) : 0.0f;
      }
      for (std::int64_t tt = blockIdx.x; tt < a.t_tiles; tt += gridDim.x) {
        const std::int64_t t0 = tt * kEncFrames;
        const std::int64_t pos0 = t0 * s - a.pad;
        __syncthreads();  // the previous window is no longer read
        if (pos0 >= 0 && pos0 + a.window <= a.in_frames) {
          const float* src = xrow + pos0;
          for (int i = tid; i < a.window; i += kEncThreads) {
            const int q =
                s == 1 ? i : static_cast<int>(__umulhi(static_cast<unsigned>(i), a.s_magic));
            sx[(i - q * s) * a.phase_len + q] = __ldg(src + i);
          }
        } else {
          for (int i = tid; i < a.window; i += kEncThreads) {
            const int q =
                s == 1 ? i : static_cast<int>(__umulhi(static_cast<unsigned>(i), a.s_magic));
            sx[(i - q * s) * a.phase_len + q] = load_padded(xrow, pos0 + i, a.in_frames, a.mode);
          }
        }
        __syncthreads();
        float acc[RC][kEncPerLane];
#pragma unroll
        for (int c4 = 0; c4 < RC / 4; ++c4) {
          const float4 b4 = *reinterpret_cast<const float4*>(sb + warp * RC + 4 * c4);
#pragma unroll
          for (int j = 0; j < kEncPerLane; ++j) {
            acc[4 * c4 + 0][j] = b4.x;
            acc[4 * c4 + 1][j] = b4.y;
            acc[4 * c4 + 2][j] = b4.z;
            acc[4 * c4 + 3][j] = b4.w;
          }
        }
        const float* xl = sx + lane;
        const float* wk = sw + warp * RC;
#pragma unroll 2
        for (int k = 0; k < a.K; ++k) {
          const float* xk = xl + soff[k];
          float xv[kEncPerLane];
#pragma unroll
          for (int j = 0; j < kEncPerLane; ++j) xv[j] = xk[32 * j];
#pragma unroll
          for (int c4 = 0; c4 < RC / 4; ++c4) {
            const float4 w4 = *reinterpret_cast<const float4*>(wk + 4 * c4);
#pragma unroll
            for (int j = 0; j < kEncPerLane; ++j) {
              acc[4 * c4 + 0][j] = fmaf(w4.x, xv[j], acc[4 * c4 + 0][j]);
              acc[4 * c4 + 1][j] = fmaf(w4.y, xv[j], acc[4 * c4 + 1][j]);
              acc[4 * c4 + 2][j] = fmaf(w4.z, xv[j], acc[4 * c4 + 2][j]);
              acc[4 * c4 + 3][j] = fmaf(w4.w, xv[j], acc[4 * c4 + 3][j]);
            }
          }
          wk += CO;
        }
        const std::int64_t oc0 = g * a.cout_g + o0 + warp * RC;
        float* yp = a.y + b * a.y_bs + oc0 * a.y_cs + t0 + lane;
        if (full_c && t0 + kEncFrames <= a.out_frames) {
#pragma unroll
          for (int c = 0; c < RC; ++c) {
#pragma unroll
            for (int j = 0; j < kEncPerLane; ++j) yp[32 * j] = acc[c][j];
            yp += a.y_cs;
          }
        } else {
#pragma unroll
          for (int c = 0; c < RC; ++c) {
            if (o0 + warp * RC + c < a.cout_g) {
#pragma unroll
              for (int j = 0; j < kEncPerLane; ++j) {
                if (t0 + lane + 32 * j < a.out_frames) yp[32 * j] = acc[c][j];
              }
            }
            yp += a.y_cs;
          }
        }
      }
    }
  }
}

// ---- encoder, aligned stores -------------------------------------------------------------------
//
// The encoder above stores 4-byte words, 32 frames apart per lane: on rows of odd length (real
// audio) every warp store straddles two 128-byte lines. This one gives each thread 4 consecutive
// frames that start on a 16-byte boundary of their output row and stores them as one float4, so
// a warp writes 512 contiguous bytes per row. Which frames those are depends on the row's
// address modulo 16 bytes, which repeats every 4 channels: a tile's 64 channels are taken as 4
// classes of 16 rows (c, c + 4, ...) that share it. The input window, split into its `stride`
// phase rows, stays in shared memory; per phase and pair of taps a thread loads the words its 4
// frames need (float4, consecutive threads on consecutive words) and multiplies them with the
// class's 16 weights per tap (broadcast float4), 64 multiply-adds per tap. Evict-first stores
// (`__stcs`) measured faster than plain ones on every shape tried (enc_tasnet 0.27 vs 0.30 ms,
// K 16, s 4 0.44 vs 0.49). The dispatcher takes it only where it beat the encoder above (strides
// 2..4 with >= 2 taps per phase, log step 87 in docs/performance.md): at enc_tasnet's stride 8
// the 4-byte-store encoder stays faster (0.24 vs 0.27 ms), for reasons not profiled.

constexpr int kEnc2Threads = 256;
constexpr int kEnc2Frames = 4 * kEnc2Threads;  // frames per tile
constexpr int kEnc2Class = 16;                 // rows per class (one 16-byte alignment)
constexpr int kEnc2Co = 4 * kEnc2Class;        // channels per tile
// Dynamic shared memory of a block (weights, bias, two windows): two blocks per multiprocessor.
constexpr int kEnc2SmemFloats = 28000;

struct Enc2Args : EncoderArgs {
  int taps;    // taps of phase 0, ceil(K / stride): the most any phase has
  int row;     // words per phase row of the window
  int window;  // stride * row
};

std::int64_t encoder2_phase_taps(const Conv1dParams& p) {
  return (p.kernel_size + p.stride - 1) / p.stride;
}
// Tile tt covers frames [tt * 1024 - 4 + o, tt * 1024 + 1020 + o) of a class whose rows reach a
// 16-byte boundary o frames after a multiple of 4; its window starts at frame tt * 1024 - 4.
// Thread t reads phase words from 4 t + (a0 & ~3) up to 11 past it (offset, o, i and the second
// tap of a pair), so a row holds 1028 + 4 ceil(taps / 4) words.
std::int64_t encoder2_row(const Conv1dParams& p) {
  return kEnc2Frames + 4 + (encoder2_phase_taps(p) + 3) / 4 * 4;
}
std::int64_t encoder2_smem_floats(const Conv1dParams& p) {
  return p.stride * encoder2_phase_taps(p) * kEnc2Co + kEnc2Co + 2 * p.stride * encoder2_row(p);
}

// NA taps of one phase for the thread's 4 frames: frame i, tap a reads word E + i + a of xr
// (16-byte aligned; E = o plus the taps' offset from it), weight wr[a * 64 + j] for row j.
template <int O, int NA>
__device__ __forceinline__ void encoder2_taps(float (&acc)[kEnc2Class][4], const float* xr,
                                              const float* wr) {
  constexpr int kLoads = (O + 3 + NA + 3) / 4;
  float v[4 * kLoads];
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    const float4 q = *reinterpret_cast<const float4*>(xr + 4 * l);
    v[4 * l + 0] = q.x;
    v[4 * l + 1] = q.y;
    v[4 * l + 2] = q.z;
    v[4 * l + 3] = q.w;
  }
#pragma unroll
  for (int a = 0; a < NA; ++a) {
#pragma unroll
    for (int j4 = 0; j4 < kEnc2Class / 4; ++j4) {
      const float4 w4 = *reinterpret_cast<const float4*>(wr + a * kEnc2Co + 4 * j4);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float xv = v[O + i + a];
        acc[4 * j4 + 0][i] = fmaf(w4.x, xv, acc[4 * j4 + 0][i]);
        acc[4 * j4 + 1][i] = fmaf(w4.y, xv, acc[4 * j4 + 1][i]);
        acc[4 * j4 + 2][i] = fmaf(w4.z, xv, acc[4 * j4 + 2][i]);
        acc[4 * j4 + 3][i] = fmaf(w4.w, xv, acc[4 * j4 + 3][i]);
      }
    }
  }
}

// Every tap of one class, phase by phase (only taps that exist are multiplied, so an Inf input
// meets no zero weight).
template <int O>
__device__ __forceinline__ void encoder2_class(float (&acc)[kEnc2Class][4], const Enc2Args& a,
                                               const float* sx, const float* sw) {
#pragma unroll 1
  for (int r = 0; r < a.stride; ++r) {
    const int taps = (a.K - r + a.stride - 1) / a.stride;  // k = tap * stride + r < K
    const float* xr = sx + r * a.row;
    const float* wr = sw + r * a.taps * kEnc2Co;
    // Two taps at a time: their 32 broadcast weights and the thread's 8 or 12 words fit the
    // registers next to the 64 sums (four at a time made ptxas spill at 128 registers).
#pragma unroll 1
    for (int a0 = 0; a0 < taps; a0 += 2) {
      const float* xb = xr + (a0 & ~3);  // 16-byte aligned; the taps start at word a0 & 2
      const float* wb = wr + a0 * kEnc2Co;
      if (taps - a0 >= 2) {
        if (a0 & 2) {
          encoder2_taps<O + 2, 2>(acc, xb, wb);
        } else {
          encoder2_taps<O, 2>(acc, xb, wb);
        }
      } else if (a0 & 2) {
        encoder2_taps<O + 2, 1>(acc, xb, wb);
      } else {
        encoder2_taps<O, 1>(acc, xb, wb);
      }
    }
  }
}

// Copies the window of frame tile `bt` (batch-major) into `sx`, split into phase rows:
// asynchronously where it lies inside the row, the padding around it by plain stores (both are
// visible after the caller's wait and barrier).
__device__ __forceinline__ void encoder2_window(const Enc2Args& a, const float* xg, std::int64_t bt,
                                                float* sx) {
  const int s = a.stride;
  const std::int64_t b = bt / a.t_tiles;
  const std::int64_t pos0 = (bt - b * a.t_tiles) * kEnc2Frames * s - 4 * s - a.pad;
  copy_phase_window<kEnc2Threads>(a, xg + b * a.x_bs, pos0, a.window, a.row, sx, threadIdx.x);
  cp_async_commit();
}

// A block keeps one channel tile's weights and walks frame tiles (all batches), the next tile's
// window arriving by asynchronous copies while the current one is computed and stored.
__global__ void __launch_bounds__(kEnc2Threads, 2) conv1d_encoder2_kernel(Enc2Args a) {
  extern __shared__ __align__(16) float sm[];
  const int s = a.stride;
  float* sw = sm;                         // [stride][taps][64]: weight of tap a * s + r, slot
  float* sb = sw + s * a.taps * kEnc2Co;  // [64]
  float* sx0 = sb + kEnc2Co;              // two windows of [stride][row]: position i at
                                          // (i % s, i / s)
  const int tid = threadIdx.x;
  const std::int64_t n_bt = a.batch * a.t_tiles;
  for (std::int64_t cy = blockIdx.y; cy < a.groups * a.c_tiles; cy += gridDim.y) {
    const std::int64_t g = cy / a.c_tiles;
    const std::int64_t o0 = (cy - g * a.c_tiles) * kEnc2Co;  // first channel of the tile
    const float* xg = a.x + g * a.x_cs;
    __syncthreads();  // the previous tile's weights and windows are no longer read
    // Slot 16 cls + j holds channel o0 + cls + 4 j.
    for (int i = tid; i < kEnc2Co * s * a.taps; i += kEnc2Threads) {
      const int slot = i % kEnc2Co;
      const int rt = i / kEnc2Co;  // r * taps + tap
      const int r = rt / a.taps;
      const int k = (rt - r * a.taps) * s + r;
      const std::int64_t c = o0 + slot / kEnc2Class + 4 * (slot % kEnc2Class);
      sw[i] = c < a.cout_g && k < a.K ? __ldg(a.w + (g * a.cout_g + c) * a.K + k) : 0.0f;
    }
    for (int slot = tid; slot < kEnc2Co; slot += kEnc2Threads) {
      const std::int64_t c = o0 + slot / kEnc2Class + 4 * (slot % kEnc2Class);
      sb[slot] = c < a.cout_g && a.bias != nullptr ? __ldg(a.bias + g * a.cout_g + c) : 0.0f;
    }
    if (blockIdx.x < n_bt) encoder2_window(a, xg, blockIdx.x, sx0);
    int buf = 0;
    for (std::int64_t bt = blockIdx.x; bt < n_bt; bt += gridDim.x, buf ^= 1) {
      float* sx = sx0 + buf * a.window;
      if (bt + gridDim.x < n_bt) {
        // The other window was last read before the barrier that ended the previous tile.
        encoder2_window(a, xg, bt + gridDim.x, sx0 + (buf ^ 1) * a.window);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const std::int64_t b = bt / a.t_tiles;
      const std::int64_t f0 = (bt - b * a.t_tiles) * kEnc2Frames - 4;  // the window's first frame
#pragma unroll 1
      for (int cls = 0; cls < 4; ++cls) {
        if (o0 + cls >= a.cout_g) break;
        float* yrow = a.y + b * a.y_bs + (g * a.cout_g + o0 + cls) * a.y_cs;
        // Frames from f0 + o start on 16-byte boundaries of every row of the class.
        const int o =
            static_cast<int>((4 - ((reinterpret_cast<std::uintptr_t>(yrow) >> 2) & 3)) & 3);
        float acc[kEnc2Class][4];
#pragma unroll
        for (int j4 = 0; j4 < kEnc2Class / 4; ++j4) {
          const float4 b4 = *reinterpret_cast<const float4*>(sb + cls * kEnc2Class + 4 * j4);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            acc[4 * j4 + 0][i] = b4.x;
            acc[4 * j4 + 1][i] = b4.y;
            acc[4 * j4 + 2][i] = b4.z;
            acc[4 * j4 + 3][i] = b4.w;
          }
        }
        const float* xt = sx + 4 * tid;
        const float* wc = sw + cls * kEnc2Class;
        switch (o) {
          case 0:
            encoder2_class<0>(acc, a, xt, wc);
            break;
          case 1:
            encoder2_class<1>(acc, a, xt, wc);
            break;
          case 2:
            encoder2_class<2>(acc, a, xt, wc);
            break;
          default:
            encoder2_class<3>(acc, a, xt, wc);
            break;
        }
        const std::int64_t f = f0 + o + 4 * tid;
        // Rows past the group's end hold zero weights; only their stores are skipped.
        const int rows =
            static_cast<int>(min(std::int64_t{kEnc2Class}, (a.cout_g - o0 - cls + 3) / 4));
        float* yp = yrow + f;
        const std::int64_t step = 4 * a.y_cs;
        if (f >= 0 && f + 4 <= a.out_frames) {
#pragma unroll
          for (int j = 0; j < kEnc2Class; ++j) {
            if (j < rows) {
              __stcs(reinterpret_cast<float4*>(yp),
                     make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
            }
            yp += step;
          }
        } else {
#pragma unroll
          for (int j = 0; j < kEnc2Class; ++j) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              if (j < rows && f + i >= 0 && f + i < a.out_frames) yp[i] = acc[j][i];
            }
            yp += step;
          }
        }
      }
      __syncthreads();  // this window is no longer read
    }
  }
}

// ---- encoder, local order --------------------------------------------------------------------
//
// The encoders above give each block a channel tile and let it walk frame tiles, so the blocks
// resident at a time write to all of the output's rows at once. Log step 102's probe measured
// the same bytes written as small tiles with the frame tiles running fastest across the grid
// (the blocks resident at a time then write a few hundred neighbouring rows): 0.138-0.143 ms for
// enc_tasnet's output against 0.178 and more for row-owning patterns. Step 103 ran the encoder
// above on such tiles, one per block, and lost what its staging per tile and its barriers cost
// (0.264 ms). This kernel keeps the order and hides the staging: persistent blocks take the
// tiles in grid order (tile i, i + grid, ...), so the resident blocks still cover a run of
// neighbouring tiles, and each block copies the next tile's weights and input window
// (asynchronously) while it computes the current one. A lane keeps its F frames' input window
// in registers (K <= KT taps) and loops over the tile's channels: per channel, KT / 4 broadcast
// float4 weights, KT x F multiply-adds and F 4-byte stores, each warp store 32 consecutive
// frames of one row.

constexpr int kLocThreads = 256;
constexpr int kLocMaxTaps = 32;
// Dynamic shared memory of a block: two buffers of weights, bias and window, and the tap table.
constexpr int kLocSmemFloats = 24576;

struct LocArgs : EncoderArgs {
  int dilation;
  int C;       // channels per tile, a multiple of 4
  int frames;  // frames per tile, 256 x F
  // A tile's channels are `period` apart (a power of two, log2 in period_log2), so that the rows
  // of a tile start at the same offset within `align` floats (a power of two; 1: no alignment);
  // its frames then start `s` before a multiple of `frames`, s the rows' offset, so that every
  // 32-frame store of a warp fills one aligned run of the output (see local_geometry).
  int period_log2, align;
  int window;     // input positions a tile reads
  int phase_len;  // words per phase row of a staged window
  int buf;        // floats per buffer: weights [C][KT], bias [C], window [stride][phase_len]
  // Tiles (frame tile fastest, then channel tile, group, batch), below 2^31, decoded with
  // div_u32.
  std::uint32_t n_tiles, t_tiles32, c_tiles32, groups32;
  std::uint32_t t_magic, c_magic, g_magic;
  // Windows inside their row staged by copy_phase_window_inside (CONVBANK_CUDA_ENC_LOCAL_INSIDE=0
  // for A/B runs: all by copy_phase_window).
  int inside;
  // K is the taps held (a multiple of 4): the window's loads need no test per tap
  // (CONVBANK_CUDA_ENC_LOCAL_FASTLOAD=0 for A/B runs: always tested).
  int full_taps;
};

struct LocTile {
  std::uint32_t tt, g, b;
  std::int64_t o0;  // first channel of the tile, in its group (the others period apart)
  std::int64_t f0;  // first frame of the tile: tt frames - s
  float* y;         // the output row of channel o0
};

// Channel tile ct holds channels cl + period (sub C + i), i < C: class cl = ct % period and its
// sub-tile ct / period (neighbouring tiles write neighbouring rows).
__device__ __forceinline__ LocTile local_tile_of(const LocArgs& a, std::uint32_t tile) {
  LocTile t;
  const std::uint32_t r1 = div_u32(tile, a.t_tiles32, a.t_magic);
  t.tt = tile - r1 * a.t_tiles32;
  const std::uint32_t r2 = div_u32(r1, a.c_tiles32, a.c_magic);
  const std::uint32_t ct = r1 - r2 * a.c_tiles32;
  const std::uint32_t cl = ct & ((1u << a.period_log2) - 1u), sub = ct >> a.period_log2;
  t.o0 = cl + (std::int64_t{sub} * a.C << a.period_log2);
  t.b = div_u32(r2, a.groups32, a.g_magic);
  t.g = r2 - t.b * a.groups32;
  t.y = a.y + std::int64_t{t.b} * a.y_bs + (std::int64_t{t.g} * a.cout_g + t.o0) * a.y_cs;
  const int s = static_cast<int>((reinterpret_cast<std::uintptr_t>(t.y) >> 2) & (a.align - 1));
  t.f0 = std::int64_t{t.tt} * a.frames - s;
  return t;
}

// Channels of the tile that exist (its last class sub-tile may be short).
__device__ __forceinline__ int local_rows(const LocArgs& a, const LocTile& t) {
  const std::int64_t left = a.cout_g - t.o0;
  if (left <= 0) return 0;
  return static_cast<int>(
      min(std::int64_t{a.C}, (left + (1 << a.period_log2) - 1) >> a.period_log2));
}

// Issues the copies of a tile's weights, bias and input window (split into `stride` phase rows,
// position i at (i % s, i / s)) into buf, as one commit group; the padding around the row by
// plain stores. Both are visible after the caller's wait and barrier.
template <int KT>
__device__ __forceinline__ void local_stage(const LocArgs& a, std::uint32_t tile, float* buf) {
  const LocTile t = local_tile_of(a, tile);
  float* sw = buf;
  float* sb = sw + a.C * KT;
  float* sx = sb + a.C;
  const std::int64_t oc0 = std::int64_t{t.g} * a.cout_g + t.o0;
  const int rows = local_rows(a, t);
  for (int i = threadIdx.x; i < a.C * KT; i += kLocThreads) {
    const int c = i / KT;
    const int k = i - c * KT;
    const bool ok = k < a.K && c < rows;
    cp_async4(smem_addr(sw + i),
              ok ? a.w + (oc0 + (std::int64_t{c} << a.period_log2)) * a.K + k : a.w, ok);
  }
  for (int c = threadIdx.x; c < a.C; c += kLocThreads) {
    const bool ok = a.bias != nullptr && c < rows;
    cp_async4(smem_addr(sb + c), ok ? a.bias + oc0 + (std::int64_t{c} << a.period_log2) : a.w, ok);
  }
  const float* xrow = a.x + std::int64_t{t.b} * a.x_bs + std::int64_t{t.g} * a.x_cs;
  const std::int64_t pos0 = t.f0 * a.stride - a.pad;
  if (a.inside && pos0 >= 0 && pos0 + a.window <= a.in_frames) {
    copy_phase_window_inside<kLocThreads>(a, xrow + pos0, a.window, a.phase_len, sx, threadIdx.x);
  } else {
    copy_phase_window<kLocThreads>(a, xrow, pos0, a.window, a.phase_len, sx, threadIdx.x);
  }
  cp_async_commit();
}

// One tile from its staged buffer: lane l of warp w computes frames w * 32 F + 32 j + l (j < F)
// of every channel of the tile.
template <int KT, int F, bool kWhole>
__device__ __forceinline__ void local_compute(const LocArgs& a, const LocTile& t, const float* buf,
                                              const int* soff) {
  const float* sw = buf;
  const float* sb = sw + a.C * KT;
  const float* sx = sb + a.C;
  const int tl = (threadIdx.x >> 5) * 32 * F + (threadIdx.x & 31);
  // Taps past K read as zeros (their weights are zeros too), so no Inf meets a zero weight.
  float xv[F][KT];
  if (a.full_taps) {
    // K == KT: no tap to zero, so no test per tap (log step 127: the tests and zeroing took
    // about half of these loads' instructions).
#pragma unroll
    for (int k = 0; k < KT; ++k) {
      const float* xk = sx + soff[k] + tl;
#pragma unroll
      for (int j = 0; j < F; ++j) xv[j][k] = xk[32 * j];
    }
  } else {
#pragma unroll
    for (int k = 0; k < KT; ++k) {
      const int off = k < a.K ? soff[k] + tl : 0;
#pragma unroll
      for (int j = 0; j < F; ++j) xv[j][k] = k < a.K ? sx[off + 32 * j] : 0.0f;
    }
  }
  const std::int64_t f0 = t.f0 + tl;
  if (!kWhole) {
    // A warp whose frames all lie outside the row (the aligned tiles' extra tile) has no work.
    const std::int64_t fw = f0 - (threadIdx.x & 31);
    if (fw + 32 * F <= 0 || fw >= a.out_frames) return;
  }
  float* yp = t.y + f0;
  const std::int64_t row_step = a.y_cs << a.period_log2;
  const int rows = local_rows(a, t);
#pragma unroll 2
  for (int c = 0; c < rows; ++c) {
    float acc[F];
    const float bias = sb[c];
#pragma unroll
    for (int j = 0; j < F; ++j) acc[j] = bias;
    const float* wc = sw + c * KT;
#pragma unroll
    for (int k4 = 0; k4 < KT / 4; ++k4) {
      const float4 w4 = *reinterpret_cast<const float4*>(wc + 4 * k4);
#pragma unroll
      for (int j = 0; j < F; ++j) {
        acc[j] = fmaf(w4.x, xv[j][4 * k4 + 0], acc[j]);
        acc[j] = fmaf(w4.y, xv[j][4 * k4 + 1], acc[j]);
        acc[j] = fmaf(w4.z, xv[j][4 * k4 + 2], acc[j]);
        acc[j] = fmaf(w4.w, xv[j][4 * k4 + 3], acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < F; ++j) {
      if (kWhole ||
          static_cast<std::uint64_t>(f0 + 32 * j) < static_cast<std::uint64_t>(a.out_frames)) {
        yp[32 * j] = acc[j];
      }
    }
    yp += row_step;
  }
}

// Blocks per multiprocessor by the registers the window takes (KT x F): four (64 registers) up to
// 32 (ptxas gave K 16 with two frames per lane anything from 62 to 76 registers as the code
// around it changed, hence the bound), three up to 48, two above (the default tile up to K 16,
// four frames per lane: 122 registers).
constexpr int local_min_blocks(int window_registers) {
  return window_registers <= 32 ? 4 : window_registers <= 48 ? 3 : 2;
}
template <int KT, int F>
__global__ void __launch_bounds__(kLocThreads, local_min_blocks(KT* F))
    conv1d_encoder_local_kernel(LocArgs a) {
  extern __shared__ __align__(16) float sm[];
  int* soff = reinterpret_cast<int*>(sm);  // [KT]: tap k's first word in a staged window
  float* buf0 = sm + KT;
  const int s = a.stride;
  // Tap k reads window position t * s + k * d: phase row (k * d) % s, column t + (k * d) / s.
  for (int k = threadIdx.x; k < a.K; k += kLocThreads) {
    const int kd = k * a.dilation;
    soff[k] = (kd % s) * a.phase_len + kd / s;
  }
  std::uint32_t tile = blockIdx.x;
  if (tile < a.n_tiles) local_stage<KT>(a, tile, buf0);
  for (int buf = 0; tile < a.n_tiles; tile += gridDim.x, buf ^= 1) {
    const std::uint32_t next = tile + gridDim.x;
    if (next < a.n_tiles) {
      // The other buffer was last read before the barrier that ended the previous tile.
      local_stage<KT>(a, next, buf0 + (buf ^ 1) * a.buf);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* cur = buf0 + buf * a.buf;
    const LocTile t = local_tile_of(a, tile);
    if (t.f0 >= 0 && t.f0 + a.frames <= a.out_frames) {
      local_compute<KT, F, true>(a, t, cur, soff);
    } else {
      local_compute<KT, F, false>(a, t, cur, soff);
    }
    __syncthreads();  // this buffer is no longer read
  }
}

// ---- depthwise -------------------------------------------------------------------------------

constexpr int kDwThreads = 256;
// Dynamic shared memory a block may use without opting in (48 KB): the input window.
constexpr int kDwSmemFloats = 12288;

struct DwArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t out_channels, cout_g, t_tiles, items;  // items = batch * out_channels * t_tiles
  std::int64_t pad, in_frames, out_frames;
  int K, stride, dilation, mode, window;
};

// Input window of a block of 256 threads taking `per_thread` frames each.
std::int64_t depthwise_window(const Conv1dParams& p, int per_thread) {
  return (std::int64_t{kDwThreads} * per_thread - 1) * p.stride + (p.kernel_size - 1) * p.dilation +
         1;
}

// Shared memory of a block: the row's K weights, then the window (16-byte aligned).
std::int64_t depthwise_smem_floats(const Conv1dParams& p, int per_thread) {
  return (p.kernel_size + 3) / 4 * 4 + depthwise_window(p, per_thread);
}

// Frames per thread: as many (up to 16) as the window allows, for more loads in flight.
int depthwise_per_thread(const Conv1dParams& p) {
  for (int pt : {16, 8, 4}) {
    if (depthwise_smem_floats(p, pt) <= kDwSmemFloats) return pt;
  }
  return 0;
}

// A block stages the input window of PT * 256 consecutive output frames of one row, then each
// thread computes frames tid, tid + 256, ... so every load and store of a warp is 32
// consecutive words. The window arrives by asynchronous copies (registers stay free: eight blocks
// of 32 registers per multiprocessor); with plain loads tcn_depthwise measured 0.371 / 0.369 ms
// against 0.329 / 0.328 (two rounds, H200).
template <int PT>
__global__ void __launch_bounds__(kDwThreads, 8) conv1d_depthwise_kernel(DwArgs a) {
  constexpr int kFrames = kDwThreads * PT;
  extern __shared__ __align__(16) float sm[];
  float* sw = sm;                      // the row's K weights
  float* sx = sm + (a.K + 3) / 4 * 4;  // the window
  const int tid = threadIdx.x;
  for (std::int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
    const std::int64_t row = item / a.t_tiles;
    const std::int64_t t0 = (item - row * a.t_tiles) * kFrames;
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const float* xrow = a.x + b * a.x_bs + (o / a.cout_g) * a.x_cs;
    const std::int64_t pos0 = t0 * a.stride - a.pad;
    __syncthreads();  // the previous row's window is no longer read
    // The weights travel with the window instead of a global load per tap after the barrier:
    // medians of three rounds, K 31 0.075 vs 0.078 ms, K 7 0.141 vs 0.145, K 3 unchanged (0.328
    // vs 0.327).
    const float* wrow = a.w + o * a.K;
    for (int k = tid; k < a.K; k += kDwThreads) cp_async4(smem_addr(sw + k), wrow + k, true);
    const float init = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
    // Positions [lo, hi) of the window lie inside the row and arrive by asynchronous copies,
    // which hold no registers while in flight; only the padding around them is loaded by the
    // threads (staging a row's edge windows wholly with plain loads, half of tcn_depthwise's
    // windows, measured 0.325-0.328 ms against 0.300-0.306). The copies are 4 bytes each,
    // one 128-byte line per warp: 16-byte copies where the window is aligned measured slower
    // on the H200 (tcn_depthwise 0.300-0.301 against 0.274-0.276, DRAM 75 % against 82 %;
    // 16 x 512 channels, K 5, dilation 2: 0.302 against 0.304-0.311).
    const int lo = static_cast<int>(min(std::int64_t{a.window}, max(std::int64_t{0}, -pos0)));
    const int hi =
        static_cast<int>(max(std::int64_t{lo}, min(std::int64_t{a.window}, a.in_frames - pos0)));
    for (int i = tid; i < lo; i += kDwThreads) {
      sx[i] = load_padded(xrow, pos0 + i, a.in_frames, a.mode);
    }
    for (int i = hi + tid; i < a.window; i += kDwThreads) {
      sx[i] = load_padded(xrow, pos0 + i, a.in_frames, a.mode);
    }
    const float* src = xrow + pos0;  // read at i in [lo, hi) only
    const unsigned dst = smem_addr(sx);
    for (int i = lo + tid; i < hi; i += kDwThreads) cp_async4(dst + 4u * i, src + i, true);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float acc[PT];
#pragma unroll
    for (int j = 0; j < PT; ++j) acc[j] = init;
    const float* xs = sx + tid * a.stride;
    const int step = kDwThreads * a.stride;
    for (int k = 0; k < a.K; ++k) {
      const float wk = sw[k];
      const float* xk = xs + k * a.dilation;
#pragma unroll
      for (int j = 0; j < PT; ++j) acc[j] = fmaf(wk, xk[j * step], acc[j]);
    }
    float* yrow = a.y + b * a.y_bs + o * a.y_cs;
#pragma unroll
    for (int j = 0; j < PT; ++j) {
      const std::int64_t t = t0 + tid + j * kDwThreads;
      if (t < a.out_frames) yrow[t] = acc[j];
    }
  }
}

// ---- decoder ---------------------------------------------------------------------------------

constexpr int kDecThreads = 256;
constexpr int kDecWarps = kDecThreads / 32;
constexpr int kDecMaxT = 4;                             // taps per phase
constexpr int kDecWarpBlocks = 128;                     // output blocks (of `stride` frames)
constexpr int kDecBlocks = kDecWarps * kDecWarpBlocks;  // ... per thread block
constexpr int kDecBlocksPerSm = 2;  // resident thread blocks per multiprocessor (launch bounds)
constexpr int kDecWeightFloats = 8192;
// Channels summed in registers before the partial sum is added to the thread's running sum in
// shared memory: no serial fp32 sum runs over more than 32 channels, whatever in/groups is.
constexpr int kDecFold = 32;

// Dynamic shared memory beyond the weights: each thread's running sums, [j * PH + p][thread].
constexpr int decoder_sum_floats(int ph) {
  return kDecThreads * 4 * ph;
}

struct DecArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t out_channels, rows, q_tiles;
  std::int64_t pad, q_begin, q_end, qbase, in_frames, out_frames;
  int cin_g, cout_g, K, P, T, chunk;
  int w_floats;  // weight area of the shared memory (a multiple of 4)
};

// Output block q holds frames t = q * P + p - pad (p < P) and sums x[c][q - m] * w[c][m * P + p]
// over channels c and taps m < T. Lane l of warp w owns blocks qw + l + 32 j, j < 4 (qw: the
// warp's 128 blocks) and streams every input channel of them: its four frames per channel, the
// T - 1 frames before each from the lanes below (the top lanes hold the frames before the
// warp's), the next group of U channels loaded before the current one is used. Every 32 channels
// the registers' sums are added to the thread's running sums in shared memory (fp32 error grows
// with the length of a serial sum). (With four consecutive blocks per lane, a 16-byte load of
// them measured 1.2-1.3x slower than four 4-byte loads on aligned rows, log step 44.)
// MT: taps per phase the code is unrolled for (a.T <= MT).
template <int PH, int MT>
__global__ void __launch_bounds__(kDecThreads, kDecBlocksPerSm)
    conv_transpose1d_decoder_kernel(DecArgs a) {
  constexpr int U = PH >= 16 ? 2 : 4;  // channels per group
  constexpr int H = MT > 1 ? MT - 1 : 1;
  static_assert(kDecFold % U == 0, "a fold ends a group");
  extern __shared__ __align__(16) float smem[];
  float* sw = smem;                // weights: [channel][tap][phase]
  float* sum = smem + a.w_floats;  // running sums
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // All of a row's weights fit (the usual case): staged when the block's row changes, not per
  // chunk.
  const bool resident = a.chunk >= a.cin_g;
  std::int64_t staged = -1;  // the row whose weights are resident in shared memory
  for (std::int64_t item = blockIdx.x; item < a.rows * a.q_tiles; item += gridDim.x) {
    // Tile-major order: the rows' last tiles, often mostly past the row's end, start last, so
    // that they fill the end of the grid instead of extending it.
    const std::int64_t qt = item / a.rows;
    const std::int64_t row = item - qt * a.rows;
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const std::int64_t g = o / a.cout_g;
    const std::int64_t ol = o - g * a.cout_g;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    auto stage = [&](int c0, int cn) {
      __syncthreads();  // the previous weights are no longer read
      // Channels up to the next multiple of 4 read as zero weights: a group of U channels is
      // computed whole, its channels past the chunk with zero inputs.
      for (int i = tid; i < (cn + 3) / 4 * 4 * a.T * PH; i += kDecThreads) {
        const int p = i % PH;
        const int m = (i / PH) % a.T;
        const int ci = i / (PH * a.T);
        sw[i] = p < a.P && ci < cn
                    ? __ldg(a.w + ((g * a.cin_g + c0 + ci) * a.cout_g + ol) * a.K + m * a.P + p)
                    : 0.0f;
      }
      __syncthreads();
    };
    if (resident && staged != row) {
      stage(0, a.cin_g);
      staged = row;
    }
    // A row's last tile may hold fewer than 8 warps' blocks (`used`). Its warps then split the
    // channels of each used warp's blocks into `parts` and add their sums at the end, so that
    // the tile takes about 1 / parts of a full tile's time instead of as long: a few such tiles
    // past the last full wave would otherwise add a whole tile's latency to the call.
    const std::int64_t q0 = a.qbase + qt * kDecBlocks;
    const int used =
        resident ? static_cast<int>(min(std::int64_t{kDecWarps},
                                        (a.q_end - q0 + kDecWarpBlocks - 1) / kDecWarpBlocks))
                 : kDecWarps;
    const int parts = kDecWarps / used;  // tile-uniform
    const int unit = warp % used, part = warp / used;
    const std::int64_t qw = q0 + unit * kDecWarpBlocks;
    // A warp with no blocks and no part has nothing to do (with chunked weights it still takes
    // part in every chunk's staging barrier, and parts == 1 there).
    if (parts == 1 && resident && part > 0) continue;
    int c_lo = 0, c_hi = a.cin_g;
    if (parts > 1) {
      const int per = ((a.cin_g + parts - 1) / parts + U - 1) / U * U;  // whole groups
      c_lo = part < parts ? min(a.cin_g, part * per) : 0;
      c_hi = part < parts ? min(a.cin_g, c_lo + per) : 0;
    }
    // Lane l owns blocks ql + 32 j (j < 4): each load of a channel's frames is one
    // warp-contiguous line (four consecutive blocks per lane touched four lines per load: up to
    // 5 % slower, log step 82).
    const std::int64_t ql = qw + lane;
    // This lane's frames inside the row: bit j for ql + 32 j; bit 4 for the frame before the
    // warp's that lane s >= 32 - H holds, qw + s - 32.
    int ok = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) ok |= ql + 32 * j < a.in_frames ? 1 << j : 0;
    const std::int64_t before = qw + lane - 32;
    ok |= lane >= 32 - H && 32 - lane < a.T && before >= 0 && before < a.in_frames ? 16 : 0;
    const float* xl = xg + ql;  // frame ql of the group's first channel
#pragma unroll
    for (int i = 0; i < 4 * PH; ++i) sum[i * kDecThreads + tid] = 0.0f;
    // Most warps' frames, the H frames before them included, lie inside the row, and their
    // channels come in whole groups: they load without a bounds test and a zero per frame
    // (dec_tasnet issued 112 M instructions instead of 130 M; 16 x 512 -> 4, 0.70 vs 0.78 ms).
    const bool inside = qw - H >= 0 && qw + kDecWarpBlocks <= a.in_frames;
    auto channels = [&](auto clean_tag) {
      constexpr bool kClean = decltype(clean_tag)::value;
      for (int c0 = 0; c0 < a.cin_g; c0 += a.chunk) {
        const int cn = min(a.chunk, a.cin_g - c0);
        if (!resident) stage(c0, cn);
        // Channels [c_begin, c_end) of the chunk (resident: one chunk, this warp's part).
        const int c_begin = resident ? c_lo : 0, c_end = resident ? c_hi : cn;
        // Group `ci` (its first channel in the chunk) into v (frames ql + 32 j) and h (lanes
        // s >= 32 - H: frame qw + s - 32); channels past the chunk read as zeros. The clean
        // variant, whose groups are whole, reads the last group again in place of the one past it
        // (not used).
        auto load = [&](int ci, float(&v)[U][4], float(&h)[U]) {
          if constexpr (kClean) ci = min(ci, c_end - U);
          const float* xr = xl + (c0 + ci) * a.x_cs;
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const bool live = kClean || ci + u < c_end;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              v[u][j] = kClean || (live && (ok & (1 << j))) ? __ldg(xr + 32 * j) : 0.0f;
            }
            h[u] = live && (ok & 16) ? __ldg(xr - 32) : 0.0f;
            xr += a.x_cs;
          }
        };
        float acc[4][PH];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int p = 0; p < PH; ++p) acc[j][p] = 0.0f;
        float v[U][4], h[U];
        load(c_begin, v, h);
        for (int ci = c_begin; ci < c_end; ci += U) {
          float nv[U][4], nh[U];
          load(ci + U, nv, nh);
#pragma unroll
          for (int u = 0; u < U; ++u) {
            // xs[j][m] = x[ql + 32 j - m]: lane (l - m)'s frame j, or for l < m lane
            // (32 + l - m)'s frame j - 1 (j = 0: its h, frame qw + l - m).
            float xs[4][MT];
#pragma unroll
            for (int j = 0; j < 4; ++j) xs[j][0] = v[u][j];
#pragma unroll
            for (int m = 1; m < MT; ++m) {
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const float give = lane >= 32 - m ? (j == 0 ? h[u] : v[u][j - 1]) : v[u][j];
                xs[j][m] = __shfl_sync(0xffffffffu, give, (lane - m) & 31);
              }
            }
            const float* wc = sw + (ci + u) * a.T * PH;
#pragma unroll
            for (int m = 0; m < MT; ++m) {
              if (m < a.T) {
#pragma unroll
                for (int p4 = 0; p4 < PH / 4; ++p4) {
                  const float4 w4 = *reinterpret_cast<const float4*>(wc + m * PH + 4 * p4);
#pragma unroll
                  for (int j = 0; j < 4; ++j) {
                    const float xv = xs[j][m];
                    acc[j][4 * p4 + 0] = fmaf(w4.x, xv, acc[j][4 * p4 + 0]);
                    acc[j][4 * p4 + 1] = fmaf(w4.y, xv, acc[j][4 * p4 + 1]);
                    acc[j][4 * p4 + 2] = fmaf(w4.z, xv, acc[j][4 * p4 + 2]);
                    acc[j][4 * p4 + 3] = fmaf(w4.w, xv, acc[j][4 * p4 + 3]);
                  }
                }
              }
            }
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int j = 0; j < 4; ++j) v[u][j] = nv[u][j];
            h[u] = nh[u];
          }
          if ((ci + U - c_begin) % kDecFold == 0 || ci + U >= c_end) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
              for (int p = 0; p < PH; ++p) {
                sum[(j * PH + p) * kDecThreads + tid] += acc[j][p];
                acc[j][p] = 0.0f;
              }
          }
        }
      }
    };
    // Chunked weights stage each chunk behind __syncthreads() inside the loop: every warp of the
    // block must then run the same instantiation (an aligned barrier reached from different code
    // is undefined), so only resident rows take the clean one.
    if (resident && inside && c_hi > c_lo && (c_hi - c_lo) % U == 0) {
      channels(std::true_type{});
    } else {
      channels(std::false_type{});
    }
    if (parts > 1) {
      __syncthreads();  // every part's sums are in shared memory
      if (part == 0) {
        for (int k = 1; k < parts; ++k) {
#pragma unroll
          for (int i = 0; i < 4 * PH; ++i) {
            sum[i * kDecThreads + tid] += sum[i * kDecThreads + tid + k * used * 32];
          }
        }
      }
    }
    // A warp's 128 * P outputs are contiguous: it stores them as consecutive words, reading
    // the sums of lane 8r + i / (4P) in round r.
    __syncwarp();
    const float bias = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
    float* yrow = a.y + b * a.y_bs + o * a.y_cs;
    const int span = 32 * a.P;  // outputs per round
    for (int r = 0; r < (part == 0 ? 4 : 0); ++r) {
      const std::int64_t qr = qw + 32 * r;
      for (int i = lane; i < span; i += 32) {
        const int blk = i / a.P;  // block within the round
        const int p = i - blk * a.P;
        const int owner = warp * 32 + blk;  // block qr + blk is lane blk's block j = r
        const std::int64_t q = qr + blk;
        const std::int64_t t = qr * a.P - a.pad + i;
        if (q >= a.q_begin && q < a.q_end && t >= 0 && t < a.out_frames) {
          yrow[t] = sum[(r * PH + p) * kDecThreads + owner] + bias;
        }
      }
    }
    __syncwarp();                    // the sums are read before the next tile clears them
    if (parts > 1) __syncthreads();  // ... by their owners too
  }
}

template <int PH, int MT>
void launch_decoder(const DecArgs& a, dim3 grid, std::size_t smem, cudaStream_t stream) {
  // Above 48 KB a kernel must opt in to its dynamic shared memory (once, for the largest size).
  static const cudaError_t opted = cudaFuncSetAttribute(
      conv_transpose1d_decoder_kernel<PH, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(sizeof(float) * (kDecWeightFloats + decoder_sum_floats(PH))));
  check_cuda(opted, "cudaFuncSetAttribute (decoder shared memory)");
  conv_transpose1d_decoder_kernel<PH, MT><<<grid, kDecThreads, smem, stream>>>(a);
}

template <int PH>
void launch_decoder(const DecArgs& a, dim3 grid, std::size_t smem, cudaStream_t stream) {
  if (a.T <= 2) {
    launch_decoder<PH, 2>(a, grid, smem, stream);
  } else {
    launch_decoder<PH, kDecMaxT>(a, grid, smem, stream);
  }
}

// The output blocks with an output in [0, out_frames) and their tiles, from a multiple of 4 (the
// tiling every measurement used; since lanes own blocks 32 apart any start would do).
void set_block_range(DecArgs& a, const ConvTranspose1dParams& p) {
  a.q_begin = p.padding / p.stride;
  a.q_end = (p.out_frames - 1 + p.padding) / p.stride + 1;
  a.qbase = a.q_begin / 4 * 4;
  a.q_tiles = (a.q_end - a.qbase + kDecBlocks - 1) / kDecBlocks;
}

int decoder_phases(std::int64_t stride) {
  return stride <= 4 ? 4 : (stride <= 8 ? 8 : 16);
}

}  // namespace

// ---- launchers -------------------------------------------------------------------------------

void set_encoder_args(EncoderArgs& a, const Conv1dParams& p, TensorView<const float> x,
                      const float* w, const float* bias, TensorView<float> y) {
  set_views(a, x, w, bias, y);
  a.batch = p.batch;
  a.cout_g = p.out_channels / p.groups;
  a.groups = p.groups;
  a.pad = p.pad_left;
  a.in_frames = p.in_frames;
  a.out_frames = p.out_frames;
  a.K = static_cast<int>(p.kernel_size);
  a.stride = static_cast<int>(p.stride);
  a.mode = to_pad_mode(p.padding_mode);
  a.s_magic = a.stride >= 2 ? static_cast<unsigned>(((1ULL << 32) + a.stride - 1) / a.stride) : 0u;
  a.fixed_phase = 0;  // the local-order encoder's choice (local_geometry)
}

bool conv1d_encoder_supported(const Conv1dParams& p) {
  return p.in_channels == p.groups && p.out_channels / p.groups >= 16 &&
         encoder_smem_floats(p) <= kEncSmemFloats;
}

void launch_conv1d_encoder(const Conv1dParams& p, TensorView<const float> x, const float* w,
                           const float* bias, TensorView<float> y, cudaStream_t stream,
                           const char* name) {
  EncArgs a{};
  set_encoder_args(a, p, x, w, bias, y);
  a.t_tiles = (p.out_frames + kEncFrames - 1) / kEncFrames;
  a.dilation = static_cast<int>(p.dilation);
  a.window = static_cast<int>(encoder_window(p));
  a.phase_len = static_cast<int>(encoder_phase_len(p));
  a.c_tiles = (a.cout_g + kEncCo - 1) / kEncCo;
  // About eight blocks per multiprocessor, each looping over frame tiles with its weights staged
  // once.
  const std::int64_t pairs = a.groups * a.c_tiles * p.batch;
  const std::int64_t per_pair = (8LL * num_sms() + pairs - 1) / pairs;
  const std::int64_t bx = std::min({a.t_tiles, per_pair, kMaxGridX});
  const dim3 grid(grid_dim(bx, kMaxGridX), grid_dim(a.groups * a.c_tiles, kMaxGridYZ),
                  grid_dim(p.batch, kMaxGridYZ));
  const std::size_t smem = sizeof(float) * static_cast<std::size_t>(encoder_smem_floats(p));
  conv1d_encoder_kernel<<<grid, kEncThreads, smem, stream>>>(a);
  check_launch(name, p);
}

std::int64_t encoder2_tiles(const Conv1dParams& p) {
  return (p.out_frames + 4 + kEnc2Frames - 1) / kEnc2Frames;
}

std::int64_t conv1d_encoder2_tiles(const Conv1dParams& p) {
  const std::int64_t cout_g = p.out_channels / p.groups;
  return p.batch * encoder2_tiles(p) * p.groups * ((cout_g + kEnc2Co - 1) / kEnc2Co);
}

bool conv1d_encoder2_supported(const Conv1dParams& p) {
  return p.in_channels == p.groups && p.out_channels / p.groups >= kEnc2Co && p.dilation == 1 &&
         encoder2_smem_floats(p) <= kEnc2SmemFloats;
}

void launch_conv1d_encoder2(const Conv1dParams& p, TensorView<const float> x, const float* w,
                            const float* bias, TensorView<float> y, cudaStream_t stream,
                            const char* name) {
  Enc2Args a{};
  set_encoder_args(a, p, x, w, bias, y);
  a.c_tiles = (a.cout_g + kEnc2Co - 1) / kEnc2Co;
  a.t_tiles = encoder2_tiles(p);
  a.taps = static_cast<int>(encoder2_phase_taps(p));
  a.row = static_cast<int>(encoder2_row(p));
  a.window = a.stride * a.row;
  // Above 48 KB a kernel must opt in to its dynamic shared memory (once, for the largest size).
  static const cudaError_t opted =
      cudaFuncSetAttribute(conv1d_encoder2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(sizeof(float) * kEnc2SmemFloats));
  check_cuda(opted, "cudaFuncSetAttribute (encoder shared memory)");
  // Two resident blocks per multiprocessor share the frame tiles of each channel tile, as evenly
  // as whole tiles allow.
  const std::int64_t c_all = a.groups * a.c_tiles;
  const std::int64_t n_bt = p.batch * a.t_tiles;
  const std::int64_t want = std::max<std::int64_t>(1, (2LL * num_sms() + c_all - 1) / c_all);
  const std::int64_t rounds = (n_bt + want - 1) / want;
  const dim3 grid(grid_dim((n_bt + rounds - 1) / rounds, kMaxGridX), grid_dim(c_all, kMaxGridYZ));
  const std::size_t smem = sizeof(float) * static_cast<std::size_t>(encoder2_smem_floats(p));
  conv1d_encoder2_kernel<<<grid, kEnc2Threads, smem, stream>>>(a);
  check_launch(name, p);
}

// ---- local-order encoder ---------------------------------------------------------------------

namespace {

// Channels per tile and frames per lane (a tile: C channels x 256 F frames), read once from
// CONVBANK_CUDA_ENC_LOCAL_C / _F for A/B runs (0, unset: by the taps, see local_geometry);
// set_encoder_local_tile for the tests. Log step 107 measured 8 to 64 channels and one to four
// frames per lane.
std::atomic<int> g_local_c{env_int("CONVBANK_CUDA_ENC_LOCAL_C")};
std::atomic<int> g_local_f{env_int("CONVBANK_CUDA_ENC_LOCAL_F")};
// Alignment of a tile's rows in floats (a power of two up to 32; 1: none; 0, unset: 8, one
// 32-byte sector), read once from CONVBANK_CUDA_ENC_LOCAL_ALIGN for A/B runs. A tile's rows then
// start at the same offset in their sector, its frames start that far before a multiple of the
// tile, and so each 32-frame store of a warp writes four whole sectors. On the H100 (log step
// 123 in docs/performance.md, ms, 8 vs none) enc_tasnet 0.225 vs 0.243, 4 x 1 -> 1024 0.108 vs
// 0.120, 8 x 1 -> 512 on 160003 frames, K 20, s 10 0.119 vs 0.131; 32 floats (whole lines, 16
// channels per tile at 512 outputs, which local_geometry no longer takes) 0.230, 0.109, 0.158.
std::atomic<int> g_local_align{env_int("CONVBANK_CUDA_ENC_LOCAL_ALIGN")};
std::atomic<std::uint64_t> g_local_aligned_launches{0};

// Taps held in registers: K rounded up to a multiple of 4 (the weights are read as float4).
int local_taps(std::int64_t k) {
  return static_cast<int>((k + 3) / 4 * 4);
}

// The geometry of a launch (with the views set by set_encoder_args, or none: a contiguous
// output); false where the layer does not fit the kernel.
bool local_geometry(LocArgs& a, const Conv1dParams& p) {
  // No wider than the group's channels (rounded up to 4): a tile's rows past them would be idle.
  // 0 (unset): the tile measured fastest for the taps, 32 x 1024 up to 16 taps, 64 x 512 above.
  const int set_c = g_local_c.load(std::memory_order_relaxed);
  const int set_f = g_local_f.load(std::memory_order_relaxed);
  // Rows whose starts lie at the same offset within `align` floats: channels `period` apart,
  // period = align / gcd(y_cs mod align, align) (the output's channel stride, or a contiguous
  // one's where no view is given).
  const std::int64_t cout_g = p.out_channels / p.groups;
  const int set_align = g_local_align.load(std::memory_order_relaxed);
  int align = set_align > 0 ? std::min(set_align, 32) : 8;
  while ((align & (align - 1)) != 0) align &= align - 1;
  const std::int64_t y_cs = a.y_cs != 0 ? a.y_cs : p.out_frames;
  const std::int64_t y_bs = a.y_cs != 0 ? a.y_bs : p.out_channels * p.out_frames;
  int period = 1;
  while ((y_cs % align + align) * period % align != 0) period *= 2;
  // Channels per tile (a multiple of 4) and channel tiles where a tile's channels are `period`
  // apart; aligned only where that takes no more tiles than contiguous channels: fewer channels
  // per tile stage the window for fewer of them (log step 123: 16-channel tiles at 32 floats ran
  // 21 % slower at K 20).
  const std::int64_t tile_c = set_c > 0 ? std::clamp(set_c, 4, 256) : p.kernel_size <= 16 ? 32 : 64;
  const auto tiles_of = [&](std::int64_t per) {
    const std::int64_t rows = (cout_g + per - 1) / per;
    const std::int64_t c = (std::min(rows, tile_c) + 3) / 4 * 4;
    return std::pair{c, per * ((rows + c - 1) / c)};
  };
  if (tiles_of(period).second > tiles_of(1).second) align = period = 1;
  const auto [tile_channels, c_tiles] = tiles_of(period);
  const int C = static_cast<int>(tile_channels);
  // The most a tile's frames start before a multiple of the tile: the one offset that every row
  // shares where the strides keep the offset, else up to align - 1.
  int max_shift = 0;
  if (align > 1) {
    const bool shared = period == 1 && y_bs % align == 0 && (cout_g * y_cs) % align == 0;
    max_shift = shared
                    ? static_cast<int>((reinterpret_cast<std::uintptr_t>(a.y) >> 2) & (align - 1))
                    : align - 1;
  }
  const int want_f = set_f > 0 ? set_f : 4;
  // Four frames per lane only with 16 taps or fewer (64 registers of window).
  const int F = want_f >= 4 && p.kernel_size <= 16 ? 4 : want_f >= 2 ? 2 : 1;
  if (p.in_channels != p.groups || p.kernel_size > kLocMaxTaps) return false;
  const std::int64_t frames = 256LL * F;
  const std::int64_t window = (frames - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1;
  const std::int64_t phase_len = phase_row_words(window, p.stride);
  // Shifted tiles reach up to max_shift frames past the row's end.
  const std::int64_t t_tiles = (p.out_frames + max_shift + frames - 1) / frames;
  const std::int64_t n_tiles = t_tiles * c_tiles * p.groups * p.batch;
  const int kt = local_taps(p.kernel_size);
  const std::int64_t buf = (C * kt + C + p.stride * phase_len + 3) / 4 * 4;
  if (n_tiles >= (std::int64_t{1} << 31) || kt + 2 * buf > kLocSmemFloats) return false;
  a.cout_g = cout_g;
  a.groups = p.groups;
  a.batch = p.batch;
  a.t_tiles = t_tiles;
  a.c_tiles = c_tiles;
  a.dilation = static_cast<int>(p.dilation);
  a.C = C;
  a.period_log2 = std::countr_zero(static_cast<unsigned>(period));
  a.align = align;
  a.frames = static_cast<int>(frames);
  a.window = static_cast<int>(window);
  a.phase_len = static_cast<int>(phase_len);
  a.buf = static_cast<int>(buf);
  a.n_tiles = static_cast<std::uint32_t>(n_tiles);
  a.t_tiles32 = static_cast<std::uint32_t>(t_tiles);
  a.c_tiles32 = static_cast<std::uint32_t>(c_tiles);
  a.groups32 = static_cast<std::uint32_t>(p.groups);
  a.t_magic = div_magic(t_tiles);
  a.c_magic = div_magic(c_tiles);
  a.g_magic = div_magic(p.groups);
  static const bool inside_off = env_off("CONVBANK_CUDA_ENC_LOCAL_INSIDE");
  a.inside = inside_off ? 0 : 1;
  // Only here: on the H200 (log step 129 in docs/performance.md, ms) this kernel ran 1-3 % faster
  // with the fixed phase and the untested loads below together (enc_tasnet 0.181 vs 0.182-0.188),
  // but the tensor-core encoder, which shares the staging loop, slower with the fixed phase
  // (1 -> 512, K 16, s 4: 0.400-0.406 vs 0.389-0.390).
  static const bool wrap_always = env_off("CONVBANK_CUDA_ENC_FIXED_PHASE");
  a.fixed_phase = wrap_always ? 0 : 1;
  static const bool tested_loads = env_off("CONVBANK_CUDA_ENC_LOCAL_FASTLOAD");
  a.full_taps = !tested_loads && p.kernel_size == kt ? 1 : 0;
  return true;
}

template <int KT, int F>
void launch_local(const LocArgs& a, std::size_t smem, cudaStream_t stream) {
  const auto kernel = conv1d_encoder_local_kernel<KT, F>;
  // Above 48 KB a kernel must opt in to its dynamic shared memory (once, for the largest size).
  static const cudaError_t opted = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sizeof(float) * kLocSmemFloats);
  check_cuda(opted, "cudaFuncSetAttribute (local encoder shared memory)");
  const int per_sm = resident_blocks<conv1d_encoder_local_kernel<KT, F>>(kLocThreads, smem);
  const std::int64_t resident = std::int64_t{per_sm} * num_sms();
  const std::int64_t blocks = std::min<std::int64_t>(a.n_tiles, resident);
  kernel<<<static_cast<unsigned>(blocks), kLocThreads, smem, stream>>>(a);
}

template <int KT>
void launch_local_frames(const LocArgs& a, std::size_t smem, cudaStream_t stream) {
  const int f = a.frames / 256;
  if constexpr (KT <= 16) {
    if (f == 4) return launch_local<KT, 4>(a, smem, stream);
  }
  if (f == 2) return launch_local<KT, 2>(a, smem, stream);
  launch_local<KT, 1>(a, smem, stream);
}

// The launcher for each count of taps held, 4 to kLocMaxTaps by 4: entry kt / 4 - 1.
template <int... I>
constexpr auto local_launchers(std::integer_sequence<int, I...>) {
  return std::array{&launch_local_frames<4 * (I + 1)>...};
}
constexpr auto kLocLaunchers = local_launchers(std::make_integer_sequence<int, kLocMaxTaps / 4>{});

void launch_local_taps(const LocArgs& a, int kt, std::size_t smem, cudaStream_t stream) {
  kLocLaunchers[std::clamp(kt / 4, 1, kLocMaxTaps / 4) - 1](a, smem, stream);
}

}  // namespace

bool conv1d_encoder_local_supported(const Conv1dParams& p) {
  LocArgs a{};
  return local_geometry(a, p);
}

std::int64_t conv1d_encoder_local_tiles(const Conv1dParams& p) {
  LocArgs a{};
  return local_geometry(a, p) ? a.n_tiles : 0;
}

std::pair<int, int> set_encoder_local_tile(int channels, int frames_per_lane) {
  return {g_local_c.exchange(channels, std::memory_order_relaxed),
          g_local_f.exchange(frames_per_lane, std::memory_order_relaxed)};
}

int set_encoder_local_align(int floats) {
  return g_local_align.exchange(floats, std::memory_order_relaxed);
}

std::uint64_t encoder_local_aligned_launches() {
  return g_local_aligned_launches.load(std::memory_order_relaxed);
}

void launch_conv1d_encoder_local(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                 const float* bias, TensorView<float> y, cudaStream_t stream,
                                 const char* name) {
  LocArgs a{};
  set_encoder_args(a, p, x, w, bias, y);
  if (!local_geometry(a, p)) {
    throw Error(std::string(name) + ": the layer does not fit the local-order encoder");
  }
  if (a.n_tiles == 0) return;
  const int kt = local_taps(p.kernel_size);
  const std::size_t smem = sizeof(float) * static_cast<std::size_t>(kt + 2 * a.buf);
  if (a.align > 1) g_local_aligned_launches.fetch_add(1, std::memory_order_relaxed);
  launch_local_taps(a, kt, smem, stream);
  check_launch(name, p);
}

bool conv1d_depthwise_supported(const Conv1dParams& p) {
  return p.in_channels == p.groups && depthwise_per_thread(p) > 0;
}

void launch_conv1d_depthwise(const Conv1dParams& p, TensorView<const float> x, const float* w,
                             const float* bias, TensorView<float> y, cudaStream_t stream,
                             const char* name) {
  DwArgs a{};
  set_views(a, x, w, bias, y);
  const int pt = depthwise_per_thread(p);
  a.out_channels = p.out_channels;
  a.cout_g = p.out_channels / p.groups;
  a.t_tiles = (p.out_frames + kDwThreads * pt - 1) / (kDwThreads * pt);
  a.items = p.batch * p.out_channels * a.t_tiles;
  a.pad = p.pad_left;
  a.in_frames = p.in_frames;
  a.out_frames = p.out_frames;
  a.K = static_cast<int>(p.kernel_size);
  a.stride = static_cast<int>(p.stride);
  a.dilation = static_cast<int>(p.dilation);
  a.mode = to_pad_mode(p.padding_mode);
  a.window = static_cast<int>(depthwise_window(p, pt));
  const unsigned grid = grid_dim(a.items, kMaxGridX);
  const std::size_t smem = sizeof(float) * static_cast<std::size_t>(depthwise_smem_floats(p, pt));
  if (pt == 16) {
    conv1d_depthwise_kernel<16><<<grid, kDwThreads, smem, stream>>>(a);
  } else if (pt == 8) {
    conv1d_depthwise_kernel<8><<<grid, kDwThreads, smem, stream>>>(a);
  } else {
    conv1d_depthwise_kernel<4><<<grid, kDwThreads, smem, stream>>>(a);
  }
  check_launch(name, p);
}

bool conv_transpose1d_decoder_supported(const ConvTranspose1dParams& p) {
  if (p.dilation != 1 || p.stride < 2 || p.stride > 16 || p.kernel_size % p.stride != 0 ||
      p.kernel_size / p.stride > kDecMaxT) {
    return false;
  }
  // Its shared memory (up to 96 KB) must fit a block on this device.
  static const int optin = [] {
    int device = 0, bytes = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return bytes;
  }();
  const int ph = decoder_phases(p.stride);
  return sizeof(float) * (kDecWeightFloats + decoder_sum_floats(ph)) <=
         static_cast<std::size_t>(optin);
}

std::int64_t conv_transpose1d_decoder_blocks(const ConvTranspose1dParams& p) {
  DecArgs a{};
  set_block_range(a, p);
  return a.q_tiles * p.batch * p.out_channels;
}

double conv_transpose1d_decoder_wave_fill(const ConvTranspose1dParams& p) {
  DecArgs a{};
  set_block_range(a, p);
  const double tiles =
      static_cast<double>(p.batch * p.out_channels) * (a.q_end - a.qbase) / kDecBlocks;
  const double slots = static_cast<double>(kDecBlocksPerSm) * num_sms();
  return tiles / (std::ceil(tiles / slots) * slots);
}

void launch_conv_transpose1d_decoder(const ConvTranspose1dParams& p, TensorView<const float> x,
                                     const float* w, const float* bias, TensorView<float> y,
                                     cudaStream_t stream, const char* name) {
  DecArgs a{};
  set_views(a, x, w, bias, y);
  set_polyphase(a, p);
  const int ph = decoder_phases(p.stride);
  // Chunks of whole groups of 4 channels (the kernel computes whole groups, zero-padded).
  a.chunk = std::max(4, kDecWeightFloats / (a.T * ph) / 4 * 4);
  a.w_floats = (std::min(a.chunk, a.cin_g) + 3) / 4 * 4 * a.T * ph;
  set_block_range(a, p);
  // At most about four blocks per multiprocessor, each looping over tiles.
  const dim3 grid(grid_dim(std::min<std::int64_t>(a.rows * a.q_tiles, 4LL * num_sms()), kMaxGridX));
  const std::size_t smem =
      sizeof(float) * static_cast<std::size_t>(a.w_floats + decoder_sum_floats(ph));
  if (ph == 16) {
    launch_decoder<16>(a, grid, smem, stream);
  } else if (ph == 8) {
    launch_decoder<8>(a, grid, smem, stream);
  } else {
    launch_decoder<4>(a, grid, smem, stream);
  }
  check_launch(name, p);
}

}  // namespace convbank::detail::cuda
