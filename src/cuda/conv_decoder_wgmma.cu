// ConvTranspose1d decoders with few outputs per group (out/groups x K <= 32) on Hopper tensor
// cores at fp32 accuracy (3xTF32 wgmma, sm_90a). Such a layer moves its whole input once and
// little else (dec_tasnet: 537 MB in, 8 MB out); the FFMA decoder (conv_memory.cu) spends one
// multiply-add per input value, output channel and tap, and is bound by issuing them where
// out/groups x K grows (2 or 4 outputs, 20 taps). Here the multiply-adds go to the tensor
// cores, whose cost hardly changes with the column count. Which of the two runs a shape is the
// dispatcher's choice (conv_dispatch.cu, decoder_wgmma_wins()).
//
// With K a multiple of the stride s (dilation 1) the layer is a GEMM and an overlap-add:
//   P[q][n] = sum_ci x[ci][q] w[ci][n]          rows q = input frames, columns n = co K + k,
//   y[co][Q s + r - pad] = sum_j P[Q - j][co K + r + j s],   j < K / s.
// Every column is a real tap, so a non-finite input never meets a zero weight it would not
// meet in PyTorch's formula (padding taps up to a multiple of s would: Inf x 0).
//
// A tile is 128 rows of P (two m64 wgmma tiles) over the whole reduction, computed by one
// warpgroup, or by two of one m64 tile each where the reduction is long (launch_cols()), or, in
// the copy-engine-fed wide variant, up to 248 of 256 rows by four (kWG below):
//   A (activations) is loaded from global memory straight into the thread's fragment
//     registers. Fragment row g + 8h of warp w's 16 in m-tile m of its warpgroup's kM is frame
//     64 kM wg + 16 kM w + 16m + 8h + g (any row permutation works: the accumulators carry the
//     same one), so each 4-byte load instruction reads 8 consecutive frames of 4 channels (a
//     32-byte run per channel), for rows of any length and alignment. Loads run kAhead reduction
//     steps ahead of the split. Too few of these loads are in flight, and that bounds the kernel
//     (log step 83 in docs/performance.md: 0.211 ms of dec_tasnet's 0.216 without the wgmmas; the
//     same load pattern alone reads it in 0.201 ms with 12 warps per multiprocessor, as one
//     warpgroup per block runs, and in 0.137 with 32). Two warpgroups per block run up to 24 warps
//     (16 at 32 columns), 8 steps ahead (log step 85). With more than 64 channels per group the
//     copy engine brings the input into shared memory instead (kTma: dec_tasnet 0.171 ms against
//     0.254 with the loads above and 0.206 on the FFMA decoder, log step 90).
//   B (weights) is split once per block and group into K-major big/small planes that stay in
//     shared memory for the whole reduction (plane_offset's layout). With the copy engine the
//     two planes are one of twice the columns, so that a step's products are two wgmmas, not
//     three (kPair; dec_tasnet 0.171 vs 0.174-0.176 ms, log step 91).
//   The tensor cores accumulate kSumSteps steps (64 channels) from zero, then fp32 registers
//     add them up, so no truncating accumulation runs longer than 64 products (see
//     conv_wgmma.cu, kSsSumSteps).
//   The epilogue writes P to shared memory and each thread sums K / s values per output,
//     consecutive threads on consecutive output frames (coalesced stores).
// A tile owns the output blocks Q of its last 128 - H rows, H = K / s - 1: the first H rows
// are the halo its outputs need, computed again by the tile before.
//
// A stride-1 Conv1d of few outputs is the same GEMM with its taps reversed (DecLayer below):
// the vocoders' last layer (32 -> 1, K 7) moves its whole input once and little else too.
//
// Non-finite values: the split turns a non-finite input into a NaN small part, so the rows of P
// it feeds are NaN in every column; a tile whose P is not finite, or any tile when a weight is
// not, computes its outputs with the direct fp32 formula, whose NaN/Inf classes are PyTorch's.
#include <algorithm>
#include <atomic>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"  // smem_addr
#include "cuda/dispatch.hpp"
#include "cuda/tma.cuh"
#include "cuda/wgmma.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kRows = 128;            // rows (input frames) of P per tile
constexpr int kWideRows = 256;        // the same in the wide variant (four warpgroups)
constexpr int kMaxCols = 32;          // columns (out/groups x K) of the widest instantiation
constexpr int kMaxSmem = 113 * 1024;  // at least two blocks per multiprocessor

// The copy-engine-fed variant (kTma below): the input arrives in stages of 64 channels x the
// tile's rows, each as 4 bulk tensor copies of 16 "quad rows" (a quad row is four consecutive
// channels, 16-byte aligned together whatever the row length) x box_frames frames. A copy must
// start on a 16-byte boundary, so it starts up to 3 frames early (its lead); box_frames of 4 or
// 28 modulo 32 also put lines 2q and 2q + 1 8 banks apart (see the kernel). 128 rows take boxes
// of kBoxFrames; the wide variant's tiles use up to kWideBoxFrames - 4 of its kWideRows (the
// copy engine's box is at most 256 frames).
constexpr int kBoxFrames = kRows + 4;
constexpr int kWideBoxFrames = 252;
constexpr int stage_bytes_of(int box_frames) {
  return 4 * 16 * box_frames * 4;
}
constexpr int kMaxStages = 4;
constexpr int kTmaMaxSmem = 227 * 1024;  // one block per multiprocessor

