// Pointwise Conv1d (K = 1, stride 1) on Hopper tensor cores at fp32 accuracy, with the
// activations split in registers (3xFP16 wgmma, sm_90a).
//
// A pointwise layer is a GEMM per (batch, group): y[co][t] = sum_ci w[co][ci] x[ci][t - pad].
// On the shared-memory-operand kernel (conv_wgmma.cu) a producer warp splits every input value
// into fp16 planes in shared memory, and that split bounds it (tcn_pointwise: 0.40 ms against
// a 0.16 ms memory floor, log step 105 in docs/performance.md). Here the consumers split their
// own fragments in registers, where wgmma takes A from: nothing is written back to shared
// memory and no warp serves the others.
//
// Rows (M) are output frames, columns (N) 64 output channels, the reduction the input channels.
//   A (activations): the copy engine brings each 32-channel stage of a tile of 64 frames per
//     consumer warpgroup into a ring of shared memory as 4 boxes of 8 "quad rows" (four
//     consecutive channels, 16-byte aligned together whatever the row length; the tensor-core
//     decoder's copies, conv_decoder_wgmma.cu). Each consumer thread reads its fragment values
//     from there: in fp16 step t of a stage, fragment column 2q + e + 8c is line 2q + c of box
//     2t + e, i.e. channel 4 (2q + c) + 2t + e. Lines are 4 mod 32 floats apart, so the 32 lanes
//     of a read (8 consecutive frames of 4 lines) hit 32 banks.
//   Scale: fp16 holds 11 bits and exponents down to 2^-14, so each row (frame) of a stage is
//     scaled by the power of two that puts its largest magnitude in [2^14, 2^15) (the max over
//     the 32 channels, from the 4 lanes that share the row); the stage's products then
//     accumulate from zero in the tensor cores and are added to fp32 sums times the inverse
//     scale. The tensor cores add with truncation, and 64 reduction rows stay within the
//     accuracy bar where 128 did not (log step 77): a stage is 32.
//   Split: y = x s = hi + lo, hi = fp16(y), lo = fp16(y - hi) (the rest is exact in fp32); the
//     products hi wh + lo wh + hi wl drop lo wl, 2^-22 of a product.
//   B (weights): split once per call by a small kernel into K-major hi/lo fp16 planes in a
//     workspace, each column scaled by its own power of two (undone in the epilogue with the
//     bias). Each stage's planes (8 KB per column tile) come into the ring slot with its input,
//     so that no plane is resident: the ring then holds 6 stages (150 KB of input in flight per
//     multiprocessor, against 100 KB beside 128 KB of resident planes: 1-3 % faster on the
//     pointwise rows of log step 120) and any number of input channels fits.
//   Two column tiles per block tile (kP = 2) where a group's column tiles pair up: each stage's
//     input is copied and split once for 128 output channels (tcn_pointwise 0.29 against 0.36
//     ms with one; log step 120).
// Tiles run with the column tile fastest, so that the blocks computing the other column tiles
// of the same frames run at the same time and their copies find the input in L2.
//
// Non-finite values: a NaN or Inf input makes its row's products NaN (Inf - Inf in the split),
// a non-finite weight its column's. Every output that comes out non-finite (those, and sums
// that overflow) is computed again with the direct fp32 formula, whose NaN/Inf classes are
// PyTorch's.
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"  // smem_addr
#include "cuda/dispatch.hpp"
#include "cuda/tma.cuh"
#include "cuda/wgmma.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kCols = 64;           // output channels per tile (N)
constexpr int kStageChannels = 32;  // reduction rows per stage (2 fp16 steps)
constexpr int kMaxStages = 6;
constexpr int kMaxSmem = 227 * 1024;
// A stage's hi and lo weight planes for one column tile (32 rows x 64 columns of fp16).
constexpr int kStageWBytes = 2 * kStageChannels * kCols * 2;

