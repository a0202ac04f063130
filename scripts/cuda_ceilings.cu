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

// The encoder kernel's store pattern without its arithmetic: a block of 8 warps writes 64 rows
// x 128 frames, each warp 8 rows, a lane frames lane + 32 j; blocks loop over frame tiles.
__global__ void enc_pattern(float* y, long pitch, long frames, long rows_per_b, long t_tiles) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long b = blockIdx.z, c0 = blockIdx.y * 64L + warp * 8;
  for (long tt = blockIdx.x; tt < t_tiles; tt += gridDim.x) {
    const long t0 = tt * 128;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      float* row = y + (b * rows_per_b + c0 + c) * pitch;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long t = t0 + lane + 32 * j;
        if (t < frames) row[t] = static_cast<float>(t);
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
    report(what, mb,
           time_ms([&] { enc_pattern<<<dim3(9, 8, 16), 256>>>(y, pitch, frames, 512, t_tiles); }));
  }
  report("write, 8 rows x 1024 frames per block, pitch 16383", mb, time_ms([&] {
           long_runs<<<8 * sms, 256>>>(y, frames, frames, rows, (frames + 1023) / 1024);
         }));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(out));
  return 0;
}