struct DecArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  // Weight (ci, co, k) of group g is w[g w_g + ci w_ci + co w_co + k w_k]: ConvTranspose1d's
  // own layout, or a Conv1d's flipped in place (w then points at tap K - 1, w_k = -1).
  const float* w;
  std::int64_t w_g, w_ci, w_co;
  int w_k;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t groups;
  int cin_g, cout_g, K, stride;
  int taps;                     // K / stride: P rows per output
  int steps;                    // reduction steps of 8 channels, a multiple of 8
  int stages;                   // kTma: the ring's stages of stage_bytes
  int box_frames, stage_bytes;  // kTma: a copy's frames (its box), a stage's bytes
  int rows;  // rows of P a tile uses: kRows, or up to kWideBoxFrames - 4 (wide variant)
  int own;   // output blocks a tile owns: rows - (taps - 1)
  std::int64_t pad, in_frames, out_frames;
  std::int64_t q_first;    // first output block: pad / stride
  std::int64_t row_tiles;  // tiles per (batch, group)
  std::int64_t tiles;      // all tiles
  // kTma: the weight planes staged with a batch of loads in flight per thread (0: one at a
  // time; CONVBANK_CUDA_DECODER_BATCHED_PLANES=0 for A/B runs, log step 130), by 16-byte loads
  // where a plane row's columns are 16-byte aligned runs of the weights (vector_planes:
  // ConvTranspose1d's layout, out/groups x K a multiple of 4, the weights 16-byte aligned;
  // CONVBANK_CUDA_DECODER_VECTOR_PLANES=0 for A/B runs).
  int batched_planes, vector_planes;
};