// kWG consumer warpgroups of one m64 tile each: the tile's rows (output frames), a copy's frames
// (the rows and a lead of up to 3; 4 mod 32, so that the reads are conflict-free), a box of 8
// quad rows, a stage of 4 boxes.
template <int kWG>
struct Geometry {
  static constexpr int kRows = 64 * kWG;
  static constexpr int kConsumers = 128 * kWG;
  static constexpr int kThreads = kConsumers + 32;  // and the producer warp
  // Two column tiles per block tile (kP = 2) keep 64 running sums per thread, more than the 128
  // registers a launch of 13 warps gives each (4 warps on a scheduler): the producer is then a
  // whole warpgroup that hands its registers to the consumers (setmaxnreg; the sum must not
  // exceed the launch's allocation).
  static constexpr int kWideThreads = kConsumers + 128;
  static constexpr int kLaunchRegs = 65536 / kWideThreads / 8 * 8;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs =
      std::min(240, ((kWG + 1) * kLaunchRegs - kProducerRegs) / kWG / 8 * 8);
  template <int kP>
  static constexpr int threads() {
    return kP == 2 ? kWideThreads : kThreads;
  }
  static constexpr int kBoxFrames = kRows + 4;
  static_assert(kBoxFrames % 32 == 4, "lines 4 mod 32 floats apart: conflict-free reads");
  static constexpr int kBoxFloats = 8 * kBoxFrames;
  static constexpr int kStageBytes = 4 * kBoxFloats * 4;
};

struct PwArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;  // (groups x cout_g, cin_g), K = 1
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t groups;
  int cin_g, cout_g;
  int rows;               // output frames per tile: 64 per consumer warpgroup
  int stages;             // stages of 32 channels per tile (the planes' depth / 32)
  int ring;               // stages in the shared-memory ring
  const __half* wplanes;  // (group x column tile, stage) blocks of kStageWBytes
  const float* wscale;    // each column's inverse scale, (group x column tile) x kCols
  int col_tiles;          // column tiles per group
  int col_units;          // units of kP column tiles per group (a block tile's columns)
  std::int64_t gc;        // groups x col_units: the fastest tile index
  std::int64_t pad, in_frames, out_frames;
  std::int64_t row_tiles;  // tiles of kRows frames per row
  std::int64_t tiles;      // batch x row_tiles x gc
};

// Plane row r holds input channel pw_channel(r) of the group: within each 32-channel stage,
// fp16 step t, column k = 2q + e + 8c reads channel 4 (2q + c) + 2t + e (see above).
__host__ __device__ __forceinline__ int pw_channel(int r) {
  const int t = (r >> 4) & 1, k = r & 15;
  const int c = k >> 3, q = (k >> 1) & 3, e = k & 1;
  return (r & ~31) + 4 * (2 * q + c) + 2 * t + e;
}

