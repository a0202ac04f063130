// The general kernels: one output element per thread-iteration, every argument supported.
// Used for shapes the GEMM/Winograd kernels do not cover and for narrow ones where a GEMM tile
// would be mostly empty (depthwise, out_channels/groups <= 4). A block covers 1024 consecutive
// frames of one (batch, out channel) row; thread i takes frames i, i+256, i+512, i+768 so every
// load and store instruction of a warp touches 32 consecutive frames (coalesced).
#include <cooperative_groups.h>
#include <algorithm>
#include <cstdlib>

#include "cuda/conv_common.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kDirectThreads = 256;
constexpr int kDirectPerThread = 4;
constexpr std::int64_t kDirectFrames = kDirectThreads * kDirectPerThread;

struct DirectArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t out_channels, cin_g, cout_g;
  std::int64_t kernel_size, stride, dilation, pad;  // pad: pad_left (conv) / padding (transpose)
  std::int64_t in_frames, out_frames;
  std::int64_t frame_blocks, items;  // items = batch * out_channels * frame_blocks
  int mode;
};

__global__ void __launch_bounds__(kDirectThreads) conv1d_direct_coalesced_kernel(DirectArgs a) {
  for (std::int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
    const std::int64_t row = item / a.frame_blocks;
    const std::int64_t t0 = (item - row * a.frame_blocks) * kDirectFrames + threadIdx.x;
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const std::int64_t g = o / a.cout_g;
    const float init = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
    float acc[kDirectPerThread];
#pragma unroll
    for (int c = 0; c < kDirectPerThread; ++c) acc[c] = init;
    const float* wrow = a.w + o * a.cin_g * a.kernel_size;
    for (std::int64_t ci = 0; ci < a.cin_g; ++ci) {
      const float* xrow = a.x + b * a.x_bs + (g * a.cin_g + ci) * a.x_cs;
      for (std::int64_t k = 0; k < a.kernel_size; ++k) {
        const float wk = __ldg(wrow + ci * a.kernel_size + k);
        const std::int64_t offset = k * a.dilation - a.pad;
#pragma unroll
        for (int c = 0; c < kDirectPerThread; ++c) {
          const std::int64_t t = t0 + c * kDirectThreads;
          // Frames past the end compute garbage-free zeros and are not stored.
          const std::int64_t pos = t < a.out_frames ? t * a.stride + offset : -1 - a.in_frames * 4;
          acc[c] = fmaf(wk, load_padded(xrow, pos, a.in_frames, a.mode), acc[c]);
        }
      }
    }
    float* yrow = a.y + b * a.y_bs + o * a.y_cs;
#pragma unroll
    for (int c = 0; c < kDirectPerThread; ++c) {
      const std::int64_t t = t0 + c * kDirectThreads;
      if (t < a.out_frames) yrow[t] = acc[c];
    }
  }
}

// One thread per output, flattened over (batch, out channel, frame): for tiny problems (a
// streaming chunk of a few frames per row), where a block per row would leave most of its
// threads idle and the grid would be thousands of near-empty blocks.
__global__ void __launch_bounds__(kDirectThreads) conv1d_direct_flat_kernel(DirectArgs a) {
  const std::int64_t total = a.items;  // batch * out_channels * out_frames
  for (std::int64_t i = blockIdx.x * std::int64_t{kDirectThreads} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * kDirectThreads) {
    const std::int64_t row = i / a.out_frames;
    const std::int64_t t = i - row * a.out_frames;
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const std::int64_t g = o / a.cout_g;
    float acc = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
    const float* wrow = a.w + o * a.cin_g * a.kernel_size;
    for (std::int64_t ci = 0; ci < a.cin_g; ++ci) {
      const float* xrow = a.x + b * a.x_bs + (g * a.cin_g + ci) * a.x_cs;
      for (std::int64_t k = 0; k < a.kernel_size; ++k) {
        const std::int64_t pos = t * a.stride + k * a.dilation - a.pad;
        acc = fmaf(__ldg(wrow + ci * a.kernel_size + k),
                   load_padded(xrow, pos, a.in_frames, a.mode), acc);
      }
    }
    a.y[b * a.y_bs + o * a.y_cs + t] = acc;
  }
}

