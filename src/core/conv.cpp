// Conv1d / ConvTranspose1d: argument validation with PyTorch's rules and messages, output
// lengths, and dispatch to the backend that owns the tensors' memory.
#include "convbank/conv.hpp"

#include <mutex>
#include <string>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

[[noreturn]] void fail(const char* layer, const std::string& message) {
  throw Error(std::string(layer) + ": " + message);
}

void require_at_least(const char* layer, const char* name, std::int64_t value,
                      std::int64_t minimum) {
  if (value < minimum) {
    fail(layer, std::string(name) + " must be >= " + str(minimum) + ", got " + str(value));
  }
}

void check_groups(const char* layer, std::int64_t in_channels, std::int64_t out_channels,
                  std::int64_t groups) {
  require_at_least(layer, "in_channels", in_channels, 1);
  require_at_least(layer, "out_channels", out_channels, 1);
  if (groups < 1) fail(layer, "groups must be a positive integer, got " + str(groups));
  if (in_channels % groups != 0) {
    fail(layer, "in_channels must be divisible by groups, got in_channels " + str(in_channels) +
                    " and groups " + str(groups));
  }
  if (out_channels % groups != 0) {
    fail(layer, "out_channels must be divisible by groups, got out_channels " + str(out_channels) +
                    " and groups " + str(groups));
  }
}

// Copies `src` into a dense host or device tensor of `expected` shape, or throws naming both.
Tensor load_parameter(const char* layer, const char* name, TensorView<const float> src,
                      const Shape& expected, const std::string& expected_text) {
  if (src.shape() != expected &&
      !(std::string(name) == "bias" && src.shape().numel() == expected.numel() &&
        src.shape().frames == expected.frames)) {
    fail(layer, std::string(name) + " shape mismatch: expected " + expected_text + ", got " +
                    to_string(src.shape()));
  }
  Tensor t(expected, Device::kCpu);
  copy(TensorView<const float>(src.data(), expected, src.batch_stride(), src.channel_stride(),
                               src.device()),
       t.view());
  return t;
}

std::string weight_text(std::int64_t a, std::int64_t b, std::int64_t k) {
  return "(" + str(a) + ", " + str(b) + ", " + str(k) + ")";
}

void check_io(const char* layer, TensorView<const float> input, TensorView<float> output,
              const Shape& expected_out) {
  if (output.shape() != expected_out) {
    fail(layer, "output shape " + to_string(output.shape()) + " differs from the expected " +
                    to_string(expected_out) + " for input " + to_string(input.shape()));
  }
  if (input.device() != output.device()) {
    fail(layer, "input is on " + to_string(input.device()) + " but output is on " +
                    to_string(output.device()));
  }
}

Tensor make_output(const Tensor& input, const Shape& shape) {
  Tensor out(shape, input.device());
  if (input.rank() == 2) out.set_rank(2);
  return out;
}

}  // namespace

// Weights are set on the host; the first CUDA forward() mirrors them on the device. call_once
// keeps a layer shared by several threads uploading exactly once; set_weight/set_bias start a
// fresh copy so a stale mirror is never used.
struct DeviceWeights {
  std::once_flag once;
  Tensor weight;
  Tensor bias;

  void upload(const Tensor& host_weight, const Tensor& host_bias) {
    std::call_once(once, [&] {
      weight = host_weight.to(Device::kCuda);
      if (!host_bias.empty()) bias = host_bias.to(Device::kCuda);
    });
  }
};
struct Conv1d::DeviceCopy : DeviceWeights {};
struct ConvTranspose1d::DeviceCopy : DeviceWeights {};

std::string to_string(PaddingMode mode) {
  switch (mode) {
    case PaddingMode::kZeros:
      return "zeros";
    case PaddingMode::kReflect:
      return "reflect";
    case PaddingMode::kReplicate:
      return "replicate";
    case PaddingMode::kCircular:
      return "circular";
  }
  return "?";
}

