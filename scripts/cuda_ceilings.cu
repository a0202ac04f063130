// Memory ceilings of the GPU for the shapes of the memory-bound workloads: how fast can the
// output of enc_tasnet (16 x 512 x 16383 floats, 537 MB) be written, the input of dec_tasnet
// (the same size) be read, and tcn_depthwise's tensors (16 x 512 x 16384) be copied, by plain
// kernels that do no arithmetic, in the store patterns our kernels use and in plain streams.
// A floor for docs/performance.md measured on the machine, not taken from the datasheet.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/cuda_ceilings.cu -o /tmp/ceilings && /tmp/ceilings
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

__global__ void write4(float4* y, long n4, float v) {
  for (long i = blockIdx.x * long{blockDim.x} + threadIdx.x; i < n4;
       i += long{gridDim.x} * blockDim.x)
    y[i] = make_float4(v, v, v, v);
}

__global__ void read4(const float4* x, long n4, float* out) {
  float s = 0.0f;
  for (long i = blockIdx.x * long{blockDim.x} + threadIdx.x; i < n4;
       i += long{gridDim.x} * blockDim.x) {
    const float4 f = __ldg(x + i);
    s += f.x + f.y + f.z + f.w;
  }
  if (s == 123.0f) *out = s;  // keeps the loads alive; never true on the zero-filled input
}

__global__ void copy4(const float4* x, float4* y, long n4) {
  for (long i = blockIdx.x * long{blockDim.x} + threadIdx.x; i < n4;
       i += long{gridDim.x} * blockDim.x)
    y[i] = __ldg(x + i);
}

// One warp's share of the encoder kernel's stores: 8 rows (row0 ..) x 128 frames from t0, lane
// frames lane + 32 j, each row's tile moved left by the floats its start sits past a 128-byte
// line where `lined` (then no line is shared by two tiles).
__device__ void warp_rows8(float* y, long pitch, long frames, long row0, long t0, bool lined) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    float* row = y + (row0 + c) * pitch;
    const long m = lined ? static_cast<long>((reinterpret_cast<unsigned long>(row) >> 2) & 31) : 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const long t = t0 - m + lane + 32 * j;
      if (t >= 0 && t < frames) row[t] = static_cast<float>(t);
    }
  }
}

// The encoder kernel's store pattern without its arithmetic: a block of 8 warps writes 64 rows
// x 128 frames, each warp 8 rows; blocks loop over frame tiles. lined: each row's tiles moved
// to its 128-byte lines (one more tile per row).
__global__ void enc_pattern(float* y, long pitch, long frames, long rows_per_b, long t_tiles,
                            bool lined) {
  const long b = blockIdx.z, c0 = blockIdx.y * 64L + (threadIdx.x >> 5) * 8;
  for (long tt = blockIdx.x; tt < t_tiles + (lined ? 1 : 0); tt += gridDim.x) {
    warp_rows8(y, pitch, frames, b * rows_per_b + c0, tt * 128, lined);
  }
}

// The encoder's per-warp work with the block's 8 warps side by side along time (8 rows x 1024
// frames per block).
__global__ void enc_wide(float* y, long pitch, long frames, long rows_per_b, long t_tiles) {
  const long b = blockIdx.z, c0 = blockIdx.y * 8L;
  for (long tt = blockIdx.x; tt < t_tiles; tt += gridDim.x) {
    warp_rows8(y, pitch, frames, b * rows_per_b + c0, tt * 1024 + (threadIdx.x >> 5) * 128, false);
  }
}

// A block keeps one 512-frame window and loops over the channels, 16 at a time: warp w writes
// 8 rows (w / 4) x 128 frames (w % 4), the encoder's per-warp work.
__global__ void enc_cloop(float* y, long pitch, long frames, long rows_per_b) {
  const int warp = threadIdx.x >> 5;
  const long b = blockIdx.z, t0 = blockIdx.x * 512L + (warp & 3) * 128;
  for (long c0 = (warp >> 2) * 8; c0 < rows_per_b; c0 += 16) {
    warp_rows8(y, pitch, frames, b * rows_per_b + c0, t0, false);
  }
}

// The tensor-core kernel's epilogue pattern (seedA's output: 32 x 128 rows): one block per
// multiprocessor, two warpgroups of 64 rows, per row 4 lanes x 16 pairs of frames stored as
// float2 (frame 8 i + 2 q + p). Tiles of 128 frames in round-robin order across blocks
// (contiguous = 0, the kernel's order) or a contiguous run of tiles per block (1); shifted: each
// row's tile moved left by the floats its start sits past a 128-byte line (1), or its stores
// rotated to whole 32-byte sectors inside the tile (2, the kernel's sector epilogue).
__global__ void ss_pattern(float* y, long pitch, long frames, long rows, int contiguous,
                           int shifted) {
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid & 127) >> 5, lane = tid & 31;
  const int q = lane & 3, r_in = wg * 64 + warp * 16 + (lane >> 2);
  const long t_tiles = (frames + 127) / 128 + (shifted == 1);
  const long items = rows / 128 * t_tiles;
  const long per = (items + gridDim.x - 1) / gridDim.x;
  for (long k = 0;; ++k) {
    const long item = contiguous ? blockIdx.x * per + k : blockIdx.x + k * gridDim.x;
    if (item >= items || (contiguous && k >= per)) break;
    const long rb = item / t_tiles, t0 = (item % t_tiles) * 128;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* row = y + (rb * 128 + r_in + 8 * h) * pitch;
      if (shifted == 2) {
        // Whole 32-byte sectors inside the tile, the two partial ones at its edges.
        const long e = static_cast<long>((reinterpret_cast<unsigned long>(row) >> 2) & 7);
        const long a = (8 - e) & 7;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const long f = t0 + a + 8 * i + 2 * q;
          if ((i < 15 || a == 0) && f + 1 < frames)
            *reinterpret_cast<float2*>(row + f) = make_float2(1.0f, 2.0f);
        }
        const long f = t0 + (2 * q < a ? 2 * q : 120 + 2 * q);
        if (a != 0 && f + 1 < frames) *reinterpret_cast<float2*>(row + f) = make_float2(1.0f, 2.0f);
        continue;
      }
      const long m =
          shifted ? static_cast<long>((reinterpret_cast<unsigned long>(row) >> 2) & 31) : 0;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const long f = t0 - m + 8 * i + 2 * q;
        if (f >= 0 && f + 1 < frames) *reinterpret_cast<float2*>(row + f) = make_float2(1.0f, 2.0f);
      }
    }
  }
}

