// Kernels for layers bound by memory traffic rather than arithmetic: one-channel encoders
// (1 -> many), depthwise layers and many -> few decoders. Each moves every element of its big
// tensor once, in whole 128-byte lines, and keeps the arithmetic in registers:
//   conv1d_encoder_ffma          one input channel per group, >= 16 outputs per group: a block
//                                stages its input window once in shared memory, split into
//                                `stride` phase rows so that lanes on consecutive frames read
//                                consecutive words, and writes 128 frames x 64 channels.
//   conv1d_depthwise_staged      one input channel per group, < 16 outputs per group: a block
//                                stages the window of 1024..4096 frames of one row.
//   conv_transpose1d_decoder_ffma  few outputs per group (decoders), stride 2..16, K a multiple
//                                of the stride: each lane reads 4 consecutive input frames of a
//                                channel and streams all channels, adding its register sums to
//                                running sums in shared memory every 32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"

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

struct EncArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t batch, cout_g, groups, c_tiles, t_tiles;
  std::int64_t pad, in_frames, out_frames;
  int K, stride, dilation, mode;
  int window, phase_len;  // staged window (floats) and its length per phase row
  // i / stride == __umulhi(i, s_magic) for every window position i (stride >= 2): the staging
  // loop's integer division by a runtime value was about 20 instructions per word.
  unsigned s_magic;
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

bool conv1d_encoder_supported(const Conv1dParams& p) {
  return p.in_channels == p.groups && p.out_channels / p.groups >= 16 &&
         encoder_smem_floats(p) <= kEncSmemFloats;
}

void launch_conv1d_encoder(const Conv1dParams& p, TensorView<const float> x, const float* w,
                           const float* bias, TensorView<float> y, cudaStream_t stream,
                           const char* name) {
  EncArgs a{};
  set_views(a, x, w, bias, y);
  a.batch = p.batch;
  a.cout_g = p.out_channels / p.groups;
  a.groups = p.groups;
  a.t_tiles = (p.out_frames + kEncFrames - 1) / kEncFrames;
  a.pad = p.pad_left;
  a.in_frames = p.in_frames;
  a.out_frames = p.out_frames;
  a.K = static_cast<int>(p.kernel_size);
  a.stride = static_cast<int>(p.stride);
  a.dilation = static_cast<int>(p.dilation);
  a.mode = to_pad_mode(p.padding_mode);
  a.window = static_cast<int>(encoder_window(p));
  a.phase_len = static_cast<int>(encoder_phase_len(p));
  a.s_magic = a.stride >= 2 ? static_cast<unsigned>(((1ULL << 32) + a.stride - 1) / a.stride) : 0u;
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