// Shared memory of one block: the two weight planes, then P (tile_rows rows) with a row pitch of
// cols + 1 floats.
std::size_t smem_bytes(int steps, int cols, int tile_rows = kRows) {
  return (std::size_t{2} * steps * 8 * cols + std::size_t{1} * tile_rows * (cols + 1)) *
         sizeof(float);
}
// kTma: the stages first, from a 128-byte boundary (the copies' destinations), then the above,
// then two barriers per stage.
std::size_t tma_smem_bytes(int steps, int cols, int stages, int stage_bytes, int tile_rows) {
  return 128 + std::size_t{1} * stage_bytes * stages + smem_bytes(steps, cols, tile_rows) +
         16 * stages + 8;
}
// Rows of P the copy-engine kernel computes per tile.
constexpr int tile_rows_of(bool wide) {
  return wide ? kWideRows : kRows;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// d (+)= a * b, m64nNk8, A in registers; scale_d = 0 overwrites d.
__device__ __forceinline__ void wgmma_rs(float (&d)[8], const std::uint32_t (&a)[4],
                                         std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[16], const std::uint32_t (&a)[4],
                                         std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_rs(float (&d)[32], const std::uint32_t (&a)[4],
                                         std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{" CONVBANK_WGMMA_D32
      "}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : CONVBANK_WGMMA_D32_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

// The products of one step (x = hi + lo, w = big + small): hi x small + hi x big + lo x big.
// kPair: hi x [small | big] as one wgmma of twice the columns into d (the two halves of its
// columns, d[0 .. R) and d[R .. 2R), are added by the caller), and lo x big into e: two wgmmas
// instead of three. e is an accumulator of its own: one that overlaps d's upper half makes
// ptxas serialize the wgmmas (C7511).
template <bool kPair, int R, int R2>
__device__ __forceinline__ void wgmma_step(float (&d)[R2], float (&e)[R],
                                           const std::uint32_t (&hi)[4],
                                           const std::uint32_t (&lo)[4], std::uint64_t pair,
                                           std::uint64_t big, std::uint64_t small, int scale_d) {
  if constexpr (kPair) {
    static_assert(R2 == 2 * R, "a pair accumulator holds both halves");
    wgmma_rs(d, hi, pair, scale_d);
    wgmma_rs(e, lo, big, scale_d);
  } else {
    static_assert(R2 == R, "one accumulator");
    wgmma_rs(d, lo, big, scale_d);
    wgmma_rs(d, hi, small, 1);
    wgmma_rs(d, hi, big, 1);
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// kWG warpgroups per block, each owning kM = 2 / kWG m64 tiles of the 128 rows. Two warpgroups
// of one tile each hold half the registers per thread, so twice the warps (and the loads they
// keep in flight) fit a multiprocessor; the block's barriers and epilogue then cost more per
// tile, which long reductions amortize and short ones do not (launch_cols() picks).
//
// kWG = 4 (with kTma only, the wide variant): four warpgroups of one m64 tile each, 256 rows, of
// which a tile uses a.rows (up to 248, see wide_rows()): each copy reads runs of up to 1 KB per
// channel instead of 528 bytes, and the epilogue's barriers come half as often. Its 17 warps get
// 96 registers each (five warps share a scheduler's 16K registers), so a warpgroup keeps two
// fragment sets and waits for each step's wgmmas one step later, as without kTma. Three
// warpgroups (192 rows, 117 registers, four fragment sets) measured the same at dec_tasnet and
// slower on 128-channel layers (log step 96 in docs/performance.md).
//
// kTma: the loads in flight are the copy engine's, not the threads'. A producer warp (one
// thread issuing) copies each 64-channel stage of a tile into a ring of a.stages stages of
// shared memory, a transaction barrier per stage counting the bytes (full) and one counting
// the consumer warps that are done reading it (empty); the consumers read their fragments from
// there. A stage holds box u = channels 4 r + u of quad rows r < 16 (line r, box_frames
// floats). Reduction step j of the stage reads lines 8 (j & 1) .. + 7 of box j / 2: fragment
// column q from line 2q, column q + 4 from line 2q + 1. Lines are box_frames = 4 or 28 mod 32
// floats apart, so lines 2q start 8q or 24q banks apart and the 32 lanes' reads (8 consecutive
// frames of 4 lines) land in 32 banks; the weight planes take the same channel order
// (tma_channel()). The frames of a quad row past its channel's row are the next channel's: the
// consumers zero frames outside the row, and the copy engine zeros channels past the group and
// frames before channel 0's or after channel 3's. The block's barriers are named barriers of the
// consumers only (the producer runs ahead).
[[maybe_unused]] __host__ __device__ __forceinline__ int tma_channel(int r) {
  const int st = r >> 3, q = r & 3, c = (r >> 2) & 1, j = st & 7;
  return 4 * (16 * (st >> 3) + 8 * (j & 1) + 2 * q + c) + (j >> 1);
}

// kPair (with kTma only): the weight planes are one plane of 2 kN columns, small then big, so
// that hi x [small | big] is one wgmma (wgmma_step()): a step takes 2 wgmmas instead of 3.
template <int kN, int kWG, bool kTma, bool kPair>
__global__ void __launch_bounds__(128 * kWG + (kTma ? 32 : 0), kTma ? 1 : (kN == 16 ? 3 : 2))
    conv_transpose1d_decoder_wgmma_kernel(DecArgs a, const __grid_constant__ CUtensorMap x_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kWG <= 2 || (kWG == 4 && kTma), "the wide variant is fed by the copy engine");
  constexpr bool kWide = kWG == 4;
  constexpr int kThreads = 128 * kWG;  // the consumers (all threads without kTma)
  constexpr int kTileRows = tile_rows_of(kWide);
  constexpr int kM = kTileRows / (64 * kWG);  // m64 tiles per warpgroup
  // The copies' geometry: runtime for the wide variant, whose tiles' rows vary.
  const int box_frames = kWide ? a.box_frames : kBoxFrames;
  const int stage_bytes = kWide ? a.stage_bytes : stage_bytes_of(kBoxFrames);
  // Reduction steps whose loads are in flight ahead of the split: 8 steps with one m64 tile
  // per warpgroup (4 values per step and thread), 4 with two (8 steps spilled at 3 blocks).
  constexpr int kAhead = kTma ? 1 : kM == 1 ? 8 : 4;
  constexpr int kSumSteps = 8;  // steps (8 channels each) the tensor cores sum before fp32 does
  constexpr int kAcc = kN / 2;  // accumulator registers per m64 tile
  constexpr int kPitch = kN + 1;
  extern __shared__ __align__(128) float smem_raw[];
  float* smem = smem_raw;
  const float* ring = nullptr;
  std::uint32_t stage0 = 0, full0 = 0, empty0 = 0;
  const int plane = a.steps * 8 * kN;
  if constexpr (kTma) {
    const std::uint32_t base = smem_addr(smem_raw);
    stage0 = (base + 127) & ~127u;
    ring = smem_raw + (stage0 - base) / 4;
    smem = const_cast<float*>(ring) + a.stages * (stage_bytes / 4);
    full0 = (smem_addr(smem + 2 * plane + kTileRows * kPitch) + 7) & ~7u;
    empty0 = full0 + 8 * a.stages;
    if (threadIdx.x == 0) {
      for (int s = 0; s < a.stages; ++s) {
        mbar_init(full0 + 8 * s, 1);
        mbar_init(empty0 + 8 * s, kThreads / 32);
      }
      mbar_fence_init();
    }
    __syncthreads();  // the only barrier of the whole block: the producer leaves below
  }
  float* const ptile = smem + 2 * plane;
  const std::uint32_t big_addr = smem_addr(smem), small_addr = big_addr + plane * 4;
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  auto consumers_sync = [] {
    if constexpr (kTma) {
      bar_sync(1, kThreads);
    } else {
      __syncthreads();
    }
  };
  auto consumers_any = [](bool v) {
    if constexpr (kTma) {
      return bar_any(1, kThreads, v);
    } else {
      return __syncthreads_or(v) != 0;
    }
  };

  if constexpr (kTma) {
    if (tid >= kThreads) {  // the producer warp
      if (tid != kThreads) return;
      int slot = 0;
      std::uint32_t phase = 0;
      for (std::int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
        const std::int64_t bg = tile / a.row_tiles;
        const std::int64_t b = bg / a.groups, gr = bg - b * a.groups;
        const std::int64_t first = a.q_first + (tile - bg * a.row_tiles) * a.own;
        const int qb = static_cast<int>(first - (a.taps - 1));
        for (int k = 0; k < a.steps / 8; ++k) {
          mbar_wait(empty0 + 8 * slot, phase ^ 1);
          const std::uint32_t full = full0 + 8 * slot, dst = stage0 + slot * stage_bytes;
          mbar_expect(full, stage_bytes);
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int c0 = static_cast<int>(u * a.x_cs) + qb;
            tensor_copy_input(dst + u * (stage_bytes / 4), x_map, 1, c0 - (c0 & 3), 16 * k,
                              static_cast<int>(gr), static_cast<int>(b), full);
          }
          if (++slot == a.stages) {
            slot = 0;
            phase ^= 1;
          }
        }
      }
      return;
    }
  }

  // This thread's frames f0 + 16 m + 8 h: its warp's 16 x kM rows of its warpgroup's tiles.
  const int f0 = 64 * kM * (tid >> 7) + 16 * kM * ((tid >> 5) & 3) + (lane >> 2);
  const int cols = a.cout_g * a.K;
  // kTma: the offset (floats) of fragment value [c][m][h] in box 0's first 8 lines.
  int frag[2][kM][2];
  if constexpr (kTma) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          frag[c][m][h] = (2 * q + c) * box_frames + f0 + 16 * m + 8 * h;
        }
      }
    }
  }
  int slot = 0;
  std::uint32_t phase = 0;

  std::int64_t staged = -1;  // the group whose weights are in the planes
  bool w_bad = false;
  for (std::int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
    const std::int64_t bg = tile / a.row_tiles;
    const std::int64_t b = bg / a.groups, gr = bg - b * a.groups;
    if (gr != staged) {
      consumers_sync();  // the previous group's tiles are done with the planes
      bool ok = true;
      const float* wg = a.w + gr * a.w_g;
      // Plane entry e (row r, column n = co K + k): whether it holds a weight (not a channel
      // past the group or a column past out/groups x K), and that weight's offset from wg (which
      // a flipped Conv1d's w_k = -1 makes negative; int: a group's weights fit the planes in
      // shared memory, supported()).
      auto source = [&](int e, int& off) {
        const int r = e / kN, n = e - r * kN, co = n / a.K, k = n - co * a.K;
        const int ci = kTma ? tma_channel(r) : r;
        off = ci * static_cast<int>(a.w_ci) + co * static_cast<int>(a.w_co) + k * a.w_k;
        return ci < a.cin_g && n < cols;
      };
      auto put = [&](int e, float v) {
        const int r = e / kN, n = e - r * kN;
        std::uint32_t hi, lo;
        ok &= split_tf32(v, hi, lo);
        if constexpr (kPair) {
          smem[plane_offset(r, n, 2 * kN)] = __uint_as_float(lo);
          smem[plane_offset(r, n + kN, 2 * kN)] = __uint_as_float(hi);
        } else {
          smem[plane_offset(r, n, kN)] = __uint_as_float(hi);
          smem[plane + plane_offset(r, n, kN)] = __uint_as_float(lo);
        }
      };
      if (kTma && a.vector_planes) {
        // A plane row's columns are consecutive weights (ConvTranspose1d's layout), 4 of them
        // one 16-byte load: a thread's entries of the wide variant in one round trip.
        constexpr int kBatch = 4;
        const int quads = plane / 4;
        for (int q0 = tid; q0 < quads; q0 += kBatch * kThreads) {
          float4 v[kBatch];
#pragma unroll
          for (int i = 0; i < kBatch; ++i) {
            const int e = 4 * (q0 + i * kThreads), r = e / kN, n = e - r * kN;
            const int ci = tma_channel(r);
            const bool w = q0 + i * kThreads < quads && ci < a.cin_g && n < cols;
            v[i] = __ldg(reinterpret_cast<const float4*>(wg + (w ? ci * a.w_ci + n : 0)));
            if (!w) v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
#pragma unroll
          for (int i = 0; i < kBatch; ++i) {
            const int e = 4 * (q0 + i * kThreads);
            if (e < plane) {
              put(e, v[i].x);
              put(e + 1, v[i].y);
              put(e + 2, v[i].z);
              put(e + 3, v[i].w);
            }
          }
        }
      } else if (kTma && a.batched_planes) {
        // kBatch loads of a thread in flight together, then their splits. Loaded one at a time
        // (the PTX has that loop unrolled by two, each load used at once) a thread's 16 (wide
        // variant) to 64 entries cost as many round trips at the kernel's start, which its one
        // block per multiprocessor waits out with the copies' first stages full. 8 in flight
        // spilled in the wide variant; the consumers' own loads run 2-3 blocks per
        // multiprocessor, which cover each other.
        constexpr int kBatch = 4;
        for (int e0 = tid; e0 < plane; e0 += kBatch * kThreads) {
          float v[kBatch];
#pragma unroll
          for (int i = 0; i < kBatch; ++i) {
            const int e = e0 + i * kThreads;
            int off = 0;
            const bool w = e < plane && source(e, off);
            v[i] = __ldg(wg + (w ? off : 0));  // wg itself is a weight of the layer
            if (!w) v[i] = 0.0f;
          }
#pragma unroll
          for (int i = 0; i < kBatch; ++i) {
            if (e0 + i * kThreads < plane) put(e0 + i * kThreads, v[i]);
          }
        }
      } else {
        for (int e = tid; e < plane; e += kThreads) {
          int off = 0;
          put(e, source(e, off) ? __ldg(wg + off) : 0.0f);
        }
      }
      fence_proxy_async();  // the planes are read by wgmma (the async proxy)
      w_bad = consumers_any(!ok);
      staged = gr;
    }
    const std::int64_t first = a.q_first + (tile - bg * a.row_tiles) * a.own;  // owned blocks
    const std::int64_t qb = first - (a.taps - 1);  // input frame of P's row 0
    const float* xg = a.x + b * a.x_bs + gr * a.cin_g * a.x_cs;
    const float* xf = xg + (qb + f0);  // frame f0 of channel 0 (maybe outside the row)
    // kTma: box u's lead, the frames its copy starts early.
    int lead[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) lead[u] = (static_cast<int>(u * a.x_cs + qb)) & 3;
    bool in[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::int64_t t = qb + f0 + 16 * m + 8 * h;
        in[m][h] = t >= 0 && t < a.in_frames;
        if constexpr (kWide) in[m][h] = in[m][h] && f0 + 16 * m + 8 * h < a.rows;
      }
    }
    // Step st's values of this thread, [channel q or q + 4][m][h]; channels past the group's
    // read as zeros (the reduction runs in whole groups of kSumSteps steps).
    const float* xq = xf + q * a.x_cs;
    const std::int64_t step_stride = 8 * a.x_cs, half_stride = 4 * a.x_cs;
    auto load = [&](float(&v)[2][kM][2], int st) {
      const float* p = xq + st * step_stride;
      // The empty asm keeps the loads where they stand: hoisted to the top of the unrolled
      // group they would hold 8 steps of values (211 registers and spills at 3 blocks).
      asm volatile("" : "+l"(p));
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const bool ch = 8 * st + q + 4 * c < a.cin_g;
#pragma unroll
        for (int m = 0; m < kM; ++m) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            v[c][m][h] = ch && in[m][h] ? __ldg(p + c * half_stride + 16 * m + 8 * h) : 0.0f;
          }
        }
      }
    };

    float raw[kAhead][2][kM][2];
    if constexpr (!kTma) {
#pragma unroll
      for (int u = 0; u < kAhead; ++u) load(raw[u], u);
    }
    float acc[kM][kPair ? 2 * kAcc : kAcc], sum[kM][kAcc];
    float acc_lo[kM][kAcc];  // kPair: lo x big
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) sum[m][i] = 0.0f;
    }
    // [fragment set][m][fragment register]: two sets (the step's and the one before, which a
    // wait retires), or with kTma one per step of the stage, whose wgmmas then all stay in
    // flight until the stage's end (the block's two warpgroups alone must keep the tensor cores
    // busy: with a wait per step the decoder measured 0.176 ms at dec_tasnet, log step 90); the
    // wide variant's four warpgroups have registers for two.
    constexpr int kSets = kTma && !kWide ? kSumSteps : 2;
    std::uint32_t hi[kSets][kM][4], lo[kSets][kM][4];
    // One group of kSumSteps steps per iteration (with kTma, one stage), unrolled and ended by a
    // full wait: no wgmma is in flight across a branch or the loop's back edge (ptxas would wait
    // there itself).
    for (int st0 = 0; st0 < a.steps; st0 += kSumSteps) {
      const float* stage = ring;
      if constexpr (kTma) {
        mbar_wait(full0 + 8 * slot, phase);
        stage = ring + slot * (stage_bytes / 4);
      }
#pragma unroll
      for (int u = 0; u < kSumSteps; ++u) {
        const int st = st0 + u, bb = u % kSets;
        float(&rv)[2][kM][2] = raw[u % kAhead];
        if constexpr (kTma) {
          // Step u: box u / 2, lines 8 (u & 1) + ...
          const float* su = stage + (u >> 1) * (stage_bytes / 16) + (u & 1) * 8 * box_frames;
#pragma unroll
          for (int c = 0; c < 2; ++c) {
#pragma unroll
            for (int m = 0; m < kM; ++m) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                rv[c][m][h] = in[m][h] ? su[frag[c][m][h] + lead[u >> 1]] : 0.0f;
              }
            }
          }
        }
        // Fragment register i: row g (+8 for odd i), column q (+4 for i >= 2).
