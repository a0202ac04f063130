// One-channel encoders (Conv1d with one input channel per group, K <= 16) on the tensor cores,
// in local order: conv1d_encoder_local_mma_3xtf32.
//
// The local-order FFMA encoder (conv_memory.cu) writes enc_tasnet's output in the order that
// log step 102 measured fastest for the stores alone, yet took 0.19 ms against that order's
// 0.14. Knock-outs (log step 111) put the difference in its instructions, not its stores: without
// its stores it ran nearly as long as with them, without its multiply-adds and window copies it
// ran at the stores' pace. Its channel loop is one FFMA per product. This kernel keeps the order,
// the persistent blocks and the double-buffered staging, and takes the products to the tensor
// cores (mma.sync m16n8k8, TF32, split precision: x = big + small, small·big + big·small +
// big·big into fp32 accumulators that start at the bias; 2-4e-7 relative L2, as in the other
// 3xTF32 kernels):
//   - a tile is C channels x 128 MT frames; warp w computes frames 16 MT w .. 16 MT (w + 1) - 1
//     as MT m16 tiles (frames are M), the tile's channels 8 at a time (N), the taps as the
//     reduction (K padded to KT = 8 KS, taps past K zero on both sides);
//   - lane (g, t) holds taps t KT/4 .. t KT/4 + KT/4 - 1 of every k-step (the reduction's order
//     is free, so its B fragment is one 16-byte or 8-byte shared load of consecutive weights);
//   - the window is staged as it lies (16-byte cp.async where the tile's window lies inside
//     its row, from the 16-byte boundary at or below its first position), and the warp's A
//     fragments are read from it and split once per tile, then reused by all of its channels;
//   - each 8-channel result goes through a per-warp slice of shared memory (XOR-swizzled, no
//     bank conflicts) so that every store writes 32 consecutive frames of one row, the pattern
//     whose L2 traffic the FFMA encoder has; writing the fragments directly would touch 4 rows
//     per store and twice the sectors;
//   - a warp whose inputs or weights hold a non-finite value (or one whose split overflows)
//     computes those channels by FFMA instead, so NaN and Inf propagate as in PyTorch.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kEmThreads = 256;
constexpr int kEmWarps = kEmThreads / 32;
constexpr int kEmMaxTaps = 16;
// A block's dynamic shared memory at most (the opt-in size).
constexpr int kEmMaxSmem = 227 * 1024;

struct EmArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t cout_g, pad, in_frames, out_frames;
  int K, stride, dilation, mode;
  int C;           // channels per tile, a multiple of 8
  int frames;      // frames per tile, 128 MT
  int window;      // input positions a tile reads
  int win_floats;  // floats staged per window: up to 3 of lead, the window, rounded up to 4
  int buf;         // floats per buffer: weights [C][KT], bias [C], window; a multiple of 4
  // Tiles (frame tile fastest, then channel tile, group, batch), below 2^31.
  std::uint32_t n_tiles, t_tiles32, c_tiles32, groups32;
  std::uint32_t t_magic, c_magic, g_magic;
};

struct EmTile {
  std::uint32_t tt, g, b;
  int o0;             // first channel of the tile, in its group
  std::int64_t pos0;  // input position of the window's first frame (may be < 0)
  const float* xrow;  // the group's input row
  int lead;           // words between the staged window's start and pos0
};

__device__ __forceinline__ EmTile em_tile(const EmArgs& a, std::uint32_t tile) {
  EmTile t;
  const std::uint32_t r1 = div_u32(tile, a.t_tiles32, a.t_magic);
  t.tt = tile - r1 * a.t_tiles32;
  const std::uint32_t r2 = div_u32(r1, a.c_tiles32, a.c_magic);
  t.o0 = static_cast<int>(r1 - r2 * a.c_tiles32) * a.C;
  t.b = div_u32(r2, a.groups32, a.g_magic);
  t.g = r2 - t.b * a.groups32;
  t.xrow = a.x + std::int64_t{t.b} * a.x_bs + std::int64_t{t.g} * a.x_cs;
  t.pos0 = std::int64_t{t.tt} * a.frames * a.stride - a.pad;
  // The 16-byte boundary at or below position pos0 (a float's address is 4-byte aligned).
  t.lead = static_cast<int>(
      ((reinterpret_cast<std::uintptr_t>(t.xrow) >> 2) + static_cast<std::uint64_t>(t.pos0)) & 3);
  return t;
}