// Gather form of the transposed convolution: output t receives x[j] * w[k] for every
// j * stride + k * dilation = t + padding; no zeros are inserted, no atomics are needed.
__global__ void __launch_bounds__(kDirectThreads)
    conv_transpose1d_direct_gather_kernel(DirectArgs a) {
  for (std::int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
    const std::int64_t row = item / a.frame_blocks;
    const std::int64_t t0 = (item - row * a.frame_blocks) * kDirectFrames + threadIdx.x;
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const std::int64_t g = o / a.cout_g;
    const std::int64_t ol = o - g * a.cout_g;
    const float init = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
    float acc[kDirectPerThread];
#pragma unroll
    for (int c = 0; c < kDirectPerThread; ++c) acc[c] = init;
    for (std::int64_t ci = 0; ci < a.cin_g; ++ci) {
      const std::int64_t cin = g * a.cin_g + ci;
      const float* xrow = a.x + b * a.x_bs + cin * a.x_cs;
      const float* wrow = a.w + (cin * a.cout_g + ol) * a.kernel_size;
      for (std::int64_t k = 0; k < a.kernel_size; ++k) {
        const float wk = __ldg(wrow + k);
#pragma unroll
        for (int c = 0; c < kDirectPerThread; ++c) {
          const std::int64_t num = t0 + c * kDirectThreads + a.pad - k * a.dilation;
          if (num >= 0 && num % a.stride == 0) {
            const std::int64_t j = num / a.stride;
            if (j < a.in_frames && t0 + c * kDirectThreads < a.out_frames) {
              acc[c] = fmaf(wk, __ldg(xrow + j), acc[c]);
            }
          }
        }
      }
    }
    float* yrow = a.y + b * a.y_bs + o * a.y_cs;
#pragma unroll
    for (int c = 0; c < kDirectPerThread; ++c) {
      const std::int64_t t = t0 + c * kDirectThreads;
      if (t < a.out_frames) yrow[t] = acc[c];
    }
  }
}

// Polyphase ConvTranspose1d for few output channels per group (decoders: 512 -> 1, K 16,
// stride 8): thread = one input-rate frame q and PH consecutive phases of one (batch, out
// channel) row, i.e. PH consecutive output frames t = q * stride + phase - padding. Per
// (in channel, tap m) it loads one input frame x[q - m] (coalesced along q across the warp) and
// applies PH weights read as float4 broadcasts from shared memory, staged per channel chunk.
// Dilation 1. Each output written once, no atomics.
struct NarrowArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t rows;  // batch * out_channels
  std::int64_t out_channels;
  int cin_g, cout_g, K, P, T, chunk, phase_groups;
  std::int64_t pad, q0, qcount, in_frames, out_frames, q_tiles;
};

constexpr int kNarrowThreads = 256;
constexpr int kNarrowSmemFloats = 8192;

