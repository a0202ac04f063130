// 1-D Winograd F(4,3) for K = 3, stride 1, dilation 1: 6 multiplies per 4 outputs per
// (in, out) channel pair instead of 12, so half the FFMAs of the direct form.
//
// Interpolation points 0, 1, -1, 1/2, -2, inf (better conditioned than 0, +-1, +-2: on random
// data with 128 input channels this measured 5.7e-7 relative L2 against float64 where the
// direct form gives 3.5e-7, both in float32; the bar is 1e-6).
//
//   y = A^T [ (G g) .* (B^T d) ],  d = 6 input frames, g = 3 taps, y = 4 output frames.
//
// Per block: 64 output channels x 32 tiles (128 frames), 6 warps, warp xi owns the GEMM of
// transform point xi (8 x 8 register block per thread: 64 out channels x 32 tiles). For each
// chunk of 8 input channels the block transforms its input tiles (B^T d) and the weights (G g)
// into shared memory; the next chunk's raw loads are issued before this chunk's FFMAs. The
// epilogue exchanges the 6 products through shared memory and applies A^T, bias, and
// 16-byte stores along time.
//
// Non-finite inputs: the transforms mix the 6 frames of a tile, so one NaN/Inf would spread to
// neighbouring outputs (and Inf would turn into NaN through Inf - Inf). If a frame inside the
// window of an output the block stores is NaN or Inf, that stored output comes out NaN/Inf; the
// epilogue ORs this into a block-wide flag (__syncthreads_or) and the block then recomputes its
// outputs with the direct formula, so exactly the outputs whose window holds the value are
// NaN/Inf, with PyTorch's classes (one Inf term stays +-Inf). Free when the inputs are finite.
//
// ConvTranspose1d with stride 1 is the same convolution with w'[co][ci][k] = w[ci][co][2 - k]
// and the input shifted by padding - 2: done by the index map of the weight load.
#include "cuda/conv_common.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kWThreads = 192;  // 6 warps, one per transform point
constexpr int kWCo = 64;        // output channels per block
constexpr int kWTiles = 32;     // tiles of 4 frames per block
constexpr int kWFrames = kWTiles * 4;
constexpr int kWCk = 8;  // input channels per chunk
constexpr int kLdU = kWCo + 4;
constexpr int kLdM = kWTiles + 4;
constexpr int kUFloats = 6 * kWCk * kLdU;
constexpr int kVFloats = 6 * kWCk * kWTiles;
constexpr int kMFloats = 6 * kWCo * kLdM;
constexpr int kSmemFloats = (kUFloats + kVFloats) > kMFloats ? (kUFloats + kVFloats) : kMFloats;
constexpr int kVPairs = kWCk * kWTiles;                       // 256
constexpr int kUPairs = kWCk * kWCo;                          // 512
constexpr int kVPer = (kVPairs + kWThreads - 1) / kWThreads;  // 2
constexpr int kUPer = (kUPairs + kWThreads - 1) / kWThreads;  // 3

struct WinoArgs {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t groups, bg_count;
  int cin_g, cout_g;
  std::int64_t in_frames, out_frames;
  std::int64_t in_offset;  // input frame of output 0, tap 0
  int mode;
  int vec_store;
  std::int64_t co_tiles, t_tiles;
};

// The direct formula for one block's outputs (64 out channels x 128 frames): used when the
// block's input holds a NaN/Inf. Out of line, so the Winograd main loop keeps its registers.
template <bool Transposed>
__device__ __forceinline__ void winograd_direct_fallback(const WinoArgs& a, const float* xg,
                                                         const float* wg, std::int64_t b,
                                                         std::int64_t g, int co0, std::int64_t t0,
                                                         std::int64_t base) {
  const int tid = threadIdx.x;
  for (int p = tid; p < kWCo * kWFrames; p += kWThreads) {
    const int co = p / kWFrames, tl = p % kWFrames;
    const int cog = co0 + co;
    const std::int64_t t = t0 + tl;
    if (cog >= a.cout_g || t >= a.out_frames) continue;
    float s = 0.0f;
    for (int ci = 0; ci < a.cin_g; ++ci) {
      const float* row = xg + ci * a.x_cs;
      const float* wp = Transposed ? wg + (static_cast<std::int64_t>(ci) * a.cout_g + cog) * 3
                                   : wg + (static_cast<std::int64_t>(cog) * a.cin_g + ci) * 3;
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const float wk = __ldg(wp + (Transposed ? 2 - k : k));
        s = fmaf(wk, load_padded(row, base + tl + k, a.in_frames, a.mode), s);
      }
    }
    const std::int64_t och = g * a.cout_g + cog;
    const float bias = a.bias != nullptr ? __ldg(a.bias + och) : 0.0f;
    a.y[b * a.y_bs + och * a.y_cs + t] = s + bias;
  }
}