// Issues the copies of a tile's weights (taps past K as zeros), bias and window into buf as one
// commit group; the padding around the row by plain stores. Visible after the caller's wait and
// barrier.
template <int KT>
__device__ __forceinline__ void em_stage(const EmArgs& a, std::uint32_t tile, float* buf) {
  const EmTile t = em_tile(a, tile);
  float* sw = buf;
  float* sb = sw + a.C * KT;
  float* sx = sb + a.C;
  const std::int64_t oc0 = std::int64_t{t.g} * a.cout_g + t.o0;
  for (int i = threadIdx.x; i < a.C * KT; i += kEmThreads) {
    const int c = i / KT;
    const int k = i - c * KT;
    const bool ok = k < a.K && t.o0 + c < a.cout_g;
    cp_async4(smem_addr(sw + i), ok ? a.w + (oc0 + c) * a.K + k : a.w, ok);
  }
  for (int c = threadIdx.x; c < a.C; c += kEmThreads) {
    const bool ok = a.bias != nullptr && t.o0 + c < a.cout_g;
    cp_async4(smem_addr(sb + c), ok ? a.bias + oc0 + c : a.w, ok);
  }
  const std::int64_t start = t.pos0 - t.lead;
  if (start >= 0 && start + a.win_floats <= a.in_frames) {
    const float* src = t.xrow + start;
    for (int i = 4 * threadIdx.x; i < a.win_floats; i += 4 * kEmThreads) {
      cp_async16(smem_addr(sx + i), src + i);
    }
  } else {
    for (int i = threadIdx.x; i < a.win_floats; i += kEmThreads) {
      const std::int64_t pos = start + i;
      if (static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames)) {
        cp_async4(smem_addr(sx + i), t.xrow + pos, true);
      } else {
        sx[i] = load_padded(t.xrow, pos, a.in_frames, a.mode);
      }
    }
  }
  cp_async_commit();
}

// x = big + small: big is x rounded to TF32 (11 significant bits, to nearest by magnitude),
// small the exact rest, which the tensor cores read to 11 bits again. Non-finite when x is, or
// when rounding x up overflows.
__device__ __forceinline__ void split_tf32(float x, std::uint32_t& big, std::uint32_t& small) {
  big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(x - __uint_as_float(big));
}

__device__ __forceinline__ bool finite_bits(std::uint32_t v) {
  return (v & 0x7f800000u) != 0x7f800000u;
}

// d = a b + c, m16n8k8, TF32 operands, fp32 accumulators.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1, const float (&c)[4]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

