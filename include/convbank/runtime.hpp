// Process-wide execution settings and build information.
#pragma once

#include <string>

namespace convbank {

// Threads the CPU backend uses for one forward() call. 0 (the default) means one per hardware
// thread. Streams always run on the calling thread.
void set_num_threads(int threads);
int num_threads();

// True when this build contains the CUDA backend (CONVBANK_ENABLE_CUDA).
bool cuda_built();
// True when the CUDA backend is built and a CUDA device can be used now.
bool cuda_available();

// "convbank 0.1.0 (cpu: Eigen 3.4.0, OpenMP; cuda: off)".
std::string build_info();

}  // namespace convbank
