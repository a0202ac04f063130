// One-channel encoders (1 -> many per group, K <= 32) on Hopper tensor cores at fp32 accuracy
// (3xTF32 wgmma, sm_90a). Such a layer writes far more than it reads (enc_tasnet: 537 MB out,
// 8 MB in) and its FFMA kernels (conv_memory.cu) spend K multiply-adds per output on the same
// issue slots as the stores; log step 111 in docs/performance.md found the local-order FFMA
// encoder bound by that work, and mma.sync (log steps 94, 112) by the tensor pipe's time, about
// the FFMA pipe's. wgmma does the products at about twice mma.sync's rate and asynchronously:
// the stores of one 64-channel tile run while the tensor cores compute the next.
//
// GEMM per (batch, group): rows = output channels (M, 64 per wgmma), columns = output frames (N,
// NT per warpgroup), reduction = taps (8 per step, taps past K zero).
//   A (weights) is split once per block and chunk of up to 512 channels (WCH) into K-major
//     big/small planes in shared memory (plane_offset's layout), read by every item inside it.
//   B (the input's im2col) is built per tile from the warpgroup's input window, staged in phase
//     rows as the FFMA encoders stage it (copy_phase_window, asynchronously, one tile ahead):
//     tap group j (4 taps) of frame f is 16 bytes at plane + (j NT + f) 16, so that 8 frames of
//     a group are one 128-byte core matrix (SBO 128) and the two groups of a step are NT 16
//     bytes apart (LBO). Building it costs 2 KP / CH shared stores per output (KP: K rounded up
//     to 8).
//   The accumulators of the 64-channel tiles ping-pong: the wgmmas of tile m + 1 run while tile m
//     goes out through the warp's slice of shared memory, so that each store instruction writes
//     32 consecutive frames of one row (the FFMA encoders' 128-byte pattern), bias added there.
// A block is two warpgroups; its work items are CH channels (256 by default) x 2 NT frames (each
// warpgroup NT), the frame items fastest, taken in grid order by persistent blocks (item i,
// i + grid, ...) so that the resident blocks write neighbouring rows (log step 102's order).
// Items of 128 channels measured slower (enc_tasnet 0.223 against 0.192 ms), of 512 even, and
// 64-frame warpgroup tiles slower (0.245; log step 114).
//
// On the H200 this runs enc_tasnet no faster than the local-order FFMA encoder (both about 0.19
// ms: the stores bound it), and beats the aligned FFMA encoder at strides 2-4 by 5-8 %: the
// dispatcher's rule (conv_dispatch.cu, encoder_wgmma_wins).
//
// Non-finite values: the split gives a non-finite input a NaN small part, so a tile whose window
// or whose chunk's weights hold one computes its outputs with the direct fp32 formula instead,
// whose NaN/Inf classes are PyTorch's (the padding's zeros meet the weights as in PyTorch).
#include <algorithm>
#include <atomic>
#include <string>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/dispatch.hpp"
#include "cuda/encoder_window.cuh"
#include "cuda/tma.cuh"  // bar_sync
#include "cuda/wgmma.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kEwGroups = 2;  // warpgroups per block
constexpr int kEwThreads = 128 * kEwGroups;
constexpr int kEwFrames = 128;  // frames per warpgroup tile (NT below)
constexpr int kEwMaxTaps = 32;
constexpr int kEwSmemMax = 227 * 1024;

struct EwArgs : EncoderArgs {
  int dilation;
  int WCH;                // channels whose weights a block holds (a chunk), a power of 2 x 64
  int CH;                 // channels per item, a power of 2 x 64 dividing WCH
  int window, phase_len;  // a warpgroup's window: positions, words per phase row
  int win_buf;            // floats per window buffer (two per warpgroup)
  int pitch;              // floats per row of a warp's epilogue slice
  int wg_floats;          // floats per warpgroup: planes, windows, epilogue slices
  int off_wg;             // first float of warpgroup 0's part
  // Items (frame item fastest, then channel chunk, group, batch), below 2^31.
  std::uint32_t n_items, t_items32, c_chunks32, groups32;
  std::uint32_t t_magic, c_magic, g_magic;
};

struct EwItem {
  std::uint32_t tt, cc, g, b;
};

