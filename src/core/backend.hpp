// The private boundary between the public classes (src/core) and the backends (src/cpu,
// src/cuda). Core validates arguments and computes shapes once; a backend receives plain,
// already-checked parameters and dense-in-time views, and only computes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "convbank/conv.hpp"
#include "convbank/tensor.hpp"

namespace convbank::detail {

// Everything a backend needs for one Conv1d call, after "same"/"valid" are resolved.
struct Conv1dParams {
  std::int64_t batch = 0;
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t kernel_size = 0;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  std::int64_t pad_left = 0;
  std::int64_t pad_right = 0;
  PaddingMode padding_mode = PaddingMode::kZeros;
  std::int64_t in_frames = 0;
  std::int64_t out_frames = 0;
};

struct ConvTranspose1dParams {
  std::int64_t batch = 0;
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t kernel_size = 0;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  std::int64_t padding = 0;
  std::int64_t output_padding = 0;
  std::int64_t in_frames = 0;
  std::int64_t out_frames = 0;
};

// Weight and bias are dense host/device arrays in PyTorch's layout; bias may be null.
namespace cpu {
void conv1d(const Conv1dParams& p, TensorView<const float> input, const float* weight,
            const float* bias, TensorView<float> output);
void conv_transpose1d(const ConvTranspose1dParams& p, TensorView<const float> input,
                      const float* weight, const float* bias, TensorView<float> output);
void set_num_threads(int threads);
int num_threads();
const char* description();
}  // namespace cpu

// Implemented in src/cuda when the backend is built, by stubs that throw otherwise.
namespace cuda {
bool built();
bool available();
void* allocate(std::size_t bytes);
void deallocate(void* ptr) noexcept;
enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
// Copies `rows` rows of `row_bytes` bytes between pitched buffers (pitches in bytes).
void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
             std::size_t row_bytes, std::size_t rows, CopyKind kind);
// `weight` and `bias` are device pointers; work is queued on `stream` (a cudaStream_t).
void conv1d(const Conv1dParams& p, TensorView<const float> input, const float* weight,
            const float* bias, TensorView<float> output, void* stream);
void conv_transpose1d(const ConvTranspose1dParams& p, TensorView<const float> input,
                      const float* weight, const float* bias, TensorView<float> output,
                      void* stream);
// Waits for the work queued on `stream` (not the whole device).
void synchronize(void* stream);
const char* description();
}  // namespace cuda

}  // namespace convbank::detail