template <int PH>
__global__ void __launch_bounds__(kNarrowThreads)
    conv_transpose1d_polyphase_narrow_kernel(NarrowArgs a) {
  __shared__ __align__(16) float ws[kNarrowSmemFloats];
  const int tid = threadIdx.x;
  for (std::int64_t row = blockIdx.z; row < a.rows; row += gridDim.z) {
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const std::int64_t g = o / a.cout_g;
    const std::int64_t ol = o - g * a.cout_g;
    for (int pg = blockIdx.y; pg < a.phase_groups; pg += gridDim.y) {
      const int ph0 = pg * PH;
      for (std::int64_t qt = blockIdx.x; qt < a.q_tiles; qt += gridDim.x) {
        const std::int64_t qi = qt * kNarrowThreads + tid;
        const std::int64_t q = a.q0 + qi;
        float acc[PH];
#pragma unroll
        for (int j = 0; j < PH; ++j) acc[j] = 0.0f;
        for (int c0 = 0; c0 < a.cin_g; c0 += a.chunk) {
          const int cn = min(a.chunk, a.cin_g - c0);
          __syncthreads();  // the previous chunk's weights are no longer read
          for (int i = tid; i < cn * a.T * PH; i += kNarrowThreads) {
            const int j = i % PH;
            const int m = (i / PH) % a.T;
            const int ci = i / (PH * a.T);
            const int phase = ph0 + j;
            const int k = phase + m * a.P;
            float v = 0.0f;
            if (phase < a.P && k < a.K) {
              v = __ldg(a.w + ((g * a.cin_g + c0 + ci) * a.cout_g + ol) * a.K + k);
            }
            ws[i] = v;
          }
          __syncthreads();
          if (qi < a.qcount) {
            for (int ci = 0; ci < cn; ++ci) {
              const float* xrow = a.x + b * a.x_bs + (g * a.cin_g + c0 + ci) * a.x_cs;
              for (int m = 0; m < a.T; ++m) {
                const std::int64_t pos = q - m;
                const float xv =
                    static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames)
                        ? __ldg(xrow + pos)
                        : 0.0f;
                const float* wv = ws + (ci * a.T + m) * PH;
                if (m + 1 < a.T) {
#pragma unroll
                  for (int j4 = 0; j4 < PH / 4; ++j4) {
                    const float4 w4 = *reinterpret_cast<const float4*>(wv + j4 * 4);
                    acc[j4 * 4 + 0] = fmaf(w4.x, xv, acc[j4 * 4 + 0]);
                    acc[j4 * 4 + 1] = fmaf(w4.y, xv, acc[j4 * 4 + 1]);
                    acc[j4 * 4 + 2] = fmaf(w4.z, xv, acc[j4 * 4 + 2]);
                    acc[j4 * 4 + 3] = fmaf(w4.w, xv, acc[j4 * 4 + 3]);
                  }
                } else {
                  // The last tap exists only for phases < K - m * P (K need not be a multiple
                  // of the stride): a missing tap must add nothing, not 0 * x, which is NaN
                  // for an input Inf where PyTorch gives Inf.
#pragma unroll
                  for (int j = 0; j < PH; ++j) {
                    const float xm = ph0 + j + m * a.P < a.K ? xv : 0.0f;
                    acc[j] = fmaf(wv[j], xm, acc[j]);
                  }
                }
              }
            }
          }
        }
        if (qi < a.qcount) {
          const float bias = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
          float* yrow = a.y + b * a.y_bs + o * a.y_cs;
#pragma unroll
          for (int j = 0; j < PH; ++j) {
            const std::int64_t t = q * a.P + ph0 + j - a.pad;
            if (ph0 + j < a.P && t >= 0 && t < a.out_frames) yrow[t] = acc[j] + bias;
          }
        }
      }
    }
  }
}

// Split-reduction decoder (one or a few output channels per group, dilation 1, stride P <= 16,
// K a multiple of P so every (phase, tap) is a real weight, T = K / P <= 4 taps): memory-bound,
// every input frame is read once. A block owns QB = 32 * NQ consecutive input-rate frames q of
// one (batch, out channel) row and all P phases, i.e. QB * P consecutive output frames. Its 8
// warps split the input channels (warp w takes w, w + 8, ...); lane l owns q = qb + l + 32 i
// (coalesced loads, NQ * T independent loads per channel, two channels unrolled) and PH phase
// accumulators per q, with the channel's weights read as float4 broadcasts from shared memory.
// The 8 partial sums per output are reduced through shared memory, and the block's outputs are
// written contiguously. out[t = q P + ph - pad] = sum_c sum_m w[c][o][ph + m P] x[c][q - m].
constexpr int kSplitThreads = 256;
constexpr int kSplitWarps = kSplitThreads / 32;
constexpr int kSplitMaxT = 4;
constexpr int kSplitSmemFloats = 9216;  // max(8 warps * QB * (PH + 1)) over the instantiations