template <bool Transposed>
__global__ void __launch_bounds__(kWThreads, 2) conv1d_winograd_f43_kernel(WinoArgs a) {
  extern __shared__ __align__(16) float smem[];
  float* Us = smem;             // [6][kWCk][kLdU]
  float* Vs = smem + kUFloats;  // [6][kWCk][kWTiles]
  float* Ms = smem;             // [6][kWCo][kLdM], epilogue only

  const int tid = threadIdx.x;
  const int xi = tid >> 5;
  const int lane = tid & 31;
  const int ty = lane >> 2;  // 0..7 -> out channels ty*4.. and 32 + ty*4..
  const int tx = lane & 3;   // 0..3 -> tiles tx*4.. and 16 + tx*4..

  for (std::int64_t bg = blockIdx.z; bg < a.bg_count; bg += gridDim.z) {
    const std::int64_t b = bg / a.groups;
    const std::int64_t g = bg - b * a.groups;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    const float* wg = a.w + g * static_cast<std::int64_t>(a.cin_g) * a.cout_g * 3;
    for (std::int64_t cot = blockIdx.y; cot < a.co_tiles; cot += gridDim.y) {
      const int co0 = static_cast<int>(cot * kWCo);
      for (std::int64_t tt = blockIdx.x; tt < a.t_tiles; tt += gridDim.x) {
        const std::int64_t t0 = tt * kWFrames;
        const std::int64_t base = t0 + a.in_offset;
        // Fast path: every frame this block reads lies inside the input.
        const bool interior = base >= 0 && base + kWFrames + 2 <= a.in_frames;

        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

        float dv[kVPer][6];
        float wu[kUPer][3];
        auto load_raw = [&](int c0) {
#pragma unroll
          for (int l = 0; l < kVPer; ++l) {
            const int p = tid + l * kWThreads;
            const int ci = c0 + p / kWTiles;
            const int tl = p % kWTiles;
#pragma unroll
            for (int i = 0; i < 6; ++i) dv[l][i] = 0.0f;
            if (p < kVPairs && ci < a.cin_g) {
              const float* row = xg + ci * a.x_cs;
              const std::int64_t pos = base + tl * 4;
              if (interior) {
#pragma unroll
                for (int i = 0; i < 6; ++i) dv[l][i] = __ldg(row + pos + i);
              } else {
#pragma unroll
                for (int i = 0; i < 6; ++i) {
                  // Past the last output the frames are not needed: read as 0.
                  dv[l][i] = (t0 + tl * 4 + i - 2 < a.out_frames || i < 2)
                                 ? load_padded(row, pos + i, a.in_frames, a.mode)
                                 : 0.0f;
                }
              }
            }
          }
#pragma unroll
          for (int l = 0; l < kUPer; ++l) {
            const int p = tid + l * kWThreads;
            int ci, co;
            if (Transposed) {  // w[ci][co][k]: co contiguous
              ci = p / kWCo;
              co = p % kWCo;
            } else {  // w[co][ci][k]: ci contiguous
              co = p / kWCk;
              ci = p % kWCk;
            }
            wu[l][0] = wu[l][1] = wu[l][2] = 0.0f;
            const int cig = c0 + ci, cog = co0 + co;
            if (p < kUPairs && cig < a.cin_g && cog < a.cout_g) {
              if (Transposed) {
                const float* wp = wg + (static_cast<std::int64_t>(cig) * a.cout_g + cog) * 3;
                wu[l][0] = __ldg(wp + 2);
                wu[l][1] = __ldg(wp + 1);
                wu[l][2] = __ldg(wp + 0);
              } else {
                const float* wp = wg + (static_cast<std::int64_t>(cog) * a.cin_g + cig) * 3;
                wu[l][0] = __ldg(wp + 0);
                wu[l][1] = __ldg(wp + 1);
                wu[l][2] = __ldg(wp + 2);
              }
            }
          }
        };

        auto transform_store = [&]() {
#pragma unroll
          for (int l = 0; l < kVPer; ++l) {
            const int p = tid + l * kWThreads;
            if (p < kVPairs) {
              const float* d = dv[l];
              // B^T rows for points 0, 1, -1, 1/2, -2, inf.
              float v[6];
              v[0] = d[0] - 1.5f * d[1] - 2.0f * d[2] + 1.5f * d[3] + d[4];
              v[1] = (-1.0f / 3.0f) * d[1] + (1.0f / 6.0f) * d[2] + (5.0f / 6.0f) * d[3] +
                     (1.0f / 3.0f) * d[4];
              v[2] = (-1.0f / 3.0f) * d[1] + (5.0f / 6.0f) * d[2] - (1.0f / 6.0f) * d[3] -
                     (1.0f / 3.0f) * d[4];
              v[3] = (32.0f / 15.0f) * d[1] + (16.0f / 15.0f) * d[2] - (32.0f / 15.0f) * d[3] -
                     (16.0f / 15.0f) * d[4];
              v[4] = (1.0f / 30.0f) * d[1] - (1.0f / 15.0f) * d[2] - (1.0f / 30.0f) * d[3] +
                     (1.0f / 15.0f) * d[4];
              v[5] = d[1] - 1.5f * d[2] - 2.0f * d[3] + 1.5f * d[4] + d[5];
              const int ci = p / kWTiles, tl = p % kWTiles;
#pragma unroll
              for (int q = 0; q < 6; ++q) Vs[(q * kWCk + ci) * kWTiles + tl] = v[q];
            }
          }
#pragma unroll
          for (int l = 0; l < kUPer; ++l) {
            const int p = tid + l * kWThreads;
            if (p < kUPairs) {
              int ci, co;
              if (Transposed) {
                ci = p / kWCo;
                co = p % kWCo;
              } else {
                co = p / kWCk;
                ci = p % kWCk;
              }
              const float g0 = wu[l][0], g1 = wu[l][1], g2 = wu[l][2];
              float u[6];
              u[0] = g0;
              u[1] = g0 + g1 + g2;
              u[2] = g0 - g1 + g2;
              u[3] = g0 + 0.5f * g1 + 0.25f * g2;
              u[4] = g0 - 2.0f * g1 + 4.0f * g2;
              u[5] = g2;
#pragma unroll
              for (int q = 0; q < 6; ++q) Us[(q * kWCk + ci) * kLdU + co] = u[q];
            }
          }
        };

        const int chunks = (a.cin_g + kWCk - 1) / kWCk;
        load_raw(0);
        for (int chunk = 0; chunk < chunks; ++chunk) {
          transform_store();
          __syncthreads();
          if (chunk + 1 < chunks) load_raw((chunk + 1) * kWCk);
          const float* U = Us + xi * kWCk * kLdU;
          const float* V = Vs + xi * kWCk * kWTiles;
#pragma unroll
          for (int ci = 0; ci < kWCk; ++ci) {
            const float4 a0 = *reinterpret_cast<const float4*>(U + ci * kLdU + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4*>(U + ci * kLdU + 32 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4*>(V + ci * kWTiles + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4*>(V + ci * kWTiles + 16 + tx * 4);
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
              for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
          }
          __syncthreads();
        }

        // Exchange the 6 transform-domain products through shared memory.
        float* M = Ms + xi * kWCo * kLdM;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int co = (i / 4) * 32 + ty * 4 + (i % 4);
#pragma unroll
          for (int gj = 0; gj < 2; ++gj) {
            float4 v;
            v.x = acc[i][gj * 4 + 0];
            v.y = acc[i][gj * 4 + 1];
            v.z = acc[i][gj * 4 + 2];
            v.w = acc[i][gj * 4 + 3];
            *reinterpret_cast<float4*>(M + co * kLdM + gj * 16 + tx * 4) = v;
          }
        }
        __syncthreads();
        int nonfinite = 0;  // a stored output of this block is NaN/Inf
        for (int p = tid; p < kWCo * kWTiles; p += kWThreads) {
          const int co = p / kWTiles, tl = p % kWTiles;
          const int cog = co0 + co;
          const std::int64_t t = t0 + tl * 4;
          if (cog < a.cout_g && t < a.out_frames) {
            float m[6];
#pragma unroll
            for (int q = 0; q < 6; ++q) m[q] = Ms[(q * kWCo + co) * kLdM + tl];
            const std::int64_t och = g * a.cout_g + cog;
            const float bias = a.bias != nullptr ? __ldg(a.bias + och) : 0.0f;
            // A^T rows: 1 1 1 1 1 0 / 0 1 -1 1/2 -2 0 / 0 1 1 1/4 4 0 / 0 1 -1 1/8 -8 1.
            float4 r;
            r.x = m[0] + m[1] + m[2] + m[3] + m[4] + bias;
            r.y = m[1] - m[2] + 0.5f * m[3] - 2.0f * m[4] + bias;
            r.z = m[1] + m[2] + 0.25f * m[3] + 4.0f * m[4] + bias;
            r.w = m[1] - m[2] + 0.125f * m[3] - 8.0f * m[4] + m[5] + bias;
            float* yrow = a.y + b * a.y_bs + och * a.y_cs;
            const float mag = fabsf(r.x) + (t + 1 < a.out_frames ? fabsf(r.y) : 0.0f) +
                              (t + 2 < a.out_frames ? fabsf(r.z) : 0.0f) +
                              (t + 3 < a.out_frames ? fabsf(r.w) : 0.0f);
            nonfinite |= !(mag <= 3.402823466e38f);
            if (a.vec_store && t + 3 < a.out_frames) {
              *reinterpret_cast<float4*>(yrow + t) = r;
            } else {
              yrow[t] = r.x;
              if (t + 1 < a.out_frames) yrow[t + 1] = r.y;
              if (t + 2 < a.out_frames) yrow[t + 2] = r.z;
              if (t + 3 < a.out_frames) yrow[t + 3] = r.w;
            }
          }
        }
        // A NaN/Inf input inside the window of a stored output makes that output non-finite
        // here (every frame of an output's window enters some transform point that output
        // sums, and 0 * Inf is NaN too); then the block's outputs are recomputed directly.
        if (__syncthreads_or(nonfinite)) {
          winograd_direct_fallback<Transposed>(a, xg, wg, b, g, co0, t0, base);
        }
        __syncthreads();  // Ms aliases Us/Vs of the next tile
      }
    }
  }
}

template <bool Transposed>
void launch(WinoArgs a, cudaStream_t stream, const char* name, const LaunchShape& shape) {
  constexpr int bytes = kSmemFloats * static_cast<int>(sizeof(float));
  static const cudaError_t attr = cudaFuncSetAttribute(
      conv1d_winograd_f43_kernel<Transposed>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  check_cuda(attr, "cudaFuncSetAttribute(conv1d_winograd_f43, max dynamic shared memory)");
  a.co_tiles = (a.cout_g + kWCo - 1) / kWCo;
  a.t_tiles = (a.out_frames + kWFrames - 1) / kWFrames;
  const dim3 grid(grid_dim(a.t_tiles, kMaxGridX), grid_dim(a.co_tiles, kMaxGridYZ),
                  grid_dim(a.bg_count, kMaxGridYZ));
  conv1d_winograd_f43_kernel<Transposed><<<grid, kWThreads, bytes, stream>>>(a);
  check_launch(name, shape);
}

WinoArgs common_args(TensorView<const float> x, const float* w, const float* bias,
                     TensorView<float> y, std::int64_t batch, std::int64_t groups,
                     std::int64_t in_channels, std::int64_t out_channels) {
  WinoArgs a{};
  set_views(a, x, w, bias, y);
  a.groups = groups;
  a.bg_count = batch * groups;
  a.cin_g = static_cast<int>(in_channels / groups);
  a.cout_g = static_cast<int>(out_channels / groups);
  a.in_frames = x.frames();
  a.out_frames = y.frames();
  a.vec_store = (reinterpret_cast<std::uintptr_t>(y.data()) % 16 == 0) &&
                y.channel_stride() % 4 == 0 && y.batch_stride() % 4 == 0;
  return a;
}

}  // namespace

void launch_conv1d_winograd(const Conv1dParams& p, TensorView<const float> x, const float* w,
                            const float* bias, TensorView<float> y, cudaStream_t stream,
                            const char* name) {
  WinoArgs a = common_args(x, w, bias, y, p.batch, p.groups, p.in_channels, p.out_channels);
  a.in_offset = -p.pad_left;
  a.mode = to_pad_mode(p.padding_mode);
  launch<false>(a, stream, name, p);
}

void launch_conv_transpose1d_winograd(const ConvTranspose1dParams& p, TensorView<const float> x,
                                      const float* w, const float* bias, TensorView<float> y,
                                      cudaStream_t stream, const char* name) {
  WinoArgs a = common_args(x, w, bias, y, p.batch, p.groups, p.in_channels, p.out_channels);
  // y[t] = sum_k x[t + padding - k] w[k] = sum_k' x[t + (padding - 2) + k'] w[2 - k'].
  a.in_offset = p.padding - 2;
  a.mode = kPadZeros;
  launch<true>(a, stream, name, p);
}

}  // namespace convbank::detail::cuda
