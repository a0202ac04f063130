// The machine's own latency tail, for reading docs/performance.md's CPU streaming tables: times
// many back-to-back repetitions of a fixed AVX2 multiply-add loop on data in L1 (no memory
// traffic, no allocation, no system call), sized to take about as long as one chunk of the
// TasNet chain (14 us at 256 frames, batch 1), and prints p50, p99, max and how often a
// repetition took more than 3x the median. Whatever stretches these repetitions (interrupts,
// the hypervisor) stretches the stream's chunks the same way.
//
//   g++ -O2 -march=native scripts/cpu_jitter.cpp -o /tmp/cpu_jitter && taskset -c 1 /tmp/cpu_jitter
//   [REPS]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 80;  // inner repetitions: ~0.18 us each here
  constexpr int kCount = 20000;
  alignas(64) static float buf[4096];
  for (int i = 0; i < 4096; ++i) buf[i] = 1e-3f * static_cast<float>(i);
  __m256 acc = _mm256_setzero_ps();
  const __m256 w = _mm256_set1_ps(0.999f);
  std::vector<double> us(kCount);
  for (int i = 0; i < kCount; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      for (int k = 0; k < 4096; k += 8) acc = _mm256_fmadd_ps(_mm256_load_ps(buf + k), w, acc);
    }
    const auto t1 = std::chrono::steady_clock::now();
    us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  float sink[8];
  _mm256_storeu_ps(sink, acc);
  std::vector<double> s = us;
  std::sort(s.begin(), s.end());
  const double p50 = s[kCount / 2];
  int slow = 0;
  for (double v : us) slow += v > 3 * p50;
  std::printf(
      "%d repetitions: p50 %.1f us, p99 %.1f us, max %.1f us; %d above 3x p50 (%.2f per ms)%s\n",
      kCount, p50, s[kCount * 99 / 100], s.back(), slow, slow / (p50 * kCount / 1000.0),
      sink[0] == 0.5f ? "" : "");
  return 0;
}