// Shared memory: 128 bytes of alignment slack, the ring (a slot is a stage's input and its
// weight planes), each column's inverse scale and bias, then a full and an empty barrier per
// stage.
std::size_t smem_bytes(int ring, int slot_bytes, int pairs) {
  return 128 + std::size_t{1} * ring * slot_bytes + 2 * pairs * kCols * 4 + 16 * ring;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// d (+)= a * b, m64n64k16 fp16 with A in registers (fragment register i: row g + 8 (i & 1),
// columns 2q + 8 (i >> 1) and the one after), fp32 accumulators; scale_d = 0 overwrites d.
__device__ __forceinline__ void wgmma_rs_f16(float (&d)[32], const std::uint32_t (&a)[4],
                                             std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{" CONVBANK_WGMMA_D32
      "}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : CONVBANK_WGMMA_D32_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

__device__ __forceinline__ std::uint32_t half2_bits(__half2 h) {
  std::uint32_t u;
  std::memcpy(&u, &h, sizeof(u));
  return u;
}

// The power of two that puts magnitude m in [2^14, 2^15), and its inverse, both normal floats
// (exponent fields 1 .. 253): m = 0 or subnormal takes 2^126; Inf/NaN rows are recomputed.
__device__ __forceinline__ void scale_of(float m, float& s, float& inv) {
  const int e = static_cast<int>(__float_as_uint(m) >> 23);
  const int f = min(max(268 - e, 1), 253);
  s = __uint_as_float(static_cast<std::uint32_t>(f) << 23);
  inv = __uint_as_float(static_cast<std::uint32_t>(254 - f) << 23);
}

// y = hi + lo for the pair (a, b) already scaled: fp16 pairs, a in the low half.
__device__ __forceinline__ void split_f16(float a, float b, std::uint32_t& hi, std::uint32_t& lo) {
  const __half2 h = __floats2half2_rn(a, b);
  const float2 f = __half22float2(h);
  hi = half2_bits(h);
  lo = half2_bits(__floats2half2_rn(a - f.x, b - f.y));
}

// The consumer warpgroups' work (see the kernel below).
template <int kWG, int kP>
__device__ __forceinline__ void consume(const PwArgs& a, const float* ring, float* col_inv,
                                        std::uint32_t full0, std::uint32_t empty0) {
  using G = Geometry<kWG>;
  constexpr int kRows = G::kRows, kConsumers = G::kConsumers, kBoxFrames = G::kBoxFrames;
  constexpr int kBoxFloats = G::kBoxFloats, kStageBytes = G::kStageBytes;
  const int tid = threadIdx.x;
  constexpr int kSlotBytes = kStageBytes + kP * kStageWBytes;
  float* const col_bias = col_inv + kP * kCols;
  const int lane = tid & 31, q = lane & 3, g = lane >> 2;
  const int row0 = 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + g;  // rows row0 and row0 + 8
  // Offset of fragment value [c] (row row0) in a box: line 2q + c.
  const int line[2] = {2 * q * kBoxFrames + row0, (2 * q + 1) * kBoxFrames + row0};
  const std::uint32_t ring_addr = smem_addr(ring);
  int slot = 0;
  std::uint32_t phase = 0;
  std::int64_t staged = -1;  // the (group, column tile) whose scales and bias are loaded

  for (std::int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
    const std::int64_t gc = tile % a.gc, rest = tile / a.gc;
    const std::int64_t rt = rest % a.row_tiles, b = rest / a.row_tiles;
    const std::int64_t gr = gc / a.col_units;
    const int ct0 = static_cast<int>(gc - gr * a.col_units) * kP;  // first column tile
    const int co0 = ct0 * kCols;                                   // within the group
    const float* wg = a.w + (gr * a.cout_g + co0) * std::int64_t{a.cin_g};
    if (gc != staged) {
      bar_sync(1, kConsumers);  // the previous tiles are done with the scales
      for (int n = tid; n < kP * kCols; n += kConsumers) {
        col_inv[n] = a.wscale[(gr * a.col_tiles + ct0) * kCols + n];
        col_bias[n] = a.bias != nullptr && co0 + n < a.cout_g
                          ? __ldg(a.bias + gr * a.cout_g + co0 + n)
                          : 0.0f;
      }
      bar_sync(1, kConsumers);
      staged = gc;
    }

    const std::int64_t qb = rt * kRows - a.pad;
    int lead[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) lead[t] = static_cast<int>(t * a.x_cs + qb) & 3;
    bool in[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t f = qb + row0 + 8 * h;
      in[h] = f >= 0 && f < a.in_frames;
    }

    float sum[kP][32];
#pragma unroll
    for (int j = 0; j < kP; ++j) {
#pragma unroll
      for (int i = 0; i < 32; ++i) sum[j][i] = 0.0f;
    }
    for (int st = 0; st < a.stages; ++st) {
      mbar_wait(full0 + 8 * slot, phase);
      const float* stage = ring + slot * (kSlotBytes / 4);
      const int used = slot;
      float v[2][2][2][2];  // [step t][e][c][h]: box 2t + e, line 2q + c, row row0 + 8h
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float* box = stage + (2 * t + e) * kBoxFloats + lead[2 * t + e];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
#pragma unroll
            for (int h = 0; h < 2; ++h) v[t][e][c][h] = in[h] ? box[line[c] + 8 * h] : 0.0f;
          }
        }
      }
      __syncwarp();
      if (++slot == a.ring) {
        slot = 0;
        phase ^= 1;
      }
      // Each row's scale from its largest magnitude over the stage's 32 channels.
      float s[2], inv[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m = 0.0f;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
#pragma unroll
            for (int c = 0; c < 2; ++c) m = fmaxf(m, fabsf(v[t][e][c][h]));
          }
        }
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        scale_of(m, s[h], inv[h]);
      }
      std::uint32_t hi[2][4], lo[2][4];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int h = i & 1, c = i >> 1;
          split_f16(v[t][0][c][h] * s[h], v[t][1][c][h] * s[h], hi[t][i], lo[t][i]);
        }
      }
      // Each column tile j: the stage's hi plane and the distance to its lo plane.