#pragma unroll
        for (int m = 0; m < kM; ++m) {
#pragma unroll
          for (int i = 0; i < 4; ++i) split_tf32(rv[i >> 1][m][i & 1], hi[bb][m][i], lo[bb][m][i]);
        }
        if constexpr (kTma) {
          if (u + 1 == kSumSteps) {  // the stage is read: hand it back
            __syncwarp();
            if (lane == 0) mbar_arrive(empty0 + 8 * slot);
          }
        } else {
          load(rv, st + kAhead);
        }
        std::uint64_t db, ds, dp = 0;
        if constexpr (kPair) {
          const std::uint32_t step_bytes = st * (kN / 4) * 256;
          dp = b_desc(big_addr + step_bytes);
          db = b_desc(big_addr + step_bytes + (kN / 8) * 256);
          ds = 0;
        } else {
          const std::uint32_t step_bytes = st * (kN / 8) * 256;
          db = b_desc(big_addr + step_bytes);
          ds = b_desc(small_addr + step_bytes);
        }
        wgmma_fence();
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          wgmma_step<kPair, kAcc>(acc[m], acc_lo[m], hi[bb][m], lo[bb][m], dp, db, ds, u != 0);
        }
        wgmma_commit();
        if constexpr (kSets < kSumSteps) {
          // The set the next step splits into is free once the step kSets back is done.
          if (u + 1 < kSumSteps && (!kTma || u + 1 >= kSets)) {
            wgmma_wait<kSets - 1>();
            pin_operands(hi[(u + 1) % kSets], lo[(u + 1) % kSets]);
          }
        }
      }
      if constexpr (kTma) {
        if (++slot == a.stages) {
          slot = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int set = 0; set < kSets; ++set) pin_operands(hi[set], lo[set]);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        fence_operands(acc[m]);
        if constexpr (kPair) fence_operands(acc_lo[m]);
      }
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) {
          if constexpr (kPair) {
            sum[m][i] += (acc[m][kAcc + i] + acc_lo[m][i]) + acc[m][i];
          } else {
            sum[m][i] += acc[m][i];
          }
        }
      }
    }

    // A non-finite input leaves NaN in every column of its rows of P (its small part is NaN),
    // so a finite P is a finite input (checking P, not each split, saves about 50 registers).
    bool ok = true;
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) ok &= isfinite(sum[m][i]);
    }
    // P to shared memory: accumulator [m][4j + v] is fragment row g + 8 (v / 2), column
    // 8j + 2q + v % 2.
    const bool bad = consumers_any(!ok) || w_bad;
    if (!bad) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            ptile[(f0 + 16 * m + 8 * (v >> 1)) * kPitch + 8 * j + 2 * q + (v & 1)] =
                sum[m][4 * j + v];
          }
        }
      }
    }
    consumers_sync();

    // Output frames u - pad of the owned blocks, u = Q s + r.
    const std::int64_t s = a.stride;
    const std::int64_t u_lo = std::max(a.pad, first * s);
    const std::int64_t u_hi = std::min(a.pad + a.out_frames, (first + a.own) * s);
    const int n_u = static_cast<int>(u_hi - u_lo);
    float* yg = a.y + b * a.y_bs + gr * a.cout_g * a.y_cs - a.pad;
    const int r_lo = static_cast<int>(u_lo - first * s);
    for (int co = 0; co < a.cout_g; ++co) {
      const float bias = a.bias != nullptr ? __ldg(a.bias + gr * a.cout_g + co) : 0.0f;
      for (int e = tid; e < n_u; e += kThreads) {
        const int rel = r_lo + e;  // from block `first`'s frame 0
        const int qi = rel / a.stride, r = rel - qi * a.stride;
        float v = bias;
        if (!bad) {
          const float* pr = ptile + (qi + a.taps - 1) * kPitch + co * a.K + r;
          for (int j = 0; j < a.taps; ++j) v += pr[j * (a.stride - kPitch)];
        } else {
          const std::int64_t Q = first + qi;
          const float* wc = a.w + gr * a.w_g + co * a.w_co + r * a.w_k;
          for (int j = 0; j < a.taps; ++j) {
            if (Q - j < 0 || Q - j >= a.in_frames) continue;
            for (int ci = 0; ci < a.cin_g; ++ci) {
              v = fmaf(__ldg(xg + ci * a.x_cs + Q - j), __ldg(wc + ci * a.w_ci + j * s * a.w_k), v);
            }
          }
        }
        yg[co * a.y_cs + u_lo + e] = v;
      }
    }
    consumers_sync();  // the next tile rewrites P
  }
