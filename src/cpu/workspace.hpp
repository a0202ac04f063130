// Single-threaded, allocation-free entries of the CPU backend, for the real-time path (streams).
// CUTLASS-style: ask for the workspace size once (in prepare), allocate it, then run any number
// of times with that buffer. The run functions never allocate, lock or throw: im2col columns
// and Eigen's GEMM packing blocks all live in the caller's workspace, and there is no OpenMP.
//
// Private to the library; tests may include it (through the src/ include path) for the Eigen
// no-malloc hook.
#pragma once

#include <cstdint>

#include "core/backend.hpp"

namespace convbank::detail::cpu {

// Floats of workspace (64-byte aligned) that conv1d_workspace needs for a layer of p's shape.
// Only the layer's shape matters (channels, kernel, stride, dilation, groups): any number of
// frames runs in that workspace. Only zero padding (p.padding_mode == kZeros).
std::int64_t conv1d_workspace_floats(const Conv1dParams& p);
// Same result as conv1d(p, ...) up to summation order (see docs/streaming.md); single thread.
void conv1d_workspace(const Conv1dParams& p, TensorView<const float> input, const float* weight,
                      const float* bias, TensorView<float> output, float* workspace) noexcept;

std::int64_t conv_transpose1d_workspace_floats(const ConvTranspose1dParams& p);
// p.padding may be any non-negative offset and p.out_frames any count: output frame t is the
// transposed convolution's frame t + padding, as in conv_transpose1d.
void conv_transpose1d_workspace(const ConvTranspose1dParams& p, TensorView<const float> input,
                                const float* weight, const float* bias, TensorView<float> output,
                                float* workspace) noexcept;

// Eigen's run-time no-malloc mode (EIGEN_RUNTIME_NO_MALLOC). While malloc is disallowed, any
// heap allocation Eigen attempts inside the CPU backend is counted (also in Release builds,
// where eigen_assert would otherwise be compiled out). Not thread-safe: for tests.
void set_eigen_malloc_allowed(bool allowed);
std::int64_t eigen_malloc_violations();
// One heap allocation by Eigen inside the backend: shows that the hook above counts.
void eigen_heap_probe();

}  // namespace convbank::detail::cpu