struct SplitArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t rows, out_channels;
  int cin_g, cout_g, K, P, T, chunk;
  std::int64_t pad, q0, qcount, in_frames, out_frames, q_tiles;
  int split;  // blocks per cluster (grid y) sharing one output tile's channels; 1 without
};

// With Cluster, the `split` blocks of a cluster (grid y) each reduce a slice of the input
// channels for the same output tile and the slices are summed in rank order through distributed
// shared memory: deterministic, no atomics, no workspace. It fills the GPU when there are fewer
// tiles than multiprocessors, e.g. a 256-frame streaming chunk through a 512 -> 1 decoder (one
// tile: 63 us on one block, the bulk of the stream's latency).
template <int PH, int NQ, bool Cluster>
__global__ void __launch_bounds__(kSplitThreads, 2)
    conv_transpose1d_polyphase_splitk_kernel(SplitArgs a) {
  constexpr int QB = 32 * NQ;
  static_assert(kSplitWarps * QB * (PH + 1) <= kSplitSmemFloats, "reduction buffer");
  static_assert(QB * PH <= kSplitSmemFloats, "cluster partials");
  __shared__ __align__(16) float sm[kSplitSmemFloats];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  int rank = 0;
  int split = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (Cluster) {
    rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
    split = a.split;
  }
#else
  if constexpr (Cluster) __trap();  // launched only where cluster launch is supported (sm_90+)
#endif
  const int c_begin = static_cast<int>(static_cast<std::int64_t>(a.cin_g) * rank / split);
  const int c_end = static_cast<int>(static_cast<std::int64_t>(a.cin_g) * (rank + 1) / split);
  for (std::int64_t row = blockIdx.z; row < a.rows; row += gridDim.z) {
    const std::int64_t b = row / a.out_channels;
    const std::int64_t o = row - b * a.out_channels;
    const std::int64_t g = o / a.cout_g;
    const std::int64_t ol = o - g * a.cout_g;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    for (std::int64_t qt = blockIdx.x; qt < a.q_tiles; qt += gridDim.x) {
      const std::int64_t qb = a.q0 + qt * QB;
      // Every frame this tile reads (qb - T + 1 .. qb + QB - 1) lies inside the input.
      const bool interior = qb - a.T + 1 >= 0 && qb + QB <= a.in_frames;
      float acc[NQ][PH];
#pragma unroll
      for (int i = 0; i < NQ; ++i)
#pragma unroll
        for (int j = 0; j < PH; ++j) acc[i][j] = 0.0f;
      for (int c0 = c_begin; c0 < c_end; c0 += a.chunk) {
        const int cn = min(a.chunk, c_end - c0);
        __syncthreads();  // the previous chunk's weights (or tile's reduction) are done
        for (int i = tid; i < cn * a.T * PH; i += kSplitThreads) {
          const int j = i % PH;
          const int m = (i / PH) % a.T;
          const int ci = i / (PH * a.T);
          float v = 0.0f;
          if (j < a.P)
            v = __ldg(a.w + ((g * a.cin_g + c0 + ci) * a.cout_g + ol) * a.K + j + m * a.P);
          sm[i] = v;
        }
        __syncthreads();
#pragma unroll 2
        for (int ci = warp; ci < cn; ci += kSplitWarps) {
          const float* xp = xg + static_cast<std::int64_t>(c0 + ci) * a.x_cs + qb + lane;
          float xv[NQ][kSplitMaxT];
#pragma unroll
          for (int i = 0; i < NQ; ++i) {
#pragma unroll
            for (int m = 0; m < kSplitMaxT; ++m) {
              const int d = 32 * i - m;
              float v = 0.0f;
              if (m < a.T && (interior || static_cast<std::uint64_t>(qb + lane + d) <
                                              static_cast<std::uint64_t>(a.in_frames))) {
                v = __ldg(xp + d);
              }
              xv[i][m] = v;
            }
          }
#pragma unroll
          for (int m = 0; m < kSplitMaxT; ++m) {
            if (m < a.T) {
              const float* wv = sm + (ci * a.T + m) * PH;
#pragma unroll
              for (int j4 = 0; j4 < PH / 4; ++j4) {
                const float4 w4 = *reinterpret_cast<const float4*>(wv + j4 * 4);
#pragma unroll
                for (int i = 0; i < NQ; ++i) {
                  acc[i][j4 * 4 + 0] = fmaf(w4.x, xv[i][m], acc[i][j4 * 4 + 0]);
                  acc[i][j4 * 4 + 1] = fmaf(w4.y, xv[i][m], acc[i][j4 * 4 + 1]);
                  acc[i][j4 * 4 + 2] = fmaf(w4.z, xv[i][m], acc[i][j4 * 4 + 2]);
                  acc[i][j4 * 4 + 3] = fmaf(w4.w, xv[i][m], acc[i][j4 * 4 + 3]);
                }
              }
            }
          }
        }
      }
      __syncthreads();  // weights no longer read: the buffer becomes the reduction buffer
      float* red = sm + warp * QB * (PH + 1);
#pragma unroll
      for (int i = 0; i < NQ; ++i)
#pragma unroll
        for (int j = 0; j < PH; ++j) red[(lane + 32 * i) * (PH + 1) + j] = acc[i][j];
      __syncthreads();
      const float bias = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
      float* yrow = a.y + b * a.y_bs + o * a.y_cs;
      if constexpr (Cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // This block's sum over its warps, then the cluster's sum over ranks, in rank order.
        constexpr int kPer = (QB * PH + kSplitThreads - 1) / kSplitThreads;
        float part[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int idx = tid + k * kSplitThreads;
          part[k] = 0.0f;
          if (idx < QB * a.P) {
            const int ql = idx / a.P;
            const int ph = idx - ql * a.P;
#pragma unroll
            for (int w = 0; w < kSplitWarps; ++w) part[k] += sm[(w * QB + ql) * (PH + 1) + ph];
          }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int idx = tid + k * kSplitThreads;
          if (idx < QB * a.P) sm[idx] = part[k];
        }
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        cluster.sync();
        const int e = QB * a.P;
        const int e0 = static_cast<int>(static_cast<std::int64_t>(e) * rank / split);
        const int e1 = static_cast<int>(static_cast<std::int64_t>(e) * (rank + 1) / split);
        for (int idx = e0 + tid; idx < e1; idx += kSplitThreads) {
          const int ql = idx / a.P;
          const int ph = idx - ql * a.P;
          const std::int64_t q = qb + ql;
          const std::int64_t t = q * a.P + ph - a.pad;
          if (q - a.q0 < a.qcount && t >= 0 && t < a.out_frames) {
            float s = *cluster.map_shared_rank(sm + idx, 0);
            for (int k = 1; k < split; ++k) s += *cluster.map_shared_rank(sm + idx, k);
            yrow[t] = s + bias;
          }
        }
        cluster.sync();  // every rank has read the partials before the next tile overwrites them
#endif
      } else {
        for (int idx = tid; idx < QB * a.P; idx += kSplitThreads) {
          const int ql = idx / a.P;
          const int ph = idx - ql * a.P;
          const std::int64_t q = qb + ql;
          const std::int64_t t = q * a.P + ph - a.pad;
          if (q - a.q0 < a.qcount && t >= 0 && t < a.out_frames) {
            float s = 0.0f;
#pragma unroll
            for (int w = 0; w < kSplitWarps; ++w) s += sm[(w * QB + ql) * (PH + 1) + ph];
            yrow[t] = s + bias;
          }
        }
      }
    }
  }
}