#endif
}

// The layer as the kernel sees it: a ConvTranspose1d, or a stride-1 Conv1d turned into one
// (Conv1d's y[t] = sum_k x[t + k - pad_left] w[k] is ConvTranspose1d's with the taps reversed
// and padding K - 1 - pad_left).
struct DecLayer {
  std::int64_t batch, groups, cin_g, cout_g, K, stride, dilation, pad, in_frames, out_frames;
};

DecLayer layer_of(const ConvTranspose1dParams& p) {
  return {p.batch,
          p.groups,
          p.in_channels / p.groups,
          p.out_channels / p.groups,
          p.kernel_size,
          p.stride,
          p.dilation,
          p.padding,
          p.in_frames,
          p.out_frames};
}

DecLayer layer_of(const Conv1dParams& p) {
  return {p.batch,
          p.groups,
          p.in_channels / p.groups,
          p.out_channels / p.groups,
          p.kernel_size,
          1,
          p.dilation,
          p.kernel_size - 1 - p.pad_left,
          p.in_frames,
          p.out_frames};
}

// Columns out/groups x K, padded to an instantiation's 16 or 32.
int padded_cols(const DecLayer& l) {
  return l.cout_g * l.K <= 16 ? 16 : 32;
}

// Reduction steps of 8 channels, in whole groups of the kernel's kSumSteps = 8.
int steps_of(const DecLayer& l) {
  return static_cast<int>((l.cin_g + 63) / 64 * 8);
}