// One tile from its staged buffer. tb: the warp's two transpose slices of 16 MT frames x 8
// channels (row f's two 16-byte halves swapped when bit 2 of f is set).
template <int KS, int MT, bool kWhole>
__device__ __forceinline__ void em_compute(const EmArgs& a, std::uint32_t tile, const float* buf,
                                           float* tb) {
  constexpr int KT = 8 * KS;
  constexpr int TPL = KT / 4;  // taps per lane
  const EmTile t = em_tile(a, tile);
  const float* sw = buf;
  const float* sb = sw + a.C * KT;
  const float* sx = sb + a.C + t.lead;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int fw = warp * 16 * MT;  // the warp's first frame in the tile

  // A fragments (frames x taps): a[mt][s] = {(g, i 0), (g + 8, i 0), (g, i 1), (g + 8, i 1)},
  // tap q TPL + 2 s + i.
  std::uint32_t abig[MT][KS][4], asmall[MT][KS][4];
  bool finite = true;
#pragma unroll
  for (int s = 0; s < KS; ++s) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int k = q * TPL + 2 * s + i;
      const bool live = k < a.K;
      const int off = live ? k * a.dilation : 0;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int f = fw + 16 * mt + 8 * h + g;
          const float v = live ? sx[f * a.stride + off] : 0.0f;
          split_tf32(v, abig[mt][s][2 * i + h], asmall[mt][s][2 * i + h]);
          finite = finite && finite_bits(abig[mt][s][2 * i + h]);
        }
      }
    }
  }
  const bool x_finite = __all_sync(~0u, finite);

  const int rows = min(a.C, static_cast<int>(a.cout_g - t.o0));
  const std::int64_t frame0 = std::int64_t{t.tt} * a.frames + fw;
  float* yw = a.y + std::int64_t{t.b} * a.y_bs + (std::int64_t{t.g} * a.cout_g + t.o0) * a.y_cs +
              frame0 + lane;
  for (int n0 = 0, slot = 0; n0 < rows; n0 += 8, slot ^= 1) {
    // B fragment: channel n0 + g, taps q TPL .. q TPL + TPL - 1.
    float wv[TPL];
    const float* wp = sw + (n0 + g) * KT + q * TPL;
    if constexpr (TPL == 4) {
      const float4 w4 = *reinterpret_cast<const float4*>(wp);
      wv[0] = w4.x, wv[1] = w4.y, wv[2] = w4.z, wv[3] = w4.w;
    } else {
      const float2 w2 = *reinterpret_cast<const float2*>(wp);
      wv[0] = w2.x, wv[1] = w2.y;
    }
    std::uint32_t bbig[TPL], bsmall[TPL];
    bool w_ok = true;
#pragma unroll
    for (int j = 0; j < TPL; ++j) {
      split_tf32(wv[j], bbig[j], bsmall[j]);
      w_ok = w_ok && finite_bits(bbig[j]);
    }
    const float2 bias2 = *reinterpret_cast<const float2*>(sb + n0 + 2 * q);
    const float cb[4] = {bias2.x, bias2.y, bias2.x, bias2.y};
    float acc[MT][4];
    if (x_finite && __all_sync(~0u, w_ok)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          const std::uint32_t b0b = bbig[2 * s], b1b = bbig[2 * s + 1];
          if (s == 0) {
            mma_tf32(acc[mt], asmall[mt][s], b0b, b1b, cb);
          } else {
            mma_tf32(acc[mt], asmall[mt][s], b0b, b1b, acc[mt]);
          }
          mma_tf32(acc[mt], abig[mt][s], bsmall[2 * s], bsmall[2 * s + 1], acc[mt]);
          mma_tf32(acc[mt], abig[mt][s], b0b, b1b, acc[mt]);
        }
      }
    } else {
      // PyTorch's sums for non-finite operands: one FFMA per product, from shared memory.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int f = fw + 16 * mt + 8 * (r >> 1) + g;
          const int c = n0 + 2 * q + (r & 1);
          float v = sb[c];
          for (int k = 0; k < a.K; ++k)
            v = fmaf(sw[c * KT + k], sx[f * a.stride + k * a.dilation], v);
          acc[mt][r] = v;
        }
      }
    }
    // Through the slice: row f (frame), channels 2q, 2q + 1 of half (q >> 1), swizzled.
    float* ts = tb + slot * (128 * MT);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int f = 16 * mt + 8 * h + g;
        const int half = (q >> 1) ^ ((f >> 2) & 1);
        *reinterpret_cast<float2*>(ts + 8 * f + 4 * half + 2 * (q & 1)) =
            make_float2(acc[mt][2 * h], acc[mt][2 * h + 1]);
      }
    }
    __syncwarp();
    // Lane l stores frames l + 32 r of the 8 channels (the other slot was last read before this
    // slot's barrier, which every lane passed after its reads of two channel groups ago).
    float out[MT / 2][8];