DirectArgs make_args(TensorView<const float> x, const float* w, const float* bias,
                     TensorView<float> y, std::int64_t batch, std::int64_t out_channels,
                     std::int64_t cin_g, std::int64_t cout_g, std::int64_t out_frames) {
  DirectArgs a{};
  set_views(a, x, w, bias, y);
  a.out_channels = out_channels;
  a.cin_g = cin_g;
  a.cout_g = cout_g;
  a.in_frames = x.frames();
  a.out_frames = out_frames;
  a.frame_blocks = (out_frames + kDirectFrames - 1) / kDirectFrames;
  a.items = batch * out_channels * a.frame_blocks;
  return a;
}

}  // namespace

int narrow_phases_per_thread(std::int64_t stride) {
  return stride >= 16 ? 16 : (stride >= 8 ? 8 : 4);
}

bool conv_transpose1d_narrow_supported(const ConvTranspose1dParams& p) {
  if (p.dilation != 1 || p.stride < 2) return false;
  const std::int64_t taps = (p.kernel_size + p.stride - 1) / p.stride;
  return taps * narrow_phases_per_thread(p.stride) <= kNarrowSmemFloats;
}

void launch_conv_transpose1d_narrow(const ConvTranspose1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name) {
  NarrowArgs a{};
  set_views(a, x, w, bias, y);
  set_polyphase(a, p);
  const int ph = narrow_phases_per_thread(p.stride);
  a.chunk = std::max(1, kNarrowSmemFloats / (a.T * ph));
  a.phase_groups = (a.P + ph - 1) / ph;
  a.q0 = p.padding / p.stride;
  a.qcount = (p.out_frames - 1 + p.padding) / p.stride - a.q0 + 1;
  a.q_tiles = (a.qcount + kNarrowThreads - 1) / kNarrowThreads;
  const dim3 grid(grid_dim(a.q_tiles, kMaxGridX), grid_dim(a.phase_groups, kMaxGridYZ),
                  grid_dim(a.rows, kMaxGridYZ));
  if (ph == 16) {
    conv_transpose1d_polyphase_narrow_kernel<16><<<grid, kNarrowThreads, 0, stream>>>(a);
  } else if (ph == 8) {
    conv_transpose1d_polyphase_narrow_kernel<8><<<grid, kNarrowThreads, 0, stream>>>(a);
  } else {
    conv_transpose1d_polyphase_narrow_kernel<4><<<grid, kNarrowThreads, 0, stream>>>(a);
  }
  check_launch(name, p);
}

