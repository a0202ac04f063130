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
// True where conv1d() runs the direct formula (depthwise layers, and stride-1 layers of few
// outputs per group where the build has AVX-512): its outputs do not depend on how a call is
// cut into pieces or stream chunks, bit for bit. Only channels, groups and stride matter.
bool conv1d_is_direct(const Conv1dParams& p);
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

// Streaming (src/cuda/stream.cu). A stream's process() records its work as a short list of
// StreamOps (copies, zero fills and convolutions on fixed device/pinned buffers) and hands it
// to its StreamContext, which owns one cudaStream_t, the pinned staging and a fixed-capacity
// cache of CUDA graphs keyed by the exact op list: an op list seen before is replayed, a new
// one is captured (while the cache has room) or enqueued directly. Build ops with make_op() so
// that the padding bytes compare equal.
struct StreamOp {
  enum class Kind : std::int32_t { kCopy2D, kZero2D, kConv1d, kConvTranspose1d };
  Kind kind;
  CopyKind copy;  // kCopy2D
  // kCopy2D / kZero2D: `rows` rows of `row_bytes` bytes (pitches in bytes).
  void* dst;
  std::size_t dst_pitch;
  const void* src;
  std::size_t src_pitch;
  std::size_t row_bytes;
  std::size_t rows;
  // kConv1d / kConvTranspose1d: device views (batch, channel strides in floats).
  Conv1dParams conv;
  ConvTranspose1dParams transpose;
  const float* in;
  std::int64_t in_batch_stride;
  std::int64_t in_channel_stride;
  float* out;
  std::int64_t out_batch_stride;
  std::int64_t out_channel_stride;
  const float* weight;
  const float* bias;
};
StreamOp make_op(StreamOp::Kind kind) noexcept;  // all bytes zero, then `kind`

struct StreamContext;
// Creates the CUDA stream, `in_floats` + `out_floats` floats of pinned host memory
// (cudaHostAlloc) and room for `graphs` graphs of up to `max_ops` ops. Throws Error.
StreamContext* stream_context_create(std::size_t in_floats, std::size_t out_floats,
                                     std::size_t graphs, std::size_t max_ops);
void stream_context_destroy(StreamContext* ctx) noexcept;
float* stream_context_pinned_in(StreamContext* ctx) noexcept;
float* stream_context_pinned_out(StreamContext* ctx) noexcept;
// Queues `ops` in order on the context's stream: replays the graph of an identical op list,
// else captures one when `use_graph` and the cache has room, else enqueues them directly. With
// `wait`, then waits for the context's stream (cudaStreamSynchronize, never the device).
// Returns false on any CUDA error. The replay path allocates nothing.
bool stream_context_run(StreamContext* ctx, const StreamOp* ops, std::size_t count, bool use_graph,
                        bool wait) noexcept;
std::size_t stream_context_graphs(const StreamContext* ctx) noexcept;
}  // namespace cuda

}  // namespace convbank::detail