// Same rows, a block writing 8 rows x 1024 frames (one row per warp, runs of 4 KB).
__global__ void long_runs(float* y, long pitch, long frames, long rows, long t_tiles) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long item = blockIdx.x; item < rows / 8 * t_tiles; item += gridDim.x) {
    const long r = item / t_tiles * 8 + warp, t0 = (item % t_tiles) * 1024;
    float* row = y + r * pitch;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const long t = t0 + lane + 32 * j;
      if (t < frames) row[t] = static_cast<float>(t);
    }
  }
}

float time_ms(const std::function<void()>& f) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(e0));
    f();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float m = 0;
    CHECK(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long rows = 16L * 512, frames = 16383, n = rows * frames, n4 = n / 4;
  const double mb = n * 4.0 / 1e6;
  float *x = nullptr, *y = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&x, n * 4 + 64));
  CHECK(cudaMalloc(&y, (rows * 16384) * 4 + 64));
  CHECK(cudaMalloc(&out, 4));
  CHECK(cudaMemset(x, 0, n * 4));
  auto report = [&](const char* what, double bytes_mb, float ms) {
    std::printf("| %-52s | %8.3f | %7.2f |\n", what, ms, bytes_mb / 1e3 / ms);
  };
  std::printf("| pattern (%.0f MB per tensor) | ms | TB/s |\n|---|---:|---:|\n", mb);
  report("cudaMemsetAsync (write)", mb, time_ms([&] { CHECK(cudaMemsetAsync(y, 0, n * 4)); }));
  for (int per_sm : {4, 8, 32}) {
    char what[96];
    std::snprintf(what, sizeof what, "write, float4 grid-stride, %d blocks x 256 / SM", per_sm);
    report(what, mb,
           time_ms([&] { write4<<<per_sm * sms, 256>>>(reinterpret_cast<float4*>(y), n4, 1.0f); }));
    std::snprintf(what, sizeof what, "read, float4 grid-stride, %d blocks x 256 / SM", per_sm);
    report(what, mb, time_ms([&] {
             read4<<<per_sm * sms, 256>>>(reinterpret_cast<const float4*>(x), n4, out);
           }));
    std::snprintf(what, sizeof what, "copy, float4 grid-stride, %d blocks x 256 / SM", per_sm);
    report(what, 2 * mb, time_ms([&] {
             copy4<<<per_sm * sms, 256>>>(reinterpret_cast<const float4*>(x),
                                          reinterpret_cast<float4*>(y), n4);
           }));
  }
  const long t_tiles = (frames + 127) / 128;
  for (long pitch : {frames, 16384L}) {
    char what[96];
    std::snprintf(what, sizeof what, "write, encoder pattern (64 rows x 128), pitch %ld", pitch);
    report(what, mb, time_ms([&] {
             enc_pattern<<<dim3(9, 8, 16), 256>>>(y, pitch, frames, 512, t_tiles, false);
           }));
  }
  report("write, encoder pattern, tiles line-aligned per row, pitch 16383", mb, time_ms([&] {
           enc_pattern<<<dim3(9, 8, 16), 256>>>(y, frames, frames, 512, t_tiles, true);
         }));
  report("write, encoder warps along time (8 rows x 1024), pitch 16383", mb, time_ms([&] {
           enc_wide<<<dim3(2, 64, 16), 256>>>(y, frames, frames, 512, (frames + 1023) / 1024);
         }));
  report("write, 512-frame blocks looping over channels, pitch 16383", mb, time_ms([&] {
           enc_cloop<<<dim3((frames + 511) / 512, 1, 16), 256>>>(y, frames, frames, 512);
         }));
  report("write, 8 rows x 1024 frames per block, pitch 16383", mb, time_ms([&] {
           long_runs<<<8 * sms, 256>>>(y, frames, frames, rows, (frames + 1023) / 1024);
         }));
  {
    // seedA's output (32 x 128 rows of 131070 frames, 2.1 GB) and the same rows with 131072.
    const long ss_rows = 32L * 128;
    float* z = nullptr;
    CHECK(cudaMalloc(&z, ss_rows * 131072L * 4 + 256));
    for (long fr : {131070L, 131072L}) {
      const double zmb = ss_rows * fr * 4.0 / 1e6;
      for (int contiguous : {0, 1}) {
        for (int shifted : {0, 1, 2}) {
          if (contiguous && shifted == 2) continue;
          char what[120];
          std::snprintf(what, sizeof what, "write, SS epilogue, rows of %ld, %s, %s", fr,
                        contiguous ? "contiguous tiles" : "round-robin tiles",
                        shifted == 2 ? "whole sectors inside tiles"
                                     : (shifted ? "line-aligned" : "as computed"));
          report(what, zmb, time_ms([&] {
                   ss_pattern<<<sms, 256>>>(z, fr, fr, ss_rows, contiguous, shifted);
                 }));
        }
      }
    }
    CHECK(cudaFree(z));
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(out));
  return 0;
}