PaddingMode parse_padding_mode(std::string_view text, std::string_view what) {
  for (PaddingMode m : {PaddingMode::kZeros, PaddingMode::kReflect, PaddingMode::kReplicate,
                        PaddingMode::kCircular}) {
    if (text == to_string(m)) return m;
  }
  throw Error(std::string(what) + " must be one of zeros, reflect, replicate, circular, but got '" +
              std::string(text) + "'");
}

Padding Padding::parse(std::string_view text, std::string_view what) {
  if (text == "same") return same();
  if (text == "valid") return valid();
  // At most 18 digits, so the value cannot overflow int64 while it is accumulated.
  std::int64_t value = 0;
  bool digits = !text.empty() && text.size() <= 18;
  for (std::size_t i = 0; digits && i < text.size(); ++i) {
    const char ch = text[i];
    digits = ch >= '0' && ch <= '9';
    value = digits ? value * 10 + (ch - '0') : value;
  }
  if (!digits) {
    throw Error(std::string(what) + " must be a non-negative integer, 'same' or 'valid', got '" +
                std::string(text) + "'");
  }
  return Padding(value);
}

std::string Padding::to_string() const {
  switch (kind_) {
    case Kind::kSame:
      return "same";
    case Kind::kValid:
      return "valid";
    case Kind::kExplicit:
      break;
  }
  return std::to_string(frames_);
}

// ---------------------------------------------------------------------------------------------
// Conv1d

Conv1d::Conv1d(const Conv1dOptions& options)
    : device_copy_(std::make_shared<DeviceCopy>()), options_(options) {
  const char* L = "Conv1d";
  check_groups(L, options.in_channels, options.out_channels, options.groups);
  require_at_least(L, "kernel_size", options.kernel_size, 1);
  require_at_least(L, "stride", options.stride, 1);
  require_at_least(L, "dilation", options.dilation, 1);
  switch (options.padding.kind()) {
    case Padding::Kind::kExplicit:
      require_at_least(L, "padding", options.padding.frames(), 0);
      pad_left_ = pad_right_ = options.padding.frames();
      break;
    case Padding::Kind::kValid:
      break;
    case Padding::Kind::kSame: {
      if (options.stride != 1) {
        fail(L, "padding='same' is not supported for strided convolutions (stride " +
                    str(options.stride) + "); use stride 1 or an explicit padding");
      }
      // PyTorch puts the odd frame of the total on the right.
      const std::int64_t total = options.dilation * (options.kernel_size - 1);
      pad_left_ = total / 2;
      pad_right_ = total - pad_left_;
      break;
    }
  }
  weight_ = Tensor::zeros(
      Shape{options.out_channels, options.in_channels / options.groups, options.kernel_size});
  if (options.bias) bias_ = Tensor::zeros(Shape{1, 1, options.out_channels});
}

void Conv1d::set_weight(TensorView<const float> weight) {
  device_copy_ = std::make_shared<DeviceCopy>();
  const Shape expected{options_.out_channels, options_.in_channels / options_.groups,
                       options_.kernel_size};
  weight_ = load_parameter("Conv1d", "weight", weight, expected,
                           weight_text(expected.batch, expected.channels, expected.frames) +
                               " = (out_channels, in_channels / groups, kernel_size)");
}

void Conv1d::set_bias(TensorView<const float> bias) {
  device_copy_ = std::make_shared<DeviceCopy>();
  if (!options_.bias) fail("Conv1d", "set_bias called on a layer built with bias = false");
  bias_ = load_parameter("Conv1d", "bias", bias, Shape{1, 1, options_.out_channels},
                         "(" + str(options_.out_channels) + ") = (out_channels)");
}