#pragma unroll
      for (int j = 0; j < kP; ++j) {
        float acc[32];
        const std::uint32_t w_hi = ring_addr + used * kSlotBytes + kStageBytes + j * kStageWBytes;
        constexpr std::uint32_t w_lo = kStageWBytes / 2;
        wgmma_fence();
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const std::uint32_t off = w_hi + t * (kCols / 8) * 256;
          wgmma_rs_f16(acc, hi[t], b_desc(off), t != 0);
          wgmma_rs_f16(acc, lo[t], b_desc(off), 1);
          wgmma_rs_f16(acc, hi[t], b_desc(off + w_lo), 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        pin_operands(hi, lo);
        fence_operands(acc);
        // Accumulator 4i + 2h + e: row row0 + 8h, column 8i + 2q + e.
#pragma unroll
        for (int i = 0; i < 32; ++i) sum[j][i] = fmaf(acc[i], inv[(i >> 1) & 1], sum[j][i]);
      }
      // The wgmmas have read the stage's input and weights: hand the slot back.
      __syncwarp();
      if (lane == 0) mbar_arrive(empty0 + 8 * used);
    }

    // The epilogue: each store instruction writes 8 consecutive frames of 4 channels.
    const std::int64_t t0 = rt * kRows + row0;
    float* const yb = a.y + b * a.y_bs + (gr * a.cout_g + co0) * a.y_cs;
    const float* const xb = a.x + b * a.x_bs + gr * a.cin_g * a.x_cs;
