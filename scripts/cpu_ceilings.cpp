// Memory ceilings of one CPU core for tcn_depthwise's tensors at batch 1 (512 rows x 16384
// floats, 33.5 MB in, 33.5 MB out): a plain copy, a copy with non-temporal stores, and the layer's
// own arithmetic (K 3, dilation 8, interior frames only) streamed from registers. A floor for
// docs/performance.md measured on the machine; needs AVX-512.
//
//   g++ -O3 -march=native scripts/cpu_ceilings.cpp -o /tmp/cpu_ceilings && /tmp/cpu_ceilings
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr long kRows = 512, kFrames = 16384, kFloats = kRows * kFrames;

template <class F>
double median_ms(F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    _mm_sfence();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  auto* x = static_cast<float*>(std::aligned_alloc(64, kFloats * sizeof(float)));
  auto* y = static_cast<float*>(std::aligned_alloc(64, kFloats * sizeof(float)));
  for (long i = 0; i < kFloats; ++i) x[i] = y[i] = static_cast<float>(i % 1000) * 1e-3f;
  const double mb = 2.0 * kFloats * sizeof(float) / 1e6;  // read + write
  auto report = [&](const char* what, double ms) {
    std::printf("| %-58s | %6.2f | %5.1f |\n", what, ms, mb / ms);
  };
  std::printf("| one core, %.1f MB read + written | ms | GB/s |\n|---|---:|---:|\n", mb);
  report("copy, ordinary stores", median_ms([&] {
           for (long i = 0; i < kFloats; i += 16) _mm512_store_ps(y + i, _mm512_load_ps(x + i));
         }));
  report("copy, non-temporal stores", median_ms([&] {
           for (long i = 0; i < kFloats; i += 16) _mm512_stream_ps(y + i, _mm512_load_ps(x + i));
         }));
  const __m512 w0 = _mm512_set1_ps(0.3f), w1 = _mm512_set1_ps(0.5f), w2 = _mm512_set1_ps(0.2f);
  report("K 3, dilation 8: taps in registers, non-temporal stores", median_ms([&] {
           for (long r = 0; r < kRows; ++r) {
             const float* xr = x + r * kFrames;
             float* yr = y + r * kFrames;
             for (long t = 16; t + 16 <= kFrames - 16; t += 16) {
               __m512 acc = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr + t - 8), _mm512_set1_ps(0.1f));
               acc = _mm512_fmadd_ps(w1, _mm512_load_ps(xr + t), acc);
               acc = _mm512_fmadd_ps(w2, _mm512_loadu_ps(xr + t + 8), acc);
               _mm512_stream_ps(yr + t, acc);
             }
           }
         }));
  std::printf("(checksum %g)\n", static_cast<double>(y[kFloats / 2]));
  std::free(x);
  std::free(y);
}