bool conv_transpose1d_splitk_supported(const ConvTranspose1dParams& p) {
  if (p.dilation != 1 || p.stride < 2 || p.stride > 16 || p.kernel_size % p.stride != 0) {
    return false;
  }
  const std::int64_t taps = p.kernel_size / p.stride;
  const std::int64_t cin_g = p.in_channels / p.groups;
  return taps <= kSplitMaxT && cin_g * p.kernel_size * (p.out_channels / p.groups) < (1LL << 31);
}

void launch_conv_transpose1d_splitk(const ConvTranspose1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name) {
  SplitArgs a{};
  set_views(a, x, w, bias, y);
  set_polyphase(a, p);
  const int ph = a.P <= 4 ? 4 : (a.P <= 8 ? 8 : 16);
  const int qb = ph == 16 ? 64 : 128;
  // Weight chunk: whole multiples of the 8 warps' channel stride where possible.
  int chunk = kSplitSmemFloats / (a.T * ph);
  if (chunk > kSplitWarps) chunk -= chunk % kSplitWarps;
  a.chunk = std::max(1, chunk);
  a.q0 = p.padding / p.stride;
  a.qcount = (p.out_frames - 1 + p.padding) / p.stride - a.q0 + 1;
  a.q_tiles = (a.qcount + qb - 1) / qb;
  a.split = splitk_cluster_size(p);
  const dim3 grid(grid_dim(a.q_tiles, kMaxGridX), static_cast<unsigned>(a.split),
                  grid_dim(a.rows, kMaxGridYZ));
  if (a.split > 1) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kSplitThreads);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = static_cast<unsigned>(a.split);
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t st =
        ph == 16
            ? cudaLaunchKernelEx(&cfg, conv_transpose1d_polyphase_splitk_kernel<16, 2, true>, a)
        : ph == 8
            ? cudaLaunchKernelEx(&cfg, conv_transpose1d_polyphase_splitk_kernel<8, 4, true>, a)
            : cudaLaunchKernelEx(&cfg, conv_transpose1d_polyphase_splitk_kernel<4, 4, true>, a);
    if (st != cudaSuccess) {
      cudaGetLastError();  // clear it; report it with the kernel and the shape
      throw Error(std::string("CUDA: kernel ") + name + " (cluster of " + std::to_string(a.split) +
                  ") failed to launch for " + shape_text(p) + ": " + cudaGetErrorName(st) + " (" +
                  cudaGetErrorString(st) + ")");
    }
  } else if (ph == 16) {
    conv_transpose1d_polyphase_splitk_kernel<16, 2, false><<<grid, kSplitThreads, 0, stream>>>(a);
  } else if (ph == 8) {
    conv_transpose1d_polyphase_splitk_kernel<8, 4, false><<<grid, kSplitThreads, 0, stream>>>(a);
  } else {
    conv_transpose1d_polyphase_splitk_kernel<4, 4, false><<<grid, kSplitThreads, 0, stream>>>(a);
  }
  check_launch(name, p);
}