std::int64_t Conv1d::output_frames(std::int64_t input_frames) const {
  const char* L = "Conv1d";
  // PyTorch: "Only zero batch or zero channel inputs are supported".
  require_at_least(L, "input frames", input_frames, 1);
  if (options_.padding_mode == PaddingMode::kReflect &&
      (pad_left_ >= input_frames || pad_right_ >= input_frames) &&
      (pad_left_ > 0 || pad_right_ > 0)) {
    fail(L, "reflect padding (left " + str(pad_left_) + ", right " + str(pad_right_) +
                ") must be smaller than the input length " + str(input_frames));
  }
  if (options_.padding_mode == PaddingMode::kCircular &&
      (pad_left_ > input_frames || pad_right_ > input_frames)) {
    fail(L, "circular padding (left " + str(pad_left_) + ", right " + str(pad_right_) +
                ") must not exceed the input length " + str(input_frames) +
                " (it would wrap around more than once)");
  }
  const std::int64_t padded = input_frames + pad_left_ + pad_right_;
  const std::int64_t span = options_.dilation * (options_.kernel_size - 1) + 1;
  if (padded < span) {
    fail(L,
         "calculated output size is too small: input frames " + str(input_frames) + " + padding " +
             str(pad_left_) + " + " + str(pad_right_) + " = " + str(padded) +
             " is shorter than the dilated kernel dilation * (kernel_size - 1) + 1 = " + str(span));
  }
  return (padded - span) / options_.stride + 1;
}

Shape Conv1d::output_shape(const Shape& input) const {
  if (input.channels != options_.in_channels) {
    fail("Conv1d",
         "input " + to_string(input) + " has " + str(input.channels) +
             " channels but the layer expects in_channels = " + str(options_.in_channels));
  }
  return Shape{input.batch, options_.out_channels, output_frames(input.frames)};
}

Tensor Conv1d::forward(const Tensor& input) const {
  Tensor out = make_output(input, output_shape(input.shape()));
  forward(input.view(), out.view());
  if (out.device() == Device::kCuda) detail::cuda::synchronize(nullptr);
  return out;
}

