// Which CUDA kernel the dispatcher runs for a shape. Host-only and free of CUDA headers so the
// benchmark and the tests can report (and check) the choice.
#pragma once

#include "../core/backend.hpp"  // relative: the tests and the benchmark include this header too

namespace convbank::detail::cuda {

// The name of the kernel conv1d()/conv_transpose1d() launch for these parameters, e.g.
// "conv1d_winograd_f43_ffma", "conv1d_implicit_gemm_ffma_128x128",
// "conv_transpose1d_polyphase_gemm_ffma_64x128", "conv1d_direct_coalesced".
const char* conv1d_kernel_name(const Conv1dParams& p);
const char* conv_transpose1d_kernel_name(const ConvTranspose1dParams& p);

}  // namespace convbank::detail::cuda