#pragma unroll
    for (int k = 0; k < kP * 32; ++k) {
      const int j = k / 32, i = k % 32;
      const int h = (i >> 1) & 1, n = kCols * j + 8 * (i >> 2) + 2 * q + (i & 1);
      const std::int64_t t = t0 + 8 * h;
      if (co0 + n >= a.cout_g || t >= a.out_frames) continue;
      float out = fmaf(sum[j][i], col_inv[n], col_bias[n]);
      if (!isfinite(out)) {  // the direct formula gives PyTorch's NaN/Inf classes
        out = col_bias[n];
        const std::int64_t f = t - a.pad;
        if (f >= 0 && f < a.in_frames) {
          for (int ci = 0; ci < a.cin_g; ++ci) {
            out = fmaf(__ldg(wg + n * a.cin_g + ci), __ldg(xb + ci * a.x_cs + f), out);
          }
        }
      }
      yb[n * a.y_cs + t] = out;
    }
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <int kWG, int kP>
__global__ void __launch_bounds__(Geometry<kWG>::template threads<kP>(), 1)
    conv1d_pointwise_wgmma_kernel(PwArgs a, const __grid_constant__ CUtensorMap x_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using G = Geometry<kWG>;
  constexpr int kRows = G::kRows, kConsumers = G::kConsumers;
  constexpr int kStageBytes = G::kStageBytes;
  extern __shared__ __align__(128) float smem_raw[];
  const std::uint32_t base = smem_addr(smem_raw);
  const std::uint32_t stage0 = (base + 127) & ~127u;
  const float* ring = smem_raw + (stage0 - base) / 4;
  constexpr int kSlotBytes = kStageBytes + kP * kStageWBytes;
  float* const col_inv = const_cast<float*>(ring) + a.ring * (kSlotBytes / 4);
  const std::uint32_t full0 = smem_addr(col_inv + 2 * kP * kCols), empty0 = full0 + 8 * a.ring;
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < a.ring; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kConsumers / 32);
    }
    mbar_fence_init();
  }
  __syncthreads();
  if (tid >= kConsumers) {
    // No path from here reaches the consumers' code, which setmaxnreg would otherwise cap at the
    // producer's count (log step 117).
    if constexpr (kP == 2) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(G::kProducerRegs) : "memory");
    }
    if (tid != kConsumers) return;
    // The producer, one thread issuing.
    int slot = 0;
    std::uint32_t phase = 0;
    for (std::int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
      const std::int64_t gc = tile % a.gc, rest = tile / a.gc;
      const std::int64_t rt = rest % a.row_tiles, b = rest / a.row_tiles;
      const int gr = static_cast<int>(gc / a.col_units);
      const std::int64_t ct0 = (gc - std::int64_t{gr} * a.col_units) * kP;
      const std::int64_t qb = rt * kRows - a.pad;  // input frame of the tile's row 0
      for (int k = 0; k < a.stages; ++k) {
        mbar_wait(empty0 + 8 * slot, phase ^ 1);
        const std::uint32_t full = full0 + 8 * slot, dst = stage0 + slot * kSlotBytes;
        mbar_expect(full, kSlotBytes);
#pragma unroll
        for (int j = 0; j < kP; ++j) {
          const std::int64_t block = (std::int64_t{gr} * a.col_tiles + ct0 + j) * a.stages + k;
          bulk_copy_counted(dst + kStageBytes + j * kStageWBytes,
                            a.wplanes + block * (kStageWBytes / 2), kStageWBytes, full);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int c0 = static_cast<int>(u * a.x_cs + qb);
          tensor_copy_input(dst + u * (kStageBytes / 4), x_map, 1, c0 - (c0 & 3), 8 * k, gr,
                            static_cast<int>(b), full);
        }
        if (++slot == a.ring) {
          slot = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }
  if constexpr (kP == 2) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(G::kConsumerRegs) : "memory");
  }
  consume<kWG, kP>(a, ring, col_inv, full0, empty0);
#endif
}

// The weight planes: one warp per column of a (group, column tile), scaled by the power of two
// that puts its largest magnitude in [2^14, 2^15), each stage's hi and lo planes a block of
// kStageWBytes in the order the producer copies them.
__global__ void pointwise_split_weights_kernel(PwArgs a, __half* planes, float* inv_scale) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int lane = threadIdx.x & 31;
  const std::int64_t col = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) >> 5;
  if (col >= a.groups * a.col_tiles * kCols) return;
  const std::int64_t gc = col / kCols, gr = gc / a.col_tiles;
  const int n = static_cast<int>(col % kCols);
  const int co = static_cast<int>(gc - gr * a.col_tiles) * kCols + n;
  const bool live = co < a.cout_g;
  const float* wr = a.w + (gr * a.cout_g + co) * std::int64_t{a.cin_g};
  float m = 0.0f;
  if (live) {
    for (int ci = lane; ci < a.cin_g; ci += 32) m = fmaxf(m, fabsf(__ldg(wr + ci)));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float sc, inv;
  scale_of(m, sc, inv);
  if (lane == 0) inv_scale[col] = inv;
  for (int r = lane; r < a.stages * kStageChannels; r += 32) {
    const int ci = pw_channel(r);
    const float v = live && ci < a.cin_g ? __ldg(wr + ci) * sc : 0.0f;
    const __half h = __float2half_rn(v);
    __half* const block = planes + (gc * a.stages + r / kStageChannels) * (kStageWBytes / 2);
    const int o = half_plane_offset(r % kStageChannels, n, kCols);
    block[o] = h;
    block[kStageWBytes / 4 + o] = __float2half_rn(v - __half2float(h));
  }
#endif
}

template <int kWG, int kP>
bool kernel_ready() {
  static const bool ok = [] {
    const bool set =
        cudaFuncSetAttribute(conv1d_pointwise_wgmma_kernel<kWG, kP>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem) == cudaSuccess;
    if (!set) cudaGetLastError();
    return set;
  }();
  return ok;
}