#pragma unroll
    for (int r = 0; r < MT / 2; ++r) {
      const int f = lane + 32 * r;
      const int sw4 = 4 * ((f >> 2) & 1);
      const float4 lo = *reinterpret_cast<const float4*>(ts + 8 * f + sw4);
      const float4 hi = *reinterpret_cast<const float4*>(ts + 8 * f + (sw4 ^ 4));
      out[r][0] = lo.x, out[r][1] = lo.y, out[r][2] = lo.z, out[r][3] = lo.w;
      out[r][4] = hi.x, out[r][5] = hi.y, out[r][6] = hi.z, out[r][7] = hi.w;
    }
    float* yp = yw + std::int64_t{n0} * a.y_cs;
    const bool full = n0 + 8 <= rows;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (full || n0 + j < rows) {
#pragma unroll
        for (int r = 0; r < MT / 2; ++r) {
          if (kWhole || frame0 + lane + 32 * r < a.out_frames) yp[32 * r] = out[r][j];
        }
      }
      yp += a.y_cs;
    }
  }
}

// Blocks per multiprocessor: the A fragments take 16 MT KS registers.
constexpr int em_min_blocks(int ks, int mt) {
  return ks * mt <= 4 ? 3 : 2;
}

template <int KS, int MT>
__global__ void __launch_bounds__(kEmThreads, em_min_blocks(KS, MT))
    conv1d_encoder_local_mma_kernel(EmArgs a) {
  extern __shared__ __align__(16) float sm[];
  float* tb = sm + (threadIdx.x >> 5) * (256 * MT);  // the warp's two transpose slices
  float* buf0 = sm + kEmWarps * 256 * MT;
  std::uint32_t tile = blockIdx.x;
  if (tile < a.n_tiles) em_stage<8 * KS>(a, tile, buf0);
  for (int buf = 0; tile < a.n_tiles; tile += gridDim.x, buf ^= 1) {
    const std::uint32_t next = tile + gridDim.x;
    if (next < a.n_tiles) {
      // The other buffer was last read before the barrier that ended the previous tile.
      em_stage<8 * KS>(a, next, buf0 + (buf ^ 1) * a.buf);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* cur = buf0 + buf * a.buf;
    const std::uint32_t tt = tile - div_u32(tile, a.t_tiles32, a.t_magic) * a.t_tiles32;
    if ((std::int64_t{tt} + 1) * a.frames <= a.out_frames) {
      em_compute<KS, MT, true>(a, tile, cur, tb);
    } else {
      em_compute<KS, MT, false>(a, tile, cur, tb);
    }
    __syncthreads();  // this buffer is no longer read
  }
}

// Channels per tile and m16 tiles per warp for A/B runs (CONVBANK_CUDA_ENC_MMA_C, _MT; 0 or
// unset: 64 and 4), or set_encoder_mma_tile for the tests.
std::atomic<int> g_em_c{env_int("CONVBANK_CUDA_ENC_MMA_C")};
std::atomic<int> g_em_mt{env_int("CONVBANK_CUDA_ENC_MMA_MT")};

struct EmPlan {
  int ks = 0, mt = 0;
  std::size_t smem = 0;
};

// The launch's geometry; plan.ks == 0 where the layer does not fit the kernel.
EmPlan em_geometry(EmArgs& a, const Conv1dParams& p) {
  EmPlan plan;
  if (p.in_channels != p.groups || p.kernel_size > kEmMaxTaps) return plan;
  const std::int64_t cout_g = p.out_channels / p.groups;
  const int set_c = g_em_c.load(std::memory_order_relaxed);
  const int set_mt = g_em_mt.load(std::memory_order_relaxed);
  const std::int64_t want_c =
      std::min<std::int64_t>(set_c > 0 ? std::clamp(set_c, 8, 256) : 64, cout_g);
  const int C = static_cast<int>((want_c + 7) / 8 * 8);
  const int mt = set_mt == 2 ? 2 : 4;
  const int ks = p.kernel_size <= 8 ? 1 : 2;
  const int kt = 8 * ks;
  const std::int64_t frames = 16LL * kEmWarps * mt;
  const std::int64_t window = (frames - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1;
  const std::int64_t win_floats = (window + 3 + 3) / 4 * 4;
  const std::int64_t buf = std::int64_t{C} * kt + C + win_floats;
  const std::int64_t t_tiles = (p.out_frames + frames - 1) / frames;
  const std::int64_t c_tiles = (cout_g + C - 1) / C;
  const std::int64_t n_tiles = t_tiles * c_tiles * p.groups * p.batch;
  const std::int64_t smem = sizeof(float) * (std::int64_t{kEmWarps} * 256 * mt + 2 * buf);
  if (n_tiles >= (std::int64_t{1} << 31) || smem > kEmMaxSmem) return plan;
  a.cout_g = cout_g;
  a.pad = p.pad_left;
  a.in_frames = p.in_frames;
  a.out_frames = p.out_frames;
  a.K = static_cast<int>(p.kernel_size);
  a.stride = static_cast<int>(p.stride);
  a.dilation = static_cast<int>(p.dilation);
  a.mode = to_pad_mode(p.padding_mode);
  a.C = C;
  a.frames = static_cast<int>(frames);
  a.window = static_cast<int>(window);
  a.win_floats = static_cast<int>(win_floats);
  a.buf = static_cast<int>(buf);
  a.n_tiles = static_cast<std::uint32_t>(n_tiles);
  a.t_tiles32 = static_cast<std::uint32_t>(t_tiles);
  a.c_tiles32 = static_cast<std::uint32_t>(c_tiles);
  a.groups32 = static_cast<std::uint32_t>(p.groups);
  a.t_magic = div_magic(t_tiles);
  a.c_magic = div_magic(c_tiles);
  a.g_magic = div_magic(p.groups);
  plan.ks = ks;
  plan.mt = mt;
  plan.smem = static_cast<std::size_t>(smem);
  return plan;
}

template <int KS, int MT>
void em_launch(const EmArgs& a, std::size_t smem, cudaStream_t stream) {
  constexpr auto kernel = conv1d_encoder_local_mma_kernel<KS, MT>;
  static const cudaError_t opted =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kEmMaxSmem);
  check_cuda(opted, "cudaFuncSetAttribute (tensor-core encoder shared memory)");
  const int per_sm = resident_blocks<conv1d_encoder_local_mma_kernel<KS, MT>>(kEmThreads, smem);
  const std::int64_t blocks = std::min<std::int64_t>(a.n_tiles, std::int64_t{per_sm} * num_sms());
  kernel<<<static_cast<unsigned>(blocks), kEmThreads, smem, stream>>>(a);
}

std::atomic<std::uint64_t> g_em_launches{0};

}  // namespace

