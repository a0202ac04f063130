// Streaming: Conv1d / ConvTranspose1d (and chains of them) chunk by chunk, with the overlap
// between chunks carried in state, so that the concatenation of everything process() and
// flush() return equals the offline forward() of the whole signal.
//
//   auto enc = std::make_shared<convbank::Conv1d>(convbank::Conv1dOptions{
//       .in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8});
//   auto dec = std::make_shared<convbank::ConvTranspose1d>(convbank::ConvTranspose1dOptions{
//       .in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8});
//   // ... set weights ...
//   convbank::StreamChain chain;
//   chain.add(enc).add(dec);
//   chain.prepare(/*max_frames=*/256);                      // allocates; may throw Error
//   convbank::Tensor out(convbank::Shape{1, 1, chain.max_output_frames(256)});
//   std::int64_t n = 0;
//   // audio callback: noexcept, no allocation, no lock
//   if (chain.process(in_view, out.view(), &n) != convbank::Status::kOk) { /* bad call */ }
//   // end of stream:
//   chain.flush(tail_view, &n);                             // tail_view >= max_flush_frames()
//
// Ownership: a stream holds its layer by std::shared_ptr<const Layer>. One immutable layer
// (the weights) drives any number of streams (one per voice, per thread, per connection); the
// shared pointer keeps the weights alive as long as any stream uses them, so a stream can never
// dangle when the model is reloaded elsewhere. Do not call set_weight/set_bias on a layer while
// streams of it run (replace the layer and build new streams instead).
//
// Latency (precise definition; docs/streaming.md has the derivation). Frames are counted from
// 0 on the stream's input since the last reset(), and "input frame j is delivered" means the
// process() call whose chunk contains frame j:
//   Conv1dStream: output frame t is emitted by the call that delivers input frame
//     t * stride + latency_frames() (by the first call when that index is negative), never
//     earlier, where latency_frames() = dilation * (kernel_size - 1) - padding_left.
//   ConvTranspose1dStream: output frame t is emitted by the call that delivers input frame
//     floor((t + padding) / stride) + j with 0 <= j <= latency_frames(); that first term is the
//     last input that contributes to t. j > 0 only when padding is so large that a frame may
//     still be cut off by the right-hand trim: latency_frames() =
//     max(0, ceil((stride - 1 + padding - dilation * (kernel_size - 1) - output_padding) /
//     stride)).
//   StreamChain: the sum of the stages' latencies, each converted to chain-input frames
//     (multiplied by the product of the strides of the Conv1d stages before it and divided by
//     those of the ConvTranspose1d stages, rounded up).
//
// Padding modes: zeros, reflect and replicate stream (reflect and replicate: the left padding is
// filled when the frames it copies have arrived, the right padding at flush from the last
// frames, which the stream keeps; on CUDA in a Conv1dStream of its own, not in a StreamChain).
// Circular padding fills the start from the far end of the whole signal, so the constructor throws
// Error. With reflect padding an output also waits for input frame padding_left: latency_frames() =
// max(dilation * (kernel_size - 1) - padding_left, padding_left), and a stream no longer than its
// padding (PyTorch rejects such an input) gets kInvalidArgument from flush().
//
// Devices: prepare(..., Device::kCuda) runs the stream on the GPU while process()/flush()
// still take and return host buffers: prepare allocates the device history and output buffers,
// pinned staging, one cudaStream_t owned by the stream, and a device copy of the weights (taken
// at prepare: prepare again after set_weight). Each process() packs the chunk into pinned
// memory, replays a CUDA graph (copy in, kernels, copy out) and waits for its own stream only.
// A graph is captured the first time an op list is seen (a chunk length in a given stride
// phase; the first chunk of each new length pays the capture) and cached, up to 64 per stream;
// later new lists run uncaptured. warm_up() captures a list of lengths ahead of time. CUDA
// errors make process() return Status::kBackendFailure. Driver calls may block: run a CUDA
// stream on a worker thread, not in the audio callback (docs/streaming.md).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/tensor.hpp"

namespace convbank {

// A stream of one Conv1d. Carries the last (kernel span - 1) input frames, or the number of
// input frames still to skip when stride exceeds the kernel span (the stride phase).
class Conv1dStream {
 public:
  // Throws Error for circular padding, or a null layer.
  explicit Conv1dStream(std::shared_ptr<const Conv1d> layer);
  ~Conv1dStream();
  Conv1dStream(Conv1dStream&&) noexcept;
  Conv1dStream& operator=(Conv1dStream&&) noexcept;

  // Allocates the state and workspace for chunks of 1..max_frames frames of `batch`
  // independent streams, and resets. Throws Error on bad arguments and for Device::kCuda
  // without a CUDA device.
  void prepare(std::int64_t max_frames, std::int64_t batch = 1, Device device = Device::kCpu);
  bool prepared() const noexcept;
  std::int64_t max_frames() const noexcept;
  std::int64_t batch() const noexcept;
  std::int64_t in_channels() const noexcept;
  std::int64_t out_channels() const noexcept;
  const Conv1d& layer() const noexcept;

  // Output frames the next process() of `input_frames` frames will produce (exact), and an
  // upper bound valid for any call of that many frames in any state (size `out` with it).
  std::int64_t next_output_frames(std::int64_t input_frames) const noexcept;
  std::int64_t max_output_frames(std::int64_t input_frames) const noexcept;
  // Upper bound on what flush() emits.
  std::int64_t max_flush_frames() const noexcept;
  std::int64_t latency_frames() const noexcept;

