// FFMA implicit GEMM for Conv1d and ConvTranspose1d in the native (batch, channel, time) layout.
//
// Conv1d, per (batch, group): rows = output channels, cols = output frames, reduction =
// (input channel, tap); B[(ci, k)][t] = x[ci][t * stride + k * dilation - pad_left] is gathered
// straight from the input into shared memory (im2col only in shared memory; the padding mode
// is an index map in that load).
//
// ConvTranspose1d (dilation 1 and any stride, or stride 1 and any dilation), polyphase: with
// u = t + padding, q = u / stride and phase = u % stride, output t receives
// x[ci][q - m * dstep] * w[ci][co][phase + m * stride] for taps m of that phase. Rows are
// (out channel, phase), cols are q, the reduction is (in channel, m): no zeros are inserted,
// each output is written once by one thread, no atomics.
//
// Block tile BM x BN, reduction step 8, each thread an TM x TN register block read from
// shared memory as float4; global->register prefetch of the next step overlaps the FFMAs of
// the current one (two shared buffers, one barrier per step).
#include "cuda/conv_common.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kBK = 8;

struct GemmArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t groups, bg_count;
  int cin_g, cout_g, K;
  std::int64_t in_frames, out_frames;
  std::int64_t stride, dil, pad;
  int mode;
  int P;               // transpose: phases per out channel (rows = cout_g * P)
  int T;               // taps per reduction channel
  std::int64_t dstep;  // transpose: input step per tap
  std::int64_t q0;     // transpose: first q
  int rows;
  std::int64_t cols;
  int cchunks;  // ceil(cin_g / kBK), for the tap-outer order
  int steps;
  int tap_outer;  // reduction order (tap, channel chunk) instead of flat (channel, tap)
  int b_kfast;    // B tile loaded reduction-fastest (large conv strides)
  int vec_store;
  std::int64_t row_tiles, col_tiles;
};

// The outputs of one polyphase tile (rows = (out channel, phase), cols = q) by the definition:
// a sum over (in channel, tap) of the taps that exist for the phase.
__device__ void transpose_tile_by_definition(const GemmArgs& a, const float* xg, const float* wg,
                                             std::int64_t b, std::int64_t g, int row0,
                                             std::int64_t col0, int bm, int bn, int nt) {
  for (int e = threadIdx.x; e < bm * bn; e += nt) {
    const int rowg = row0 + e / bn;
    const std::int64_t c = col0 + e % bn;
    if (rowg >= a.rows || c >= a.cols) continue;
    const int co = rowg / a.P;
    const int phase = rowg - co * a.P;
    const std::int64_t t = (a.q0 + c) * a.stride + phase - a.pad;
    if (t < 0 || t >= a.out_frames) continue;
    float sum = 0.0f;
    for (int ci = 0; ci < a.cin_g; ++ci) {
      const float* xrow = xg + ci * a.x_cs;
      const float* wrow = wg + (static_cast<std::int64_t>(ci) * a.cout_g + co) * a.K;
      for (int m = 0; phase + m * a.P < a.K; ++m) {
        const std::int64_t pos = a.q0 + c - m * a.dstep;
        if (static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames)) {
          sum = fmaf(__ldg(wrow + phase + m * a.P), __ldg(xrow + pos), sum);
        }
      }
    }
    const std::int64_t och = g * a.cout_g + co;
    const float bias = a.bias != nullptr ? __ldg(a.bias + och) : 0.0f;
    a.y[b * a.y_bs + och * a.y_cs + t] = sum + bias;
  }
}

