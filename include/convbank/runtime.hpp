// Process-wide execution settings and build information.
#pragma once

#include <cstdint>
#include <string>

namespace convbank {

// Threads the CPU backend uses for one forward() call. 0 (the default) means one per hardware
// thread. Streams always run on the calling thread.
void set_num_threads(int threads);
int num_threads();

// Offline forward() on inputs longer than this many frames per channel (or, for
// ConvTranspose1d, producing more) runs internally in pieces of output frames, each reading
// only the input it needs plus the kernel's overlap, so per-call buffers and padded copies stay
// bounded however long the signal is. The output is identical to whole-buffer processing (bit
// for bit on the CPU: pieces are whole multiples of the backend's blocks). 0 restores the
// default, 2^22 frames (87 s at 48 kHz). Throws Error for negative values. Process-wide.
void set_working_set_frames(std::int64_t frames);
std::int64_t working_set_frames();

// True when this build contains the CUDA backend (CONVBANK_ENABLE_CUDA).
bool cuda_built();
// True when the CUDA backend is built and a CUDA device can be used now.
bool cuda_available();

// "convbank 0.1.0 (cpu: Eigen 3.4.0, OpenMP; cuda: off)".
std::string build_info();

}  // namespace convbank