template <int kN, int kWG, bool kTma, bool kPair>
bool kernel_ready() {
  static const bool ok = [] {
    const bool set =
        cudaFuncSetAttribute(conv_transpose1d_decoder_wgmma_kernel<kN, kWG, kTma, kPair>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kTma ? kTmaMaxSmem : kMaxSmem) == cudaSuccess;
    if (!set) cudaGetLastError();
    return set;
  }();
  return ok;
}

std::atomic<bool> g_pair_on{!env_off("CONVBANK_CUDA_DECODER_PAIR")};
std::atomic<std::uint64_t> g_pair_launches{0};

bool pair_on() {
  return g_pair_on.load(std::memory_order_relaxed);
}

// The pair layout only where the copy engine feeds the kernel: with the consumers' own loads
// (three blocks per multiprocessor at 16 columns) the pair's wider accumulator leaves ptxas too
// few registers to keep the wgmmas in flight (C7511: serialized).
template <int kN, int kWG, bool kTma>
bool kernel_ready() {
  return kTma && pair_on() ? kernel_ready<kN, kWG, kTma, kTma>()
                           : kernel_ready<kN, kWG, kTma, false>();
}

template <int kN>
bool kernels_ready() {
  return kernel_ready<kN, 1, false>() && kernel_ready<kN, 2, false>();
}

bool supported(const DecLayer& l) {
  if (l.dilation != 1 || l.stride < 1 || l.K % l.stride != 0 || l.pad < 0) return false;
  if (l.K / l.stride > 32 || l.cout_g * l.K > kMaxCols || l.cin_g < 8) return false;
  const int n = padded_cols(l);
  if (smem_bytes(steps_of(l), n) > kMaxSmem) return false;
  return wgmma_available() && (n == 16 ? kernels_ready<16>() : kernels_ready<32>());
}

std::atomic<bool> g_tma_on{!env_off("CONVBANK_CUDA_DECODER_TMA")};
const bool g_batched_planes = !env_off("CONVBANK_CUDA_DECODER_BATCHED_PLANES");
const bool g_vector_planes = !env_off("CONVBANK_CUDA_DECODER_VECTOR_PLANES");
std::atomic<std::uint64_t> g_tma_launches{0};

// The copy-engine-fed variant where the layer's shape allows it: channels per group a multiple
// of 4 and more than 64 of them (two warpgroups per block, launch_cols()). With 64 or fewer,
// one stage per tile, it measured slower than the consumers' own loads at two blocks per
// multiprocessor (log step 90 in docs/performance.md: 8 x 32 -> 1 on 131072 frames, K 7, 0.162
// vs 0.108 ms; 64 -> 1 0.164 vs 0.124).
bool tma_shape(const DecLayer& l) {
  return g_tma_on.load(std::memory_order_relaxed) && l.cin_g % 4 == 0 && steps_of(l) >= 16;
}

// The copy-engine-fed variant's ring (a.stage_bytes per stage) where at least two stages fit
// beside the planes and its input map, 0 where it does not apply: tma_shape(), four channels
// together 16-byte aligned (the view's start and batch stride 16-byte aligned), frame
// coordinates within 2^30, the driver's tensor-map encoder present and accepting the map; `map`
// is then the input as (4 x x_cs frames, quad row, group, batch), read in boxes of
// a.box_frames frames, for the wide variant or the 128-row kernel.
int tma_stages(const DecArgs& a, const DecLayer& l, bool wide, CUtensorMap& map) {
  if (!tma_shape(l)) return 0;
  const TensorMapEncode encode = tensor_map_encoder();
  constexpr std::int64_t kCoordMax = std::int64_t{1} << 30;
  if (encode == nullptr || reinterpret_cast<std::uintptr_t>(a.x) % 16 != 0 || a.x_bs % 4 != 0 ||
      4 * a.x_cs + l.in_frames + 2 * tile_rows_of(wide) >= kCoordMax ||
      l.pad / l.stride + tile_rows_of(wide) >= kCoordMax) {
    return 0;
  }
  const int n = padded_cols(l);
  const int tile_rows = tile_rows_of(wide);
  const std::size_t fixed = tma_smem_bytes(steps_of(l), n, 0, a.stage_bytes, tile_rows);
  const int fit = static_cast<int>((kTmaMaxSmem - std::min<std::size_t>(fixed, kTmaMaxSmem)) /
                                   (a.stage_bytes + 16));
  const int stages = std::min(fit, kMaxStages);
  if (stages < 2) return 0;
  const bool ok = encode_quad_rows(encode, map, a.x, a.x_cs, a.x_bs, l.cin_g, l.groups, l.batch,
                                   a.box_frames, 16);
  const bool ready = n == 16 ? (wide ? kernel_ready<16, 4, true>() : kernel_ready<16, 2, true>())
                             : !wide && kernel_ready<32, 2, true>();
  return ok && ready ? stages : 0;
}