template <int BM, int BN, int TM, int TN, bool Transposed>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), (BM / TM) * (BN / TN) >= 256 ? 2 : 3)
    conv_gemm_ffma_kernel(GemmArgs a) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int AL = (kBK * BM + NT - 1) / NT;
  constexpr int BL = (kBK * BN + NT - 1) / NT;
  constexpr int LDA = BM + 4;
  constexpr int LDB = BN + 4;
  constexpr int AG = TM / 4, BG = TN / 4;  // float4 groups per thread
  constexpr int AGS = BM / AG, BGS = BN / BG;
  __shared__ __align__(16) float As[2][kBK][LDA];
  __shared__ __align__(16) float Bs[2][kBK][LDB];

  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN);
  const int ty = tid / (BN / TN);

  for (std::int64_t bg = blockIdx.z; bg < a.bg_count; bg += gridDim.z) {
    const std::int64_t b = bg / a.groups;
    const std::int64_t g = bg - b * a.groups;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    const float* wg = a.w + g * static_cast<std::int64_t>(a.cin_g) * a.cout_g * a.K;
    for (std::int64_t rt = blockIdx.y; rt < a.row_tiles; rt += gridDim.y) {
      const int row0 = static_cast<int>(rt * BM);
      for (std::int64_t ct = blockIdx.x; ct < a.col_tiles; ct += gridDim.x) {
        const std::int64_t col0 = ct * BN;
        float acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
        float ra[AL], rb[BL];

        auto decode = [&](int step, int kk, int& ci, int& m) -> bool {
          if (a.tap_outer) {
            m = step / a.cchunks;
            ci = (step - m * a.cchunks) * kBK + kk;
            return ci < a.cin_g;
          }
          const int r = step * kBK + kk;
          ci = r / a.T;
          m = r - ci * a.T;
          return ci < a.cin_g;
        };

        auto load = [&](int step) {
#pragma unroll
          for (int l = 0; l < AL; ++l) {
            const int i = tid + l * NT;
            float v = 0.0f;
            if (i < kBK * BM) {
              int kk, row;
              if (Transposed) {
                row = i % BM;
                kk = i / BM;
              } else {
                kk = i % kBK;
                row = i / kBK;
              }
              int ci, m;
              const int rowg = row0 + row;
              if (decode(step, kk, ci, m) && rowg < a.rows) {
                if (Transposed) {
                  const int co = rowg / a.P;
                  const int k = (rowg - co * a.P) + m * a.P;
                  if (k < a.K)
                    v = __ldg(wg + (static_cast<std::int64_t>(ci) * a.cout_g + co) * a.K + k);
                } else {
                  v = __ldg(wg + (static_cast<std::int64_t>(rowg) * a.cin_g + ci) * a.K + m);
                }
              }
            }
            ra[l] = v;
          }
#pragma unroll
          for (int l = 0; l < BL; ++l) {
            const int i = tid + l * NT;
            float v = 0.0f;
            if (i < kBK * BN) {
              int kk, col;
              if (a.b_kfast) {
                kk = i % kBK;
                col = i / kBK;
              } else {
                col = i % BN;
                kk = i / BN;
              }
              int ci, m;
              const std::int64_t colg = col0 + col;
              if (decode(step, kk, ci, m) && colg < a.cols) {
                const float* xrow = xg + ci * a.x_cs;
                if (Transposed) {
                  const std::int64_t pos = a.q0 + colg - m * a.dstep;
                  if (static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames)) {
                    v = __ldg(xrow + pos);
                  }
                } else {
                  v = load_padded(xrow, colg * a.stride + m * a.dil - a.pad, a.in_frames, a.mode);
                }
              }
            }
            rb[l] = v;
          }
        };

        auto store = [&](int buf) {
#pragma unroll
          for (int l = 0; l < AL; ++l) {
            const int i = tid + l * NT;
            if (i < kBK * BM) {
              if (Transposed) {
                As[buf][i / BM][i % BM] = ra[l];
              } else {
                As[buf][i % kBK][i / kBK] = ra[l];
              }
            }
          }
#pragma unroll
          for (int l = 0; l < BL; ++l) {
            const int i = tid + l * NT;
            if (i < kBK * BN) {
              if (a.b_kfast) {
                Bs[buf][i % kBK][i / kBK] = rb[l];
              } else {
                Bs[buf][i / BN][i % BN] = rb[l];
              }
            }
          }
        };

        load(0);
        store(0);
        __syncthreads();
        for (int step = 0; step < a.steps; ++step) {
          const int buf = step & 1;
          const bool more = step + 1 < a.steps;
          if (more) load(step + 1);
#pragma unroll
          for (int kk = 0; kk < kBK; ++kk) {
            float av[TM], bv[TN];
#pragma unroll
            for (int gi = 0; gi < AG; ++gi) {
              const float4 v = *reinterpret_cast<const float4*>(&As[buf][kk][gi * AGS + ty * 4]);
              av[gi * 4 + 0] = v.x;
              av[gi * 4 + 1] = v.y;
              av[gi * 4 + 2] = v.z;
              av[gi * 4 + 3] = v.w;
            }
#pragma unroll
            for (int gj = 0; gj < BG; ++gj) {
              const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][kk][gj * BGS + tx * 4]);
              bv[gj * 4 + 0] = v.x;
              bv[gj * 4 + 1] = v.y;
              bv[gj * 4 + 2] = v.z;
              bv[gj * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
              for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
          }
          if (more) store(buf ^ 1);
          __syncthreads();
        }

        // Epilogue: bias, then each output written exactly once.
        int nonfinite = 0;  // a stored output of this tile is NaN or Inf
#pragma unroll
        for (int i = 0; i < TM; ++i) {
          const int rowg = row0 + (i / 4) * AGS + ty * 4 + (i % 4);
          if (rowg >= a.rows) continue;
          int co = rowg, phase = 0;
          if (Transposed) {
            co = rowg / a.P;
            phase = rowg - co * a.P;
          }
          const std::int64_t och = g * a.cout_g + co;
          const float bias = a.bias != nullptr ? __ldg(a.bias + och) : 0.0f;
          float* yrow = a.y + b * a.y_bs + och * a.y_cs;
#pragma unroll
          for (int gj = 0; gj < BG; ++gj) {
            const std::int64_t c = col0 + gj * BGS + tx * 4;
            // Output frame of col c: conv t = c; transpose t = (q0 + c) * stride + phase - pad.
            const std::int64_t t = Transposed ? (a.q0 + c) * a.stride + phase - a.pad : c;
            if (a.vec_store && c + 3 < a.cols && t >= 0 && t + 3 < a.out_frames) {
              float4 v;
              v.x = acc[i][gj * 4 + 0] + bias;
              v.y = acc[i][gj * 4 + 1] + bias;
              v.z = acc[i][gj * 4 + 2] + bias;
              v.w = acc[i][gj * 4 + 3] + bias;
              nonfinite |= !(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))) <=
                             3.402823466e38f);
              *reinterpret_cast<float4*>(yrow + t) = v;
            } else {
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const std::int64_t tj = t + j * (Transposed ? a.stride : 1);
                if (c + j < a.cols && tj >= 0 && tj < a.out_frames) {
                  const float v = acc[i][gj * 4 + j] + bias;
                  nonfinite |= !(fabsf(v) <= 3.402823466e38f);
                  yrow[tj] = v;
                }
              }
            }
          }
        }
        // When K is not a multiple of the stride, the zero-filled weights of missing taps meet
        // real inputs, and 0 * Inf is NaN where PyTorch's sum gives Inf. Only a tile that
        // stored a non-finite value can be affected; it is recomputed by the definition.
        if (Transposed && a.K % a.P != 0 && __syncthreads_or(nonfinite)) {
          transpose_tile_by_definition(a, xg, wg, b, g, row0, col0, BM, BN, NT);
        }
        __syncthreads();  // the next tile of this block reuses the shared buffers
      }
    }
  }
}

