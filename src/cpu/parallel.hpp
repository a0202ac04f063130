// Parallel loops for the CPU backend. OpenMP when the build has it, a plain loop otherwise;
// bodies must not throw (allocate before the loop, check arguments before the loop).
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(CONVBANK_HAVE_OPENMP)
#include <omp.h>
#endif

namespace convbank::detail::cpu {

int num_threads();

// Calls body(task, thread) for task in [0, tasks), thread in [0, threads_for(tasks)).
template <class Body>
void parallel_for(std::int64_t tasks, Body&& body) {
  const int threads = static_cast<int>(std::min<std::int64_t>(num_threads(), tasks));
#if defined(CONVBANK_HAVE_OPENMP)
  if (threads > 1) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (std::int64_t task = 0; task < tasks; ++task) body(task, omp_get_thread_num());
    return;
  }
#endif
  for (std::int64_t task = 0; task < tasks; ++task) body(task, 0);
}

inline int threads_for(std::int64_t tasks) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(num_threads(), tasks)));
}

}  // namespace convbank::detail::cpu