int splitk_cluster_size(const ConvTranspose1dParams& p) {
  if (!cluster_launch_supported()) return 1;
  const std::int64_t cin_g = p.in_channels / p.groups;
  const int ph = p.stride <= 4 ? 4 : (p.stride <= 8 ? 8 : 16);
  const std::int64_t qb = ph == 16 ? 64 : 128;
  const std::int64_t qcount = (p.out_frames - 1 + p.padding) / p.stride - p.padding / p.stride + 1;
  const std::int64_t blocks = ((qcount + qb - 1) / qb) * p.batch * p.out_channels;
  // At least one channel per warp of every rank; 8 ranks at most (the portable cluster size).
  const std::int64_t most = std::min<std::int64_t>(kMaxSplit, cin_g / kSplitWarps);
  static const int forced = [] {
    const char* v = std::getenv("CONVBANK_CUDA_SPLITK_CLUSTER");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (forced >= 1)
    return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(forced, most)));
  if (blocks >= num_sms() || most < 2) return 1;
  return static_cast<int>(std::min<std::int64_t>(most, (num_sms() + blocks - 1) / blocks));
}

namespace {

DirectArgs conv1d_args(const Conv1dParams& p, TensorView<const float> x, const float* w,
                       const float* bias, TensorView<float> y) {
  DirectArgs a = make_args(x, w, bias, y, p.batch, p.out_channels, p.in_channels / p.groups,
                           p.out_channels / p.groups, p.out_frames);
  a.kernel_size = p.kernel_size;
  a.stride = p.stride;
  a.dilation = p.dilation;
  a.pad = p.pad_left;
  a.mode = to_pad_mode(p.padding_mode);
  return a;
}

}  // namespace

void launch_conv1d_direct(const Conv1dParams& p, TensorView<const float> x, const float* w,
                          const float* bias, TensorView<float> y, cudaStream_t stream,
                          const char* name) {
  const DirectArgs a = conv1d_args(p, x, w, bias, y);
  conv1d_direct_coalesced_kernel<<<grid_dim(a.items, kMaxGridX), kDirectThreads, 0, stream>>>(a);
  check_launch(name, p);
}

void launch_conv1d_direct_flat(const Conv1dParams& p, TensorView<const float> x, const float* w,
                               const float* bias, TensorView<float> y, cudaStream_t stream,
                               const char* name) {
  DirectArgs a = conv1d_args(p, x, w, bias, y);
  a.items = p.batch * p.out_channels * p.out_frames;  // one per output, not per frame block
  conv1d_direct_flat_kernel<<<grid_dim((a.items + kDirectThreads - 1) / kDirectThreads, kMaxGridX),
                              kDirectThreads, 0, stream>>>(a);
  check_launch(name, p);
}