template <int BM, int BN, int TM, int TN, bool Transposed>
void launch_tile(GemmArgs a, cudaStream_t stream, const char* name, const LaunchShape& shape) {
  constexpr int NT = (BM / TM) * (BN / TN);
  a.row_tiles = (a.rows + BM - 1) / BM;
  a.col_tiles = (a.cols + BN - 1) / BN;
  const dim3 grid(grid_dim(a.col_tiles, kMaxGridX), grid_dim(a.row_tiles, kMaxGridYZ),
                  grid_dim(a.bg_count, kMaxGridYZ));
  conv_gemm_ffma_kernel<BM, BN, TM, TN, Transposed><<<grid, NT, 0, stream>>>(a);
  check_launch(name, shape);
}

template <bool Transposed>
void launch_any(const GemmArgs& a, GemmTile tile, cudaStream_t stream, const char* name,
                const LaunchShape& shape) {
  switch (tile) {
    case GemmTile::k128x128:
      launch_tile<128, 128, 8, 8, Transposed>(a, stream, name, shape);
      break;
    case GemmTile::k64x128:
      launch_tile<64, 128, 8, 8, Transposed>(a, stream, name, shape);
      break;
    case GemmTile::k32x128:
      launch_tile<32, 128, 4, 8, Transposed>(a, stream, name, shape);
      break;
    case GemmTile::k16x128:
      launch_tile<16, 128, 4, 4, Transposed>(a, stream, name, shape);
      break;
  }
}

