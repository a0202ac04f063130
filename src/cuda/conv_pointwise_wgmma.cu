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
//   B (weights): split once per block into K-major hi/lo fp16 planes that stay in shared memory
//     for every tile of the block's (group, column tile): 128 KB at 512 input channels. Each
//     column is scaled by its own power of two (undone in the epilogue with the bias).
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
constexpr int kMaxChannels = 512;  // input channels per group whose planes fit (128 KB)

// kWG consumer warpgroups of one m64 tile each: the tile's rows (output frames), a copy's frames
// (the rows and a lead of up to 3; 4 mod 32, so that the reads are conflict-free), a box of 8
// quad rows, a stage of 4 boxes.
template <int kWG>
struct Geometry {
  static constexpr int kRows = 64 * kWG;
  static constexpr int kConsumers = 128 * kWG;
  static constexpr int kThreads = kConsumers + 32;  // and the producer warp
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
  int rows;         // output frames per tile: 64 per consumer warpgroup
  int stages;       // stages of 32 channels per tile (the planes' depth / 32)
  int ring;         // stages in the shared-memory ring
  int col_tiles;    // column tiles per group
  std::int64_t gc;  // groups x col_tiles: the fastest tile index
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

// Shared memory: 128 bytes of alignment slack, the ring, the hi and lo planes, per-column
// scale, inverse scale and bias, then a full and an empty barrier per stage.
std::size_t smem_bytes(int stages, int ring, int stage_bytes) {
  const std::size_t plane = std::size_t{2} * stages * kStageChannels * kCols;  // bytes
  return 128 + std::size_t{1} * ring * stage_bytes + 2 * plane + 3 * kCols * 4 + 16 * ring;
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
template <int kWG>
__device__ __forceinline__ void consume(const PwArgs& a, const float* ring, __half* planes,
                                        float* col_scale, std::uint32_t full0,
                                        std::uint32_t empty0) {
  using G = Geometry<kWG>;
  constexpr int kRows = G::kRows, kConsumers = G::kConsumers, kBoxFrames = G::kBoxFrames;
  constexpr int kBoxFloats = G::kBoxFloats, kStageBytes = G::kStageBytes;
  const int tid = threadIdx.x;
  const int plane_halves = a.stages * kStageChannels * kCols;
  float* const col_inv = col_scale + kCols;
  float* const col_bias = col_inv + kCols;
  const int lane = tid & 31, q = lane & 3, g = lane >> 2;
  const int row0 = 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + g;  // rows row0 and row0 + 8
  // Offset of fragment value [c] (row row0) in a box: line 2q + c.
  const int line[2] = {2 * q * kBoxFrames + row0, (2 * q + 1) * kBoxFrames + row0};
  const std::uint32_t hi_addr = smem_addr(planes), lo_addr = hi_addr + plane_halves * 2;
  int slot = 0;
  std::uint32_t phase = 0;
  std::int64_t staged = -1;  // the (group, column tile) whose weights are in the planes

  for (std::int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
    const std::int64_t gc = tile % a.gc, rest = tile / a.gc;
    const std::int64_t rt = rest % a.row_tiles, b = rest / a.row_tiles;
    const std::int64_t gr = gc / a.col_tiles;
    const int co0 = static_cast<int>(gc - gr * a.col_tiles) * kCols;  // within the group
    const float* wg = a.w + (gr * a.cout_g + co0) * std::int64_t{a.cin_g};
    if (gc != staged) {
      bar_sync(1, kConsumers);  // the previous tiles are done with the planes
      // Column scales: 4 threads per column (the first 8 warps), each a quarter of the channels.
      if (tid < 4 * kCols) {
        const int n = tid >> 2, part = tid & 3;
        float m = 0.0f;
        if (co0 + n < a.cout_g) {
          for (int ci = part; ci < a.cin_g; ci += 4)
            m = fmaxf(m, fabsf(__ldg(wg + n * a.cin_g + ci)));
        }
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        float s, inv;
        scale_of(m, s, inv);
        if (part == 0) {
          col_scale[n] = s;
          col_inv[n] = inv;
          col_bias[n] = a.bias != nullptr && co0 + n < a.cout_g
                            ? __ldg(a.bias + gr * a.cout_g + co0 + n)
                            : 0.0f;
        }
      }
      bar_sync(1, kConsumers);
      const int depth = a.stages * kStageChannels;
      for (int e = tid; e < depth * kCols; e += kConsumers) {
        const int n = e / depth, r = e - n * depth, ci = pw_channel(r);
        const float v =
            co0 + n < a.cout_g && ci < a.cin_g ? __ldg(wg + n * a.cin_g + ci) * col_scale[n] : 0.0f;
        const __half h = __float2half_rn(v);
        const int o = half_plane_offset(r, n, kCols);
        planes[o] = h;
        planes[plane_halves + o] = __float2half_rn(v - __half2float(h));
      }
      fence_proxy_async();  // the planes are read by wgmma (the async proxy)
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

    float sum[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sum[i] = 0.0f;
    for (int st = 0; st < a.stages; ++st) {
      mbar_wait(full0 + 8 * slot, phase);
      const float* stage = ring + slot * (kStageBytes / 4);
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
      if (lane == 0) mbar_arrive(empty0 + 8 * slot);  // the stage is read: hand it back
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
      float acc[32];
      const std::uint32_t step0 = static_cast<std::uint32_t>(st) * 2 * (kCols / 8) * 256;
      wgmma_fence();
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const std::uint32_t off = step0 + t * (kCols / 8) * 256;
        wgmma_rs_f16(acc, hi[t], b_desc(hi_addr + off), t != 0);
        wgmma_rs_f16(acc, lo[t], b_desc(hi_addr + off), 1);
        wgmma_rs_f16(acc, hi[t], b_desc(lo_addr + off), 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      pin_operands(hi, lo);
      fence_operands(acc);
      // Accumulator 4j + 2h + e: row row0 + 8h, column 8j + 2q + e.
#pragma unroll
      for (int i = 0; i < 32; ++i) sum[i] = fmaf(acc[i], inv[(i >> 1) & 1], sum[i]);
    }

    // The epilogue: each store instruction writes 8 consecutive frames of 4 channels.
    const std::int64_t t0 = rt * kRows + row0;
    float* const yb = a.y + b * a.y_bs + (gr * a.cout_g + co0) * a.y_cs;
    const float* const xb = a.x + b * a.x_bs + gr * a.cin_g * a.x_cs;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int h = (i >> 1) & 1, n = 8 * (i >> 2) + 2 * q + (i & 1);
      const std::int64_t t = t0 + 8 * h;
      if (co0 + n >= a.cout_g || t >= a.out_frames) continue;
      float out = fmaf(sum[i], col_inv[n], col_bias[n]);
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

template <int kWG>
__global__ void __launch_bounds__(Geometry<kWG>::kThreads, 1)
    conv1d_pointwise_wgmma_kernel(PwArgs a, const __grid_constant__ CUtensorMap x_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using G = Geometry<kWG>;
  constexpr int kRows = G::kRows, kConsumers = G::kConsumers;
  constexpr int kBoxFloats = G::kBoxFloats, kStageBytes = G::kStageBytes;
  extern __shared__ __align__(128) float smem_raw[];
  const std::uint32_t base = smem_addr(smem_raw);
  const std::uint32_t stage0 = (base + 127) & ~127u;
  const float* ring = smem_raw + (stage0 - base) / 4;
  const int plane_halves = a.stages * kStageChannels * kCols;
  __half* const planes =
      reinterpret_cast<__half*>(const_cast<float*>(ring) + a.ring * kBoxFloats * 4);
  float* const col_scale = reinterpret_cast<float*>(planes + 2 * plane_halves);
  const std::uint32_t full0 = smem_addr(col_scale + 3 * kCols), empty0 = full0 + 8 * a.ring;
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < a.ring; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kConsumers / 32);
    }
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == kConsumers) {  // the producer, one thread issuing
    int slot = 0;
    std::uint32_t phase = 0;
    for (std::int64_t tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
      const std::int64_t gc = tile % a.gc, rest = tile / a.gc;
      const std::int64_t rt = rest % a.row_tiles, b = rest / a.row_tiles;
      const int gr = static_cast<int>(gc / a.col_tiles);
      const std::int64_t qb = rt * kRows - a.pad;  // input frame of the tile's row 0
      for (int k = 0; k < a.stages; ++k) {
        mbar_wait(empty0 + 8 * slot, phase ^ 1);
        const std::uint32_t full = full0 + 8 * slot, dst = stage0 + slot * kStageBytes;
        mbar_expect(full, kStageBytes);
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
  }
  if (tid < kConsumers) consume<kWG>(a, ring, planes, col_scale, full0, empty0);
#endif
}

template <int kWG>
bool kernel_ready() {
  static const bool ok = [] {
    const bool set =
        cudaFuncSetAttribute(conv1d_pointwise_wgmma_kernel<kWG>,
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
int rows_of(int wg) {
  return 64 * wg;
}

std::atomic<WgmmaPolicy> g_policy{env_policy("CONVBANK_CUDA_PW")};
std::atomic<std::uint64_t> g_launches{0};

int stages_of(const Conv1dParams& p) {
  return static_cast<int>((p.in_channels / p.groups + kStageChannels - 1) / kStageChannels);
}

// Ring stages that fit beside the planes (at most kMaxStages), 0 if fewer than two.
int ring_of(int stages, int wg) {
  const std::size_t fixed = smem_bytes(stages, 0, 0);
  if (fixed >= kMaxSmem) return 0;
  const int fit = static_cast<int>((kMaxSmem - fixed) / (stage_bytes_of(wg) + 16));
  return fit >= 2 ? std::min(fit, kMaxStages) : 0;
}

// One block per multiprocessor; a whole number of (group, column tile) rounds where they fit,
// so that each block keeps its weights.
template <int kWG>
void launch_with(const PwArgs& a, const CUtensorMap& map, std::size_t smem, cudaStream_t stream) {
  std::int64_t grid = std::min<std::int64_t>(a.tiles, num_sms());
  if (grid >= a.gc) grid = grid / a.gc * a.gc;
  conv1d_pointwise_wgmma_kernel<kWG>
      <<<grid_dim(grid, kMaxGridX), Geometry<kWG>::kThreads, smem, stream>>>(a, map);
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
  if (p.kernel_size != 1 || p.stride != 1 || cin_g % 4 != 0 || cin_g < 16 || cin_g > kMaxChannels ||
      p.in_frames < 1) {
    return false;
  }
  // K = 1 reads no padding except where the output runs past the input: zeros there, or the
  // dispatcher's edge pass for the other modes.
  if (p.padding_mode != PaddingMode::kZeros && (p.pad_left > 0 || p.pad_right > 0)) return false;
  const int wg = warpgroups();
  return wgmma_available() && ring_of(stages_of(p), wg) > 0 &&
         (wg == 2 ? kernel_ready<2>() : kernel_ready<3>());
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
  a.ring = ring_of(a.stages, wg);
  a.col_tiles = (a.cout_g + kCols - 1) / kCols;
  a.gc = a.groups * a.col_tiles;
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
  const std::size_t smem = smem_bytes(a.stages, a.ring, stage_bytes_of(wg));
  if (wg == 2) {
    launch_with<2>(a, map, smem, stream);
  } else {
    launch_with<3>(a, map, smem, stream);
  }
  check_launch(name, p);
}

}  // namespace convbank::detail::cuda