// Consumer warpgroups per block: CONVBANK_CUDA_PW_WG=2|3 for A/B runs (read once), 3 otherwise.
int warpgroups() {
  static const int wg = env_int("CONVBANK_CUDA_PW_WG") == 2 ? 2 : 3;
  return wg;
}
int stage_bytes_of(int wg) {
  return wg == 2 ? Geometry<2>::kStageBytes : Geometry<3>::kStageBytes;
}
// Two column tiles per block tile, the input of a stage read once for both, where the group's
// column tiles pair up (CONVBANK_CUDA_PW_WIDE=0: one, for A/B runs; read once).
bool wide() {
  static const bool off = env_off("CONVBANK_CUDA_PW_WIDE");
  return !off;
}
int slot_bytes_of(int wg, int pairs) {
  return stage_bytes_of(wg) + pairs * kStageWBytes;
}
int rows_of(int wg) {
  return 64 * wg;
}

std::atomic<WgmmaPolicy> g_policy{env_policy("CONVBANK_CUDA_PW")};
std::atomic<std::uint64_t> g_launches{0};

int stages_of(const Conv1dParams& p) {
  return static_cast<int>((p.in_channels / p.groups + kStageChannels - 1) / kStageChannels);
}

// Ring stages that fit, at most kMaxStages (wg 3: 6 of one column tile, 5 of two; a ring
// deeper than a tile's stages runs ahead into the block's next tile).
int ring_of(int wg, int pairs) {
  const std::size_t fixed = smem_bytes(0, 0, pairs);
  const int fit = static_cast<int>((kMaxSmem - fixed) / (slot_bytes_of(wg, pairs) + 16));
  return std::min(fit, kMaxStages);
}

// One block per multiprocessor; a whole number of (group, column tile) rounds where they fit,
// so that each block keeps its columns' scales and bias.
template <int kWG>
void launch_with(const PwArgs& a, const CUtensorMap& map, std::size_t smem, int pairs,
                 cudaStream_t stream) {
  using G = Geometry<kWG>;
  std::int64_t grid = std::min<std::int64_t>(a.tiles, num_sms());
  if (grid >= a.gc) grid = grid / a.gc * a.gc;
  const unsigned blocks = grid_dim(grid, kMaxGridX);
  if (pairs == 2) {
    conv1d_pointwise_wgmma_kernel<kWG, 2>
        <<<blocks, G::template threads<2>(), smem, stream>>>(a, map);
  } else {
    conv1d_pointwise_wgmma_kernel<kWG, 1>
        <<<blocks, G::template threads<1>(), smem, stream>>>(a, map);
  }
}

// The input as (4 x x_cs frames, quad row, group, batch) in boxes of rows + 4 frames x 8 quad rows;
// false where the view or the driver does not allow it (16-byte aligned start and batch stride,
// coordinates within 2^30).
bool input_map(const PwArgs& a, const Conv1dParams& p, CUtensorMap& map) {
  const TensorMapEncode encode = tensor_map_encoder();
  constexpr std::int64_t kCoordMax = std::int64_t{1} << 30;
  if (encode == nullptr || reinterpret_cast<std::uintptr_t>(a.x) % 16 != 0 || a.x_bs % 4 != 0 ||
      4 * a.x_cs + p.in_frames + 2 * a.rows >= kCoordMax ||
      a.row_tiles * a.rows + a.pad >= kCoordMax) {
    return false;
  }
  return encode_quad_rows(encode, map, a.x, a.x_cs, a.x_bs, a.cin_g, a.groups, p.batch, a.rows + 4,
                          8);
}

}  // namespace

void set_pointwise_wgmma_policy(WgmmaPolicy policy) {
  g_policy.store(policy, std::memory_order_relaxed);
}

WgmmaPolicy pointwise_wgmma_policy() {
  return g_policy.load(std::memory_order_relaxed);
}

std::uint64_t pointwise_wgmma_launches() {
  return g_launches.load(std::memory_order_relaxed);
}