void launch_conv_transpose1d_direct(const ConvTranspose1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name) {
  DirectArgs a = make_args(x, w, bias, y, p.batch, p.out_channels, p.in_channels / p.groups,
                           p.out_channels / p.groups, p.out_frames);
  a.kernel_size = p.kernel_size;
  a.stride = p.stride;
  a.dilation = p.dilation;
  a.pad = p.padding;
  a.mode = kPadZeros;
  conv_transpose1d_direct_gather_kernel<<<grid_dim(a.items, kMaxGridX), kDirectThreads, 0,
                                          stream>>>(a);
  check_launch(name, p);
}

namespace {

constexpr int kEdgeThreads = 256;

// The layer as the direct kernels see it, and which of its outputs are edges.
struct EdgeArgs : DirectArgs {
  std::int64_t left, right;  // outputs [0, left) and [right, out_frames) of every row
  std::int64_t per_row, warps;
};

// One warp per edge output: lanes split the input channels, each sums its taps in float64 (an
// edge output then is at least as accurate as the zeros kernel's interior), a shuffle tree adds
// the lanes. NaN and Inf propagate through the float64 sums as through PyTorch's.
__global__ void __launch_bounds__(kEdgeThreads) conv1d_padding_edges_kernel(EdgeArgs a) {
  const int lane = threadIdx.x % 32;
  const std::int64_t first = (blockIdx.x * std::int64_t{kEdgeThreads} + threadIdx.x) / 32;
  const std::int64_t step = std::int64_t{gridDim.x} * (kEdgeThreads / 32);
  for (std::int64_t item = first; item < a.warps; item += step) {
    const std::int64_t row = item / a.per_row, e = item - row * a.per_row;
    const std::int64_t t = e < a.left ? e : a.right + (e - a.left);
    const std::int64_t b = row / a.out_channels, o = row - b * a.out_channels;
    const std::int64_t c0 = o / a.cout_g * a.cin_g;
    const std::int64_t pos0 = t * a.stride - a.pad;
    double acc = 0.0;
    for (std::int64_t ci = lane; ci < a.cin_g; ci += 32) {
      const float* xr = a.x + b * a.x_bs + (c0 + ci) * a.x_cs;
      const float* wr = a.w + (o * a.cin_g + ci) * a.kernel_size;
      for (std::int64_t k = 0; k < a.kernel_size; ++k) {
        acc += static_cast<double>(__ldg(wr + k)) *
               static_cast<double>(load_padded(xr, pos0 + k * a.dilation, a.in_frames, a.mode));
      }
    }
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) {
      if (a.bias != nullptr) acc += static_cast<double>(__ldg(a.bias + o));
      a.y[b * a.y_bs + o * a.y_cs + t] = static_cast<float>(acc);
    }
  }
}

}  // namespace

void launch_conv1d_padding_edges(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                 const float* bias, TensorView<float> y, cudaStream_t stream,
                                 const char* name) {
  // Output t reads frames t s - pad_left + k d, k < K: inside the row for t in [left, right).
  const std::int64_t out = p.out_frames, span = p.dilation * (p.kernel_size - 1);
  const std::int64_t left = std::min(out, (p.pad_left + p.stride - 1) / p.stride);
  const std::int64_t last_start = p.in_frames - 1 - span + p.pad_left;  // t s <= this
  const std::int64_t right =
      last_start < 0 ? left : std::clamp(last_start / p.stride + 1, left, out);
  EdgeArgs a{};
  static_cast<DirectArgs&>(a) = conv1d_args(p, x, w, bias, y);
  a.left = left;
  a.right = right;
  a.per_row = left + (out - right);
  a.warps = p.batch * p.out_channels * a.per_row;
  if (a.warps == 0) return;
  const std::int64_t blocks = (a.warps + kEdgeThreads / 32 - 1) / (kEdgeThreads / 32);
  conv1d_padding_edges_kernel<<<grid_dim(blocks, kMaxGridX), kEdgeThreads, 0, stream>>>(a);
  check_launch(name, p);
}

}  // namespace convbank::detail::cuda