  // in: (batch, in_channels, n) with 1 <= n <= max_frames; out: (batch, out_channels, m) with
  // m >= next_output_frames(n) (max_output_frames(n) always suffices). Writes the produced
  // frames to out[..., 0:*frames_out]. On kInvalidArgument (not prepared, flushed, wrong
  // shape/device, n out of range, out too short) nothing changes and *frames_out = 0.
  Status process(TensorView<const float> in, TensorView<float> out,
                 std::int64_t* frames_out) noexcept;
  // End of stream: applies the right padding and emits the remaining frames (out frames >=
  // max_flush_frames()). Afterwards process()/flush() return kInvalidArgument until reset().
  Status flush(TensorView<float> out, std::int64_t* frames_out) noexcept;
  // Back to the start of a stream (left padding applies again) for every batch element.
  void reset() noexcept;
  // Element `batch_index` forgets its past: it continues as if every frame it had received
  // were zeros. The frame clock is shared by the batch, so all elements keep producing the
  // same number of frames per call. kInvalidArgument when batch_index is out of range.
  Status reset(std::int64_t batch_index) noexcept;
  // CUDA only: streams zeros in chunks of each length (a few calls each, to reach the steady
  // stride phases), so that their graphs are captured now instead of on first use; then
  // reset(). Allocates (not real-time). No effect on the CPU.
  void warm_up(const std::vector<std::int64_t>& lengths);
  // CUDA graphs captured so far (0 unless prepared for Device::kCuda).
  std::size_t cuda_graphs() const noexcept;

 private:
  friend class StreamChain;
  struct State;
  std::unique_ptr<State> s_;
};

// A stream of one ConvTranspose1d. Carries the last inputs that still reach unfinished output
// frames (about (dilation * (kernel_size - 1) + padding) / stride of them) and recomputes only
// the output frames that become final, so every frame is computed exactly once, by the same
// formula as offline. Drops the first `padding` frames of the whole stream; flush() emits the
// rest up to the offline length, output_padding included.
class ConvTranspose1dStream {
 public:
  explicit ConvTranspose1dStream(std::shared_ptr<const ConvTranspose1d> layer);
  ~ConvTranspose1dStream();
  ConvTranspose1dStream(ConvTranspose1dStream&&) noexcept;
  ConvTranspose1dStream& operator=(ConvTranspose1dStream&&) noexcept;

  void prepare(std::int64_t max_frames, std::int64_t batch = 1, Device device = Device::kCpu);
  bool prepared() const noexcept;
  std::int64_t max_frames() const noexcept;
  std::int64_t batch() const noexcept;
  std::int64_t in_channels() const noexcept;
  std::int64_t out_channels() const noexcept;
  const ConvTranspose1d& layer() const noexcept;

  std::int64_t next_output_frames(std::int64_t input_frames) const noexcept;
  std::int64_t max_output_frames(std::int64_t input_frames) const noexcept;
  std::int64_t max_flush_frames() const noexcept;
  std::int64_t latency_frames() const noexcept;

  Status process(TensorView<const float> in, TensorView<float> out,
                 std::int64_t* frames_out) noexcept;
  Status flush(TensorView<float> out, std::int64_t* frames_out) noexcept;
  void reset() noexcept;
  Status reset(std::int64_t batch_index) noexcept;
  // CUDA only: streams zeros in chunks of each length (a few calls each, to reach the steady
  // stride phases), so that their graphs are captured now instead of on first use; then
  // reset(). Allocates (not real-time). No effect on the CPU.
  void warm_up(const std::vector<std::int64_t>& lengths);
  // CUDA graphs captured so far (0 unless prepared for Device::kCuda).
  std::size_t cuda_graphs() const noexcept;

 private:
  friend class StreamChain;
  struct State;
  std::unique_ptr<State> s_;
};

// Conv1d / ConvTranspose1d stages run in order; each stage's output feeds the next through
// buffers allocated in prepare(). Same contract as the single-layer streams.
class StreamChain {
 public:
  StreamChain();
  ~StreamChain();
  StreamChain(StreamChain&&) noexcept;
  StreamChain& operator=(StreamChain&&) noexcept;

  // Appends a stage. Throws Error when its in_channels differ from the previous stage's
  // out_channels, or for a padding mode the streams reject. Invalidates prepare().
  StreamChain& add(std::shared_ptr<const Conv1d> layer);
  StreamChain& add(std::shared_ptr<const ConvTranspose1d> layer);
  std::size_t size() const noexcept;

  void prepare(std::int64_t max_frames, std::int64_t batch = 1, Device device = Device::kCpu);
  bool prepared() const noexcept;
  std::int64_t in_channels() const noexcept;
  std::int64_t out_channels() const noexcept;

  std::int64_t next_output_frames(std::int64_t input_frames) const noexcept;
  std::int64_t max_output_frames(std::int64_t input_frames) const noexcept;
  std::int64_t max_flush_frames() const noexcept;
  std::int64_t latency_frames() const noexcept;

  Status process(TensorView<const float> in, TensorView<float> out,
                 std::int64_t* frames_out) noexcept;
  Status flush(TensorView<float> out, std::int64_t* frames_out) noexcept;
  void reset() noexcept;
  // Zeroes element `batch_index`'s carried frames in every stage: "as if it had received
  // zeros" exactly when no stage before the last has a bias (docs/streaming.md).
  Status reset(std::int64_t batch_index) noexcept;
  // CUDA only: streams zeros in chunks of each length (a few calls each, to reach the steady
  // stride phases), so that their graphs are captured now instead of on first use; then
  // reset(). Allocates (not real-time). No effect on the CPU.
  void warm_up(const std::vector<std::int64_t>& lengths);
  // CUDA graphs captured so far (0 unless prepared for Device::kCuda).
  std::size_t cuda_graphs() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace convbank