__host__ __device__ constexpr int ew_plane_floats(int taps, int nt) {
  return taps * nt;  // taps / 4 groups x nt frames x 4
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ EwItem ew_item_of(const EwArgs& a, std::uint32_t item) {
  EwItem t;
  const std::uint32_t r1 = div_u32(item, a.t_items32, a.t_magic);
  t.tt = item - r1 * a.t_items32;
  const std::uint32_t r2 = div_u32(r1, a.c_chunks32, a.c_magic);
  t.cc = r1 - r2 * a.c_chunks32;
  t.b = div_u32(r2, a.groups32, a.g_magic);
  t.g = r2 - t.b * a.groups32;
  return t;
}

// A barrier of `threads` threads that also ORs their flags.
__device__ __forceinline__ bool bar_red_or(int id, int threads, bool v) {
  int r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.b32 p, %1, 0;\nbarrier.red.or.pred q, %2, %3, p;\n"
      "selp.b32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(v ? 1 : 0), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// KS reduction steps of 8 taps, MT 64-channel tiles per item.
template <int KS, int MT>
__global__ void __launch_bounds__(kEwThreads, 1) conv1d_encoder_wgmma_kernel(EwArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KP = 8 * KS;  // taps held
  constexpr int G = KP / 4;   // tap groups of a B plane
  constexpr int NT = kEwFrames;
  constexpr int R = NT / 2;  // accumulators per thread
  extern __shared__ __align__(128) float sm[];
  int* soff = reinterpret_cast<int*>(sm);  // [KP]: tap k's first word in a staged window
  float* wbig = sm + kEwMaxTaps;
  float* wsmall = wbig + a.WCH * KP;
  float* sbias = wsmall + a.WCH * KP;
  const int wg = static_cast<int>(threadIdx.x) >> 7;
  const int tid = static_cast<int>(threadIdx.x) & 127, warp = tid >> 5, lane = tid & 31;
  float* planes = sm + a.off_wg + wg * a.wg_floats;  // big [G][NT][4], then small
  float* win = planes + 2 * ew_plane_floats(KP, NT);
  float* epi = win + 2 * a.win_buf + warp * 16 * a.pitch;
  const int s = a.stride;
  // Tap k reads window position f s + k d: phase row (k d) % s, column f + (k d) / s.
  for (int k = threadIdx.x; k < KP; k += kEwThreads) {
    const int kd = k * a.dilation;
    soff[k] = k < a.K ? (kd % s) * a.phase_len + kd / s : 0;
  }

  // The warpgroup's window of an item, into dst, as one commit group (empty past the row).
  auto stage = [&](std::uint32_t item, float* dst) {
    const EwItem t = ew_item_of(a, item);
    const std::int64_t f0 = (std::int64_t{t.tt} * kEwGroups + wg) * NT;
    if (f0 < a.out_frames) {
      const float* xrow = a.x + std::int64_t{t.b} * a.x_bs + std::int64_t{t.g} * a.x_cs;
      const std::int64_t pos0 = f0 * s - a.pad;
      if (pos0 >= 0 && pos0 + a.window <= a.in_frames) {
        copy_phase_window_inside<128>(a, xrow + pos0, a.window, a.phase_len, dst, tid);
      } else {
        copy_phase_window<128>(a, xrow, pos0, a.window, a.phase_len, dst, tid);
      }
    }
    cp_async_commit();
  };
  // The chunk's weights split into the A planes, and its bias; true where a weight is not
  // finite. Every thread of the block, two barriers.
  auto load_weights = [&](std::uint32_t g, std::int64_t wc0) {
    const std::int64_t oc0 = std::int64_t{g} * a.cout_g + wc0;
    const std::int64_t valid = a.cout_g - wc0;
    bool bad = false;
    for (int i = threadIdx.x; i < a.WCH * KP; i += kEwThreads) {
      const int c = i / KP, k = i - c * KP;
      const float v = k < a.K && c < valid ? __ldg(a.w + (oc0 + c) * a.K + k) : 0.0f;
      std::uint32_t hi, lo;
      bad |= !split_tf32(v, hi, lo);
      const int o = plane_offset(k, c, a.WCH);
      wbig[o] = __uint_as_float(hi);
      wsmall[o] = __uint_as_float(lo);
    }
    for (int c = threadIdx.x; c < a.WCH; c += kEwThreads) {
      sbias[c] = a.bias != nullptr && c < valid ? __ldg(a.bias + oc0 + c) : 0.0f;
    }
    fence_proxy_async();
    return __syncthreads_or(bad) != 0;
  };

  std::uint32_t item = blockIdx.x;
  std::int64_t key = -1;
  bool w_bad = false;
  if (item < a.n_items) stage(item, win);
  for (int buf = 0; item < a.n_items; item += gridDim.x, buf ^= 1) {
    const std::uint32_t next = item + gridDim.x;
    if (next < a.n_items) {
      // The other buffer was last read before the barrier that ended the previous item.
      stage(next, win + (buf ^ 1) * a.win_buf);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    const EwItem t = ew_item_of(a, item);
    const int valid =
        static_cast<int>(min(std::int64_t{a.CH}, a.cout_g - std::int64_t{t.cc} * a.CH));
    // The item's channels in the chunk its block holds: from row `first` of the planes.
    const std::int64_t item_c0 = std::int64_t{t.cc} * a.CH;
    const std::int64_t wc0 = item_c0 / a.WCH * a.WCH;
    const int first = static_cast<int>(item_c0 - wc0);
    const std::int64_t wkey = std::int64_t{t.g} * a.cout_g + wc0;
    if (wkey != key) {  // the same for the whole block
      __syncthreads();  // every warpgroup is done with the previous chunk's planes
      w_bad = load_weights(t.g, wc0);
      key = wkey;
    }
    const std::int64_t f0 = (std::int64_t{t.tt} * kEwGroups + wg) * NT;
    bar_sync(1 + wg, 128);  // the window's copies, by every thread of the warpgroup, are in
    if (f0 < a.out_frames) {
      const float* cw = win + buf * a.win_buf;
      bool bad = false;
      for (int i = tid; i < G * NT; i += 128) {
        const int grp = i / NT, f = i - grp * NT;
        std::uint32_t hi[4], lo[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int k = 4 * grp + j;
          bad |= !split_tf32(k < a.K ? cw[soff[k] + f] : 0.0f, hi[j], lo[j]);
        }
        reinterpret_cast<uint4*>(planes)[i] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        reinterpret_cast<uint4*>(planes + ew_plane_floats(KP, NT))[i] =
            make_uint4(lo[0], lo[1], lo[2], lo[3]);
      }
      fence_proxy_async();
      bad = bar_red_or(1 + wg, 128, bad);
      float* yt = a.y + std::int64_t{t.b} * a.y_bs +
                  (std::int64_t{t.g} * a.cout_g + std::int64_t{t.cc} * a.CH) * a.y_cs + f0;
      const bool whole = f0 + NT <= a.out_frames;
      if (bad || w_bad) {
        // The direct formula, PyTorch's NaN/Inf classes.
        const float* wc = a.w + (std::int64_t{t.g} * a.cout_g + std::int64_t{t.cc} * a.CH) * a.K;
        for (int i = tid; i < valid * NT; i += 128) {
          const int c = i / NT, f = i - c * NT;
          if (f0 + f >= a.out_frames) continue;
          float acc = sbias[first + c];
          for (int k = 0; k < a.K; ++k) acc = fmaf(__ldg(wc + c * a.K + k), cw[soff[k] + f], acc);
          yt[c * a.y_cs + f] = acc;
        }
      } else {
        const int mt = (valid + 63) / 64;
        const std::uint32_t pb = smem_addr(planes);
        const std::uint64_t b_big = smem_desc(pb, NT * 16, 128);
        const std::uint64_t b_small = smem_desc(pb + ew_plane_floats(KP, NT) * 4, NT * 16, 128);
        const std::uint64_t a_big = smem_desc(smem_addr(wbig), 128, 256);
        const std::uint64_t a_small = smem_desc(smem_addr(wsmall), 128, 256);
        // Descriptors hold address / 16 in their low bits: offsets / 16 are added to them.
        auto issue = [&](float(&d)[R], int m) {
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) {
            const std::uint64_t ao =
                (first / 64 + m) * 128 + ks * a.WCH * 2;  // (.. 2048 + ks WCH 32) / 16
            const std::uint64_t bo = ks * 2 * NT;         // ks 2 NT 16 / 16
            wgmma_ss<false>(d, a_small + ao, b_big + bo, ks > 0 ? 1 : 0);
            wgmma_ss<false>(d, a_big + ao, b_small + bo, 1);
            wgmma_ss<false>(d, a_big + ao, b_big + bo, 1);
          }
          wgmma_commit();
        };
        // Tile m's outputs: rows 16 warp + lane / 4 (+ 8), frames 8 i + 2 (lane % 4) (+ 1) in the
        // accumulators; through the warp's slice (a pitch of 8 modulo 32 words puts the 16 lanes
        // of each half-warp's 8-byte writes on 32 banks) to rows of 32 consecutive frames.
        auto store = [&](float(&d)[R], int m) {
          fence_operands(d);
          const int g8 = lane >> 2, q = lane & 3;
#pragma unroll
          for (int i = 0; i < NT / 8; ++i) {
            *reinterpret_cast<float2*>(epi + g8 * a.pitch + 8 * i + 2 * q) =
                make_float2(d[4 * i], d[4 * i + 1]);
            *reinterpret_cast<float2*>(epi + (g8 + 8) * a.pitch + 8 * i + 2 * q) =
                make_float2(d[4 * i + 2], d[4 * i + 3]);
          }
          __syncwarp();
          const int c0 = 64 * m + 16 * warp;
          // No branch while the next tile's wgmmas run (ptxas would serialize them): the
          // guards are predicates.
#pragma unroll
          for (int r = 0; r < 16; ++r) {
            const bool row_ok = c0 + r < valid;
            const float bias = sbias[row_ok ? first + c0 + r : 0];
            float* yr = yt + std::int64_t{c0 + r} * a.y_cs;
            const float* er = epi + r * a.pitch;
#pragma unroll
            for (int j = 0; j < NT / 32; ++j) {
              const int f = 32 * j + lane;
              const float v = er[f] + bias;
              if (row_ok && (whole || f0 + f < a.out_frames)) yr[f] = v;
            }
          }
          __syncwarp();
        };
        // Unrolled to MT tiles with no branch between a wgmma's issue and its wait (ptxas would
        // serialize the wgmmas, C7518): tiles past mt recompute tile mt - 1 and store nothing.
        float acc0[R], acc1[R];
        issue(acc0, 0);
#pragma unroll
        for (int m = 0; m < MT; m += 2) {
          if (m + 1 < MT) {
            issue(acc1, min(m + 1, mt - 1));
            wgmma_wait<1>();
          } else {
            wgmma_wait<0>();
          }
          store(acc0, m);
          if (m + 1 < MT) {
            if (m + 2 < MT) {
              issue(acc0, min(m + 2, mt - 1));
              wgmma_wait<1>();
            } else {
              wgmma_wait<0>();
            }
            store(acc1, m + 1);
          }
        }
      }
    }
    bar_sync(1 + wg, 128);  // the window and the planes are no longer read
  }
  cp_async_wait<0>();
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// Channels per item, read once from CONVBANK_CUDA_ENC_WGMMA_CH for A/B runs (0, unset: 256, fewer
// where the group has fewer); set_encoder_wgmma_tile for the tests.
std::atomic<int> g_ew_ch{env_int("CONVBANK_CUDA_ENC_WGMMA_CH")};

int ew_taps(std::int64_t k) {
  return static_cast<int>((k + 7) / 8 * 8);
}

// The launch's geometry and shared memory (bytes); 0 where the layer does not fit the kernel.
std::size_t ew_geometry(EwArgs& a, const Conv1dParams& p) {
  if (p.in_channels != p.groups || p.kernel_size > kEwMaxTaps) return 0;
  constexpr int nt = kEwFrames;
  const int kp = ew_taps(p.kernel_size);
  const std::int64_t cout_g = p.out_channels / p.groups;
  const std::int64_t window = (nt - 1) * p.stride + (p.kernel_size - 1) * p.dilation + 1;
  const std::int64_t phase_len = phase_row_words(window, p.stride);
  const std::int64_t win_buf = (p.stride * phase_len + 3) / 4 * 4;
  const int pitch = nt + 8;
  const std::int64_t wg_floats =
      (2 * ew_plane_floats(kp, nt) + 2 * win_buf + 4 * 16 * pitch + 31) / 32 * 32;
  // The chunk: a power of two of 64-channel tiles, as many as the group has up to 8 and as fit.
  std::int64_t wch = 64;
  while (wch < 512 && wch < cout_g) wch *= 2;
  // Floats before the warpgroups' parts: tap offsets, the chunk's two planes and its bias.
  auto off_wg = [&](std::int64_t c) { return (kEwMaxTaps + 2 * c * kp + c + 31) / 32 * 32; };
  auto bytes = [&](std::int64_t c) {
    return std::size_t(off_wg(c) + kEwGroups * wg_floats) * sizeof(float);
  };
  while (wch > 64 && bytes(wch) > kEwSmemMax) wch /= 2;
  if (bytes(wch) > kEwSmemMax) return 0;
  // An item: a power of two of the chunk's tiles (the kernel's unrolled tile loop), 256 channels
  // unless set.
  const int set_ch = g_ew_ch.load(std::memory_order_relaxed);
  std::int64_t ch = std::min<std::int64_t>(wch, set_ch > 0 ? std::max(64, set_ch) : 256);
  while ((ch & (ch - 1)) != 0) ch &= ch - 1;
  const std::int64_t t_items = (p.out_frames + 2LL * nt - 1) / (2LL * nt);
  const std::int64_t c_chunks = (cout_g + ch - 1) / ch;
  const std::int64_t n_items = t_items * c_chunks * p.groups * p.batch;
  if (n_items >= (std::int64_t{1} << 31)) return 0;
  a.cout_g = cout_g;
  a.groups = p.groups;
  a.batch = p.batch;
  a.dilation = static_cast<int>(p.dilation);
  a.WCH = static_cast<int>(wch);
  a.CH = static_cast<int>(ch);
  a.window = static_cast<int>(window);
  a.phase_len = static_cast<int>(phase_len);
  a.win_buf = static_cast<int>(win_buf);
  a.pitch = pitch;
  a.wg_floats = static_cast<int>(wg_floats);
  a.off_wg = static_cast<int>(off_wg(wch));
  a.n_items = static_cast<std::uint32_t>(n_items);
  a.t_items32 = static_cast<std::uint32_t>(t_items);
  a.c_chunks32 = static_cast<std::uint32_t>(c_chunks);
  a.groups32 = static_cast<std::uint32_t>(p.groups);
  a.t_magic = div_magic(t_items);
  a.c_magic = div_magic(c_chunks);
  a.g_magic = div_magic(p.groups);
  return bytes(wch);
}

template <int KS, int MT>
void launch_ew(const EwArgs& a, std::size_t smem, cudaStream_t stream) {
  constexpr auto kernel = conv1d_encoder_wgmma_kernel<KS, MT>;
  static const cudaError_t opted =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kEwSmemMax);
  check_cuda(opted, "cudaFuncSetAttribute (tensor-core encoder shared memory)");
  const int per_sm = resident_blocks<kernel>(kEwThreads, smem);
  const std::int64_t blocks = std::min<std::int64_t>(a.n_items, std::int64_t{per_sm} * num_sms());
  kernel<<<static_cast<unsigned>(blocks), kEwThreads, smem, stream>>>(a);
}

template <int MT>
void launch_ew_steps(const EwArgs& a, int steps, std::size_t smem, cudaStream_t stream) {
  switch (steps) {
    case 1:
      return launch_ew<1, MT>(a, smem, stream);
    case 2:
      return launch_ew<2, MT>(a, smem, stream);
    case 3:
      return launch_ew<3, MT>(a, smem, stream);
    default:
      return launch_ew<4, MT>(a, smem, stream);
  }
}

void launch_ew_tiles(const EwArgs& a, int steps, std::size_t smem, cudaStream_t stream) {
  switch (a.CH / 64) {
    case 1:
      return launch_ew_steps<1>(a, steps, smem, stream);
    case 2:
      return launch_ew_steps<2>(a, steps, smem, stream);
    case 4:
      return launch_ew_steps<4>(a, steps, smem, stream);
    default:
      return launch_ew_steps<8>(a, steps, smem, stream);
  }
}

}  // namespace

bool conv1d_encoder_wgmma_supported(const Conv1dParams& p) {
  EwArgs a{};
  return wgmma_available() && ew_geometry(a, p) != 0;
}

std::int64_t conv1d_encoder_wgmma_items(const Conv1dParams& p) {
  EwArgs a{};
  return ew_geometry(a, p) != 0 ? a.n_items : 0;
}

int set_encoder_wgmma_tile(int channels) {
  return g_ew_ch.exchange(channels, std::memory_order_relaxed);
}

void launch_conv1d_encoder_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                 const float* bias, TensorView<float> y, cudaStream_t stream,
                                 const char* name) {
  EwArgs a{};
  set_encoder_args(a, p, x, w, bias, y);
  const std::size_t smem = ew_geometry(a, p);
  if (smem == 0)
    throw Error(std::string(name) + ": the layer does not fit the tensor-core encoder");
  if (a.n_items == 0) return;
  launch_ew_tiles(a, ew_taps(p.kernel_size) / 8, smem, stream);
  check_launch(name, p);
}

}  // namespace convbank::detail::cuda