// The wide variant (256-row tiles, four consumer warpgroups; kAuto where its tiles load the
// multiprocessors at least as evenly as 128-row ones, CONVBANK_CUDA_DECODER_WIDE=0 never, =1
// wherever it fits; set_decoder_wide_policy for the tests). 16 columns only: with 32 the pair's
// accumulators spill in its 96 registers.
std::atomic<WgmmaPolicy> g_wide{env_policy("CONVBANK_CUDA_DECODER_WIDE")};
std::atomic<std::uint64_t> g_wide_launches{0};

// The box of a tile of `rows` rows: the lead (up to 3 frames) and a multiple of 4 frames that is
// 4 or 28 modulo 32 (conflict-free fragment reads, see the kernel).
int box_frames_for(int rows) {
  int b = (rows + 3 + 3) / 4 * 4;
  while (b % 32 != 4 && b % 32 != 28) b += 4;
  return b;
}

// a's tiles for rows of P per tile.
void set_tiles(DecArgs& a, const DecLayer& l, int rows) {
  a.rows = rows;
  a.box_frames = box_frames_for(rows);
  a.stage_bytes = stage_bytes_of(a.box_frames);
  a.own = rows - (a.taps - 1);
  const std::int64_t q_last = (l.pad + l.out_frames - 1) / l.stride;
  a.row_tiles = (q_last - a.q_first + a.own) / a.own;
  a.tiles = a.row_tiles * l.batch * l.groups;
}

// The copy-engine decoder's time, in rows of P, on its busiest multiprocessor (one block each):
// its tiles times their rows and a per-tile cost (the epilogue's barriers, the halo), about 16
// rows.
std::int64_t busiest_rows(const DecArgs& a) {
  const std::int64_t sms = num_sms();
  return (a.tiles + sms - 1) / sms * (a.rows + 16);
}

// The wide variant's rows per tile (a multiple of 8 from 192 to what a box holds, so that the
// last warpgroup always has rows), the count whose tiles load the multiprocessors most evenly;
// 0 where the policy or the layer rule it out (kAuto: fewer than two tiles per multiprocessor,
// or a busiest multiprocessor with more rows to compute than 128-row tiles would give it).
int wide_rows(const DecArgs& a, const DecLayer& l) {
  const WgmmaPolicy policy = g_wide.load(std::memory_order_relaxed);
  if (policy == WgmmaPolicy::kNever || padded_cols(l) != 16) return 0;
  DecArgs t = a;
  int best = 0;
  std::int64_t best_cost = 0;
  for (int rows = kWideBoxFrames - 4; rows >= kWideRows - 64; rows -= 8) {
    set_tiles(t, l, rows);
    const std::int64_t cost = busiest_rows(t);
    if (best == 0 || cost < best_cost) {
      best = rows;
      best_cost = cost;
    }
  }
  if (policy == WgmmaPolicy::kAlways) return best;
  set_tiles(t, l, best);
  if (t.tiles < 2 * std::int64_t{num_sms()} || best_cost > busiest_rows(a)) return 0;
  return best;
}

template <int kN, int kWG, bool kTma, bool kPair>
void launch_pair(const DecArgs& a, const CUtensorMap& map, std::size_t smem, cudaStream_t stream) {
  constexpr int kThreads = 128 * kWG + (kTma ? 32 : 0);
  const int per_sm =
      resident_blocks<conv_transpose1d_decoder_wgmma_kernel<kN, kWG, kTma, kPair>>(kThreads, smem);
  const std::int64_t resident = std::int64_t{per_sm} * num_sms();
  conv_transpose1d_decoder_wgmma_kernel<kN, kWG, kTma, kPair>
      <<<grid_dim(std::min(a.tiles, resident), kMaxGridX), kThreads, smem, stream>>>(a, map);
}

template <int kN, int kWG, bool kTma>
void launch_with(const DecArgs& a, const CUtensorMap& map, std::size_t smem, cudaStream_t stream) {
  if (kTma && pair_on()) {
    launch_pair<kN, kWG, kTma, kTma>(a, map, smem, stream);
  } else {
    launch_pair<kN, kWG, kTma, false>(a, map, smem, stream);
  }
}

// Two warpgroups per block from 128 input channels per group (16 steps) up: on the H200 (log
// step 85 in docs/performance.md, ms, two warpgroups vs one) 256 -> 1, K 20, s 10 0.104 vs
// 0.154, 256 -> 4, K 8, s 4 0.137 vs 0.190, 8 x 256 -> 1 on 40000 frames 0.118 vs 0.141, 512
// -> 1, K 16, s 8 0.224 vs 0.227; but 32 -> 1, K 7 (Conv1d, 8 steps, half of them padding)
// 0.122 vs 0.104 and 64 -> 1 0.134 vs 0.126. CONVBANK_CUDA_DECODER_WARPGROUPS=1|2 forces one
// (A/B runs; read once).
// The copy-engine-fed variant always runs two (tma_shape()), or four in its wide variant.
template <int kN>
void launch_cols(const DecArgs& a, const CUtensorMap& map, std::size_t smem, cudaStream_t stream) {
  static const int forced = env_int("CONVBANK_CUDA_DECODER_WARPGROUPS");
  if (forced == 2 || (forced != 1 && a.steps >= 16)) {
    launch_with<kN, 2, false>(a, map, smem, stream);
  } else {
    launch_with<kN, 1, false>(a, map, smem, stream);
  }
}