bool conv1d_pointwise_wgmma_supported(const Conv1dParams& p) {
  const std::int64_t cin_g = p.in_channels / p.groups;
  if (p.kernel_size != 1 || p.stride != 1 || cin_g % 4 != 0 || cin_g < 16 || p.in_frames < 1) {
    return false;
  }
  // K = 1 reads no padding except where the output runs past the input: zeros there, or the
  // dispatcher's edge pass for the other modes.
  if (p.padding_mode != PaddingMode::kZeros && (p.pad_left > 0 || p.pad_right > 0)) return false;
  const int wg = warpgroups();
  const auto ready = [](auto g) {
    constexpr int kWG = decltype(g)::value;
    return kernel_ready<kWG, 1>() && kernel_ready<kWG, 2>();
  };
  return wgmma_available() && (wg == 2 ? ready(std::integral_constant<int, 2>{})
                                       : ready(std::integral_constant<int, 3>{}));
}

// The tiles' work, for the dispatcher.
std::int64_t conv1d_pointwise_wgmma_tiles(const Conv1dParams& p) {
  const std::int64_t cout_g = p.out_channels / p.groups;
  const int rows = rows_of(warpgroups());
  return p.batch * p.groups * ((cout_g + kCols - 1) / kCols) * ((p.out_frames + rows - 1) / rows);
}

void launch_conv1d_pointwise_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                   const float* bias, TensorView<float> y, cudaStream_t stream,
                                   const char* name) {
  PwArgs a{};
  set_views(a, x, w, bias, y);
  a.groups = p.groups;
  a.cin_g = static_cast<int>(p.in_channels / p.groups);
  a.cout_g = static_cast<int>(p.out_channels / p.groups);
  const int wg = warpgroups();
  a.rows = rows_of(wg);
  a.stages = stages_of(p);
  a.col_tiles = (a.cout_g + kCols - 1) / kCols;
  const int pairs = wide() && a.col_tiles % 2 == 0 ? 2 : 1;
  a.ring = ring_of(wg, pairs);
  a.col_units = a.col_tiles / pairs;
  a.gc = a.groups * a.col_units;
  a.pad = p.pad_left;
  a.in_frames = p.in_frames;
  a.out_frames = p.out_frames;
  a.row_tiles = (p.out_frames + a.rows - 1) / a.rows;
  a.tiles = p.batch * a.row_tiles * a.gc;
  if (a.tiles == 0) return;
  CUtensorMap map{};
  if (!input_map(a, p, map)) {
    // A view the copy engine cannot read: the shared-memory-operand kernel takes the layer.
    if (conv1d_wgmma_supported(p)) {
      launch_conv1d_wgmma(p, x, w, bias, y, stream, name);
    } else {
      launch_conv1d_direct(p, x, w, bias, y, stream, name);
    }
    return;
  }
  g_launches.fetch_add(1, std::memory_order_relaxed);
  // Every column tile's planes: (group x column tile, stage) blocks, then the inverse scales.
  const std::size_t tiles = static_cast<std::size_t>(a.groups) * a.col_tiles;
  const std::size_t plane_bytes = tiles * static_cast<std::size_t>(a.stages) * kStageWBytes;
  Workspace ws(plane_bytes + tiles * kCols * sizeof(float), stream, "pointwise weight planes");
  auto* const planes = reinterpret_cast<__half*>(ws.floats());
  float* const inv = ws.floats() + plane_bytes / sizeof(float);
  a.wplanes = planes;
  a.wscale = inv;
  const std::int64_t threads = static_cast<std::int64_t>(tiles) * kCols * 32;
  pointwise_split_weights_kernel<<<grid_dim((threads + 255) / 256, kMaxGridX), 256, 0, stream>>>(
      a, planes, inv);
  check_launch("pointwise_split_weights", p);
  const std::size_t smem = smem_bytes(a.ring, slot_bytes_of(wg, pairs), pairs);
  if (wg == 2) {
    launch_with<2>(a, map, smem, pairs, stream);
  } else {
    launch_with<3>(a, map, smem, pairs, stream);
  }
  check_launch(name, p);
  ws.free("pointwise weight planes");
}

}  // namespace convbank::detail::cuda