GemmArgs common_args(TensorView<const float> x, const float* w, const float* bias,
                     TensorView<float> y) {
  GemmArgs a{};
  set_views(a, x, w, bias, y);
  a.in_frames = x.frames();
  a.out_frames = y.frames();
  a.vec_store = (reinterpret_cast<std::uintptr_t>(y.data()) % 16 == 0) &&
                y.channel_stride() % 4 == 0 && y.batch_stride() % 4 == 0;
  return a;
}

void finish_reduction(GemmArgs& a) {
  a.cchunks = (a.cin_g + kBK - 1) / kBK;
  a.tap_outer = a.cin_g >= kBK ? 1 : 0;
  a.steps = a.tap_outer ? a.T * a.cchunks : (a.cin_g * a.T + kBK - 1) / kBK;
}

}  // namespace

void launch_conv1d_gemm(const Conv1dParams& p, TensorView<const float> x, const float* w,
                        const float* bias, TensorView<float> y, cudaStream_t stream, GemmTile tile,
                        const char* name) {
  GemmArgs a = common_args(x, w, bias, y);
  a.groups = p.groups;
  a.bg_count = p.batch * p.groups;
  a.cin_g = static_cast<int>(p.in_channels / p.groups);
  a.cout_g = static_cast<int>(p.out_channels / p.groups);
  a.K = static_cast<int>(p.kernel_size);
  a.stride = p.stride;
  a.dil = p.dilation;
  a.pad = p.pad_left;
  a.mode = to_pad_mode(p.padding_mode);
  a.P = 1;
  a.T = a.K;
  a.rows = a.cout_g;
  a.cols = p.out_frames;
  finish_reduction(a);
  a.b_kfast = (p.stride >= 4 && !a.tap_outer) ? 1 : 0;
  launch_any<false>(a, tile, stream, name, p);
}

void launch_conv_transpose1d_gemm(const ConvTranspose1dParams& p, TensorView<const float> x,
                                  const float* w, const float* bias, TensorView<float> y,
                                  cudaStream_t stream, GemmTile tile, const char* name) {
  GemmArgs a = common_args(x, w, bias, y);
  a.groups = p.groups;
  a.bg_count = p.batch * p.groups;
  a.cin_g = static_cast<int>(p.in_channels / p.groups);
  a.cout_g = static_cast<int>(p.out_channels / p.groups);
  a.K = static_cast<int>(p.kernel_size);
  a.stride = p.stride;
  a.dil = p.dilation;
  a.pad = p.padding;
  a.mode = kPadZeros;
  if (p.stride == 1) {
    a.P = 1;
    a.T = a.K;
    a.dstep = p.dilation;
  } else {  // dilation 1 (the dispatcher guarantees it)
    a.P = static_cast<int>(p.stride);
    a.T = static_cast<int>((p.kernel_size + p.stride - 1) / p.stride);
    a.dstep = 1;
  }
  a.q0 = p.padding / p.stride;
  a.cols = (p.out_frames - 1 + p.padding) / p.stride - a.q0 + 1;
  a.rows = a.cout_g * a.P;
  finish_reduction(a);
  a.b_kfast = 0;
  if (a.P != 1) a.vec_store = 0;
  launch_any<true>(a, tile, stream, name, p);
}

}  // namespace convbank::detail::cuda