// a's views and weight strides are set; the rest comes from the layer.
void launch(DecArgs a, const DecLayer& l, cudaStream_t stream, const char* name,
            const LaunchShape& shape) {
  a.groups = l.groups;
  a.cin_g = static_cast<int>(l.cin_g);
  a.cout_g = static_cast<int>(l.cout_g);
  a.K = static_cast<int>(l.K);
  a.stride = static_cast<int>(l.stride);
  a.taps = a.K / a.stride;
  a.steps = steps_of(l);
  a.pad = l.pad;
  a.in_frames = l.in_frames;
  a.out_frames = l.out_frames;
  a.q_first = l.pad / l.stride;
  a.batched_planes = g_batched_planes ? 1 : 0;
  // Plane row r's columns n are weights r w_ci + n: 4 of them one aligned float4.
  const std::int64_t cols = l.cout_g * l.K;
  a.vector_planes = g_batched_planes && g_vector_planes && a.w_k == 1 && a.w_co == l.K &&
                    cols % 4 == 0 && a.w_ci % 4 == 0 && a.w_g % 4 == 0 &&
                    reinterpret_cast<std::uintptr_t>(a.w) % 16 == 0;
  set_tiles(a, l, kRows);
  if (l.out_frames == 0 || a.tiles == 0) return;
  const int n = padded_cols(l);
  CUtensorMap map{};
  bool wide = false;
  if (tma_shape(l)) {
    if (const int rows = wide_rows(a, l); rows > 0) {
      DecArgs w = a;
      set_tiles(w, l, rows);
      w.stages = tma_stages(w, l, true, map);
      if (w.stages > 0) {
        a = w;
        wide = true;
      }
    }
    if (!wide) a.stages = tma_stages(a, l, false, map);
  }
  if (a.stages > 0) {
    g_tma_launches.fetch_add(1, std::memory_order_relaxed);
    if (pair_on()) g_pair_launches.fetch_add(1, std::memory_order_relaxed);
    if (wide) g_wide_launches.fetch_add(1, std::memory_order_relaxed);
    const std::size_t smem =
        tma_smem_bytes(a.steps, n, a.stages, a.stage_bytes, tile_rows_of(wide));
    if (wide) {
      launch_with<16, 4, true>(a, map, smem, stream);
    } else if (n == 16) {
      launch_with<16, 2, true>(a, map, smem, stream);
    } else {
      launch_with<32, 2, true>(a, map, smem, stream);
    }
  } else {
    const std::size_t smem = smem_bytes(a.steps, n);
    if (n == 16) {
      launch_cols<16>(a, map, smem, stream);
    } else {
      launch_cols<32>(a, map, smem, stream);
    }
  }
  check_launch(name, shape);
}

}  // namespace

void set_decoder_tma(bool on) {
  g_tma_on.store(on, std::memory_order_relaxed);
}

bool decoder_tma() {
  return g_tma_on.load(std::memory_order_relaxed);
}

std::uint64_t decoder_tma_launches() {
  return g_tma_launches.load(std::memory_order_relaxed);
}

void set_decoder_pair(bool on) {
  g_pair_on.store(on, std::memory_order_relaxed);
}

bool decoder_pair() {
  return pair_on();
}

std::uint64_t decoder_pair_launches() {
  return g_pair_launches.load(std::memory_order_relaxed);
}

void set_decoder_wide_policy(WgmmaPolicy policy) {
  g_wide.store(policy, std::memory_order_relaxed);
}

WgmmaPolicy decoder_wide_policy() {
  return g_wide.load(std::memory_order_relaxed);
}

std::uint64_t decoder_wide_launches() {
  return g_wide_launches.load(std::memory_order_relaxed);
}

bool conv_transpose1d_decoder_wgmma_supported(const ConvTranspose1dParams& p) {
  return supported(layer_of(p));
}

bool conv_transpose1d_decoder_wgmma_tma_shape(const ConvTranspose1dParams& p) {
  return tma_shape(layer_of(p));
}

bool conv1d_few_outputs_wgmma_supported(const Conv1dParams& p) {
  // Reflect, replicate and circular padding go through the dispatcher's edge pass.
  return p.stride == 1 && p.padding_mode == PaddingMode::kZeros && supported(layer_of(p));
}

void launch_conv_transpose1d_decoder_wgmma(const ConvTranspose1dParams& p,
                                           TensorView<const float> x, const float* w,
                                           const float* bias, TensorView<float> y,
                                           cudaStream_t stream, const char* name) {
  const DecLayer l = layer_of(p);
  DecArgs a{};
  set_views(a, x, w, bias, y);
  a.w_co = l.K;
  a.w_ci = l.cout_g * l.K;
  a.w_g = l.cin_g * a.w_ci;
  a.w_k = 1;
  launch(a, l, stream, name, p);
}

void launch_conv1d_few_outputs_wgmma(const Conv1dParams& p, TensorView<const float> x,
                                     const float* w, const float* bias, TensorView<float> y,
                                     cudaStream_t stream, const char* name) {
  const DecLayer l = layer_of(p);
  DecArgs a{};
  set_views(a, x, w + (l.K - 1), bias, y);
  a.w_ci = l.K;
  a.w_co = l.cin_g * l.K;
  a.w_g = l.cout_g * a.w_co;
  a.w_k = -1;
  launch(a, l, stream, name, p);
}

}  // namespace convbank::detail::cuda