bool conv1d_encoder_mma_supported(const Conv1dParams& p) {
  EmArgs a{};
  return wgmma_available() && em_geometry(a, p).ks != 0;
}

std::int64_t conv1d_encoder_mma_tiles(const Conv1dParams& p) {
  EmArgs a{};
  return em_geometry(a, p).ks != 0 ? a.n_tiles : 0;
}

std::pair<int, int> set_encoder_mma_tile(int channels, int m_tiles) {
  return {g_em_c.exchange(channels, std::memory_order_relaxed),
          g_em_mt.exchange(m_tiles, std::memory_order_relaxed)};
}

std::uint64_t encoder_mma_launches() {
  return g_em_launches.load(std::memory_order_relaxed);
}

void launch_conv1d_encoder_mma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                               const float* bias, TensorView<float> y, cudaStream_t stream,
                               const char* name) {
  EmArgs a{};
  set_views(a, x, w, bias, y);
  const EmPlan plan = em_geometry(a, p);
  if (plan.ks == 0) throw Error(std::string(name) + ": the layer does not fit the kernel");
  if (a.n_tiles == 0) return;
  g_em_launches.fetch_add(1, std::memory_order_relaxed);
  if (plan.ks == 1) {
    if (plan.mt == 2) {
      em_launch<1, 2>(a, plan.smem, stream);
    } else {
      em_launch<1, 4>(a, plan.smem, stream);
    }
  } else if (plan.mt == 2) {
    em_launch<2, 2>(a, plan.smem, stream);
  } else {
    em_launch<2, 4>(a, plan.smem, stream);
  }
  check_launch(name, p);
}

}  // namespace convbank::detail::cuda
