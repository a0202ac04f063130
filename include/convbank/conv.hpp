// Conv1d and ConvTranspose1d with PyTorch's semantics, for every constructor argument.
//
//   convbank::Conv1d enc({.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8});
//   enc.set_weight(w);                       // (out, in / groups, K), as nn.Conv1d.weight
//   convbank::Tensor y = enc.forward(x);     // x (batch, 1, frames) -> y (batch, 512, frames')
//
// Weight layouts, output lengths, padding rules and error conditions are PyTorch's; the
// backend (CPU through Eigen, or CUDA) is chosen by where the tensors live.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "convbank/tensor.hpp"

namespace convbank {

enum class PaddingMode { kZeros, kReflect, kReplicate, kCircular };

std::string to_string(PaddingMode mode);
// "zeros" | "reflect" | "replicate" | "circular"; throws Error naming `what` otherwise.
PaddingMode parse_padding_mode(std::string_view text, std::string_view what = "padding_mode");

// Conv1d padding: a number of frames on each side, or PyTorch's "same" / "valid".
class Padding {
 public:
  enum class Kind { kExplicit, kSame, kValid };

  Padding(std::int64_t frames = 0) : frames_(frames) {}  // NOLINT(google-explicit-constructor)
  static Padding same() { return Padding(Kind::kSame); }
  static Padding valid() { return Padding(Kind::kValid); }
  // "same" | "valid" | a non-negative integer; throws Error naming `what` otherwise.
  static Padding parse(std::string_view text, std::string_view what = "padding");

  Kind kind() const { return kind_; }
  std::int64_t frames() const { return frames_; }  // meaningful for Kind::kExplicit
  std::string to_string() const;

 private:
  explicit Padding(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::kExplicit;
  std::int64_t frames_ = 0;
};

struct Conv1dOptions {
  std::int64_t in_channels = 1;
  std::int64_t out_channels = 1;
  std::int64_t kernel_size = 1;
  std::int64_t stride = 1;
  Padding padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
  PaddingMode padding_mode = PaddingMode::kZeros;
};

struct ConvTranspose1dOptions {
  std::int64_t in_channels = 1;
  std::int64_t out_channels = 1;
  std::int64_t kernel_size = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t output_padding = 0;
  std::int64_t groups = 1;
  bool bias = true;
  std::int64_t dilation = 1;
};

// nn.Conv1d. Immutable once its weights are set; forward() is const and thread-safe, so one
// layer can serve many threads and streams.
class Conv1d {
 public:
  // Validates the options (throws Error naming the argument, value and rule). Weights start at
  // zero; set them with set_weight / set_bias, e.g. from a PyTorch state_dict.
  explicit Conv1d(const Conv1dOptions& options);

  const Conv1dOptions& options() const { return options_; }

  // weight: (out_channels, in_channels / groups, kernel_size); bias: (out_channels) given as a
  // tensor of shape (1, 1, out_channels), (1, out_channels) or any shape with that many
  // elements in one row. Host or device tensors; copied.
  void set_weight(TensorView<const float> weight);
  void set_bias(TensorView<const float> bias);
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // empty when options().bias is false

  // Frames added before and after the input ("same" pads asymmetrically when the total is odd,
  // the extra frame on the right, as PyTorch does).
  std::int64_t padding_left() const { return pad_left_; }
  std::int64_t padding_right() const { return pad_right_; }

  // PyTorch's output length. Throws Error ("calculated output size is too small") when the
  // padded input is shorter than the dilated kernel, and for reflect padding >= input length.
  std::int64_t output_frames(std::int64_t input_frames) const;
  Shape output_shape(const Shape& input) const;

  // input (batch, in_channels, frames) or rank-2 (in_channels, frames). Returns a tensor on
  // the input's device with the input's rank.
  Tensor forward(const Tensor& input) const;
  // Writes into a caller-allocated output of exactly output_shape(input.shape()). Input and
  // output must not overlap and must live on the same device. For CUDA tensors the work is
  // queued on `cuda_stream` (a cudaStream_t; nullptr = the default stream) and this call
  // returns without waiting for it; the Tensor overload above waits for its own work.
  void forward(TensorView<const float> input, TensorView<float> output,
               void* cuda_stream = nullptr) const;

 private:
  struct DeviceCopy;  // the weights mirrored on the GPU by the first CUDA forward()
  std::shared_ptr<DeviceCopy> device_copy_;
  Conv1dOptions options_;
  std::int64_t pad_left_ = 0;
  std::int64_t pad_right_ = 0;
  Tensor weight_;
  Tensor bias_;
};

// nn.ConvTranspose1d. Same contract as Conv1d.
class ConvTranspose1d {
 public:
  explicit ConvTranspose1d(const ConvTranspose1dOptions& options);

  const ConvTranspose1dOptions& options() const { return options_; }

  // weight: (in_channels, out_channels / groups, kernel_size); bias: (out_channels).
  void set_weight(TensorView<const float> weight);
  void set_bias(TensorView<const float> bias);
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

  // (in - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1; throws Error
  // when that is < 1.
  std::int64_t output_frames(std::int64_t input_frames) const;
  Shape output_shape(const Shape& input) const;

  Tensor forward(const Tensor& input) const;
  void forward(TensorView<const float> input, TensorView<float> output,
               void* cuda_stream = nullptr) const;

 private:
  struct DeviceCopy;
  std::shared_ptr<DeviceCopy> device_copy_;
  ConvTranspose1dOptions options_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace convbank