void Conv1d::forward(TensorView<const float> input, TensorView<float> output,
                     void* cuda_stream) const {
  const Shape out_shape = output_shape(input.shape());
  check_io("Conv1d", input, output, out_shape);
  if (out_shape.numel() == 0) return;
  detail::Conv1dParams p;
  p.batch = input.batch();
  p.in_channels = options_.in_channels;
  p.out_channels = options_.out_channels;
  p.kernel_size = options_.kernel_size;
  p.stride = options_.stride;
  p.dilation = options_.dilation;
  p.groups = options_.groups;
  p.pad_left = pad_left_;
  p.pad_right = pad_right_;
  p.padding_mode = options_.padding_mode;
  p.in_frames = input.frames();
  p.out_frames = out_shape.frames;
  const float* bias = options_.bias ? bias_.data() : nullptr;
  if (input.device() == Device::kCpu) {
    detail::cpu::conv1d(p, input, weight_.data(), bias, output);
  } else {
    device_copy_->upload(weight_, bias_);
    detail::cuda::conv1d(p, input, device_copy_->weight.data(),
                         options_.bias ? device_copy_->bias.data() : nullptr, output, cuda_stream);
  }
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose1d

ConvTranspose1d::ConvTranspose1d(const ConvTranspose1dOptions& options)
    : device_copy_(std::make_shared<DeviceCopy>()), options_(options) {
  const char* L = "ConvTranspose1d";
  check_groups(L, options.in_channels, options.out_channels, options.groups);
  require_at_least(L, "kernel_size", options.kernel_size, 1);
  require_at_least(L, "stride", options.stride, 1);
  require_at_least(L, "dilation", options.dilation, 1);
  require_at_least(L, "padding", options.padding, 0);
  require_at_least(L, "output_padding", options.output_padding, 0);
  if (options.output_padding >= options.stride && options.output_padding >= options.dilation) {
    fail(L, "output_padding must be smaller than either stride or dilation, got output_padding " +
                str(options.output_padding) + ", stride " + str(options.stride) + ", dilation " +
                str(options.dilation));
  }
  weight_ = Tensor::zeros(
      Shape{options.in_channels, options.out_channels / options.groups, options.kernel_size});
  if (options.bias) bias_ = Tensor::zeros(Shape{1, 1, options.out_channels});
}

void ConvTranspose1d::set_weight(TensorView<const float> weight) {
  device_copy_ = std::make_shared<DeviceCopy>();
  const Shape expected{options_.in_channels, options_.out_channels / options_.groups,
                       options_.kernel_size};
  weight_ = load_parameter("ConvTranspose1d", "weight", weight, expected,
                           weight_text(expected.batch, expected.channels, expected.frames) +
                               " = (in_channels, out_channels / groups, kernel_size)");
}

void ConvTranspose1d::set_bias(TensorView<const float> bias) {
  device_copy_ = std::make_shared<DeviceCopy>();
  if (!options_.bias) {
    fail("ConvTranspose1d", "set_bias called on a layer built with bias = false");
  }
  bias_ = load_parameter("ConvTranspose1d", "bias", bias, Shape{1, 1, options_.out_channels},
                         "(" + str(options_.out_channels) + ") = (out_channels)");
}

std::int64_t ConvTranspose1d::output_frames(std::int64_t input_frames) const {
  const char* L = "ConvTranspose1d";
  require_at_least(L, "input frames", input_frames, 1);
  const auto& o = options_;
  const std::int64_t out = (input_frames - 1) * o.stride - 2 * o.padding +
                           o.dilation * (o.kernel_size - 1) + o.output_padding + 1;
  if (out < 1) {
    fail(L, "calculated output size is too small: (input frames " + str(input_frames) +
                " - 1) * stride " + str(o.stride) + " - 2 * padding " + str(o.padding) +
                " + dilation " + str(o.dilation) + " * (kernel_size " + str(o.kernel_size) +
                " - 1) + output_padding " + str(o.output_padding) + " + 1 = " + str(out) +
                ", must be >= 1");
  }
  return out;
}

Shape ConvTranspose1d::output_shape(const Shape& input) const {
  if (input.channels != options_.in_channels) {
    fail("ConvTranspose1d",
         "input " + to_string(input) + " has " + str(input.channels) +
             " channels but the layer expects in_channels = " + str(options_.in_channels));
  }
  return Shape{input.batch, options_.out_channels, output_frames(input.frames)};
}

Tensor ConvTranspose1d::forward(const Tensor& input) const {
  Tensor out = make_output(input, output_shape(input.shape()));
  forward(input.view(), out.view());
  if (out.device() == Device::kCuda) detail::cuda::synchronize(nullptr);
  return out;
}

void ConvTranspose1d::forward(TensorView<const float> input, TensorView<float> output,
                              void* cuda_stream) const {
  const Shape out_shape = output_shape(input.shape());
  check_io("ConvTranspose1d", input, output, out_shape);
  if (out_shape.numel() == 0) return;
  detail::ConvTranspose1dParams p;
  p.batch = input.batch();
  p.in_channels = options_.in_channels;
  p.out_channels = options_.out_channels;
  p.kernel_size = options_.kernel_size;
  p.stride = options_.stride;
  p.dilation = options_.dilation;
  p.groups = options_.groups;
  p.padding = options_.padding;
  p.output_padding = options_.output_padding;
  p.in_frames = input.frames();
  p.out_frames = out_shape.frames;
  const float* bias = options_.bias ? bias_.data() : nullptr;
  if (input.device() == Device::kCpu) {
    detail::cpu::conv_transpose1d(p, input, weight_.data(), bias, output);
  } else {
    device_copy_->upload(weight_, bias_);
    detail::cuda::conv_transpose1d(p, input, device_copy_->weight.data(),
                                   options_.bias ? device_copy_->bias.data() : nullptr, output,
                                   cuda_stream);
  }
}

}  // namespace convbank
