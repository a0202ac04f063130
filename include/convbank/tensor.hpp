// Tensors of audio: (batch, channels, frames), time contiguous, float32.
//
//   convbank::Tensor x(convbank::Shape{1, 2, 48000});     // owning, 64-byte aligned
//   convbank::TensorView<float> v = x.view();               // non-owning
//   v(0, 1, 100) = 0.5f;                                    // batch 0, channel 1, frame 100
//
// All sizes and strides are 64-bit: hours of audio and batch * channels * frames > 2^31 work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace convbank {

enum class Device { kCpu, kCuda };

std::string to_string(Device device);

// Logical extent of a tensor. `frames` counts time steps per channel.
struct Shape {
  std::int64_t batch = 0;
  std::int64_t channels = 0;
  std::int64_t frames = 0;

  constexpr std::int64_t numel() const { return batch * channels * frames; }
  friend constexpr bool operator==(const Shape&, const Shape&) = default;
};

// "(2, 64, 131072)": the form every error message uses.
std::string to_string(const Shape& shape);

// Non-owning view of (batch, channels, frames) data. Frames are contiguous (stride 1); the
// channel and batch strides are explicit so a view can address a slice of a larger buffer
// (e.g. one chunk of a longer signal). Copying a view never copies data.
template <class T>
class TensorView {
 public:
  TensorView() = default;

  // A dense view: channel stride = frames, batch stride = channels * frames.
  TensorView(T* data, Shape shape, Device device = Device::kCpu)
      : TensorView(data, shape, shape.channels * shape.frames, shape.frames, device) {}

  TensorView(T* data, Shape shape, std::int64_t batch_stride, std::int64_t channel_stride,
             Device device = Device::kCpu)
      : data_(data),
        shape_(shape),
        batch_stride_(batch_stride),
        channel_stride_(channel_stride),
        device_(device) {}

  // A view of mutable data converts to a view of const data, never the reverse.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  TensorView(const TensorView<U>& other)  // NOLINT(google-explicit-constructor)
      : TensorView(other.data(), other.shape(), other.batch_stride(), other.channel_stride(),
                   other.device()) {}

  T* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  std::int64_t batch() const { return shape_.batch; }
  std::int64_t channels() const { return shape_.channels; }
  std::int64_t frames() const { return shape_.frames; }
  std::int64_t batch_stride() const { return batch_stride_; }
  std::int64_t channel_stride() const { return channel_stride_; }
  Device device() const { return device_; }

  bool is_dense() const {
    return channel_stride_ == shape_.frames && batch_stride_ == shape_.channels * shape_.frames;
  }

  // Pointer to frame 0 of (batch b, channel c).
  T* channel(std::int64_t b, std::int64_t c) const {
    return data_ + b * batch_stride_ + c * channel_stride_;
  }
  T& operator()(std::int64_t b, std::int64_t c, std::int64_t t) const { return channel(b, c)[t]; }

  // Frames [first, first + count) of every channel; strides unchanged.
  TensorView slice_frames(std::int64_t first, std::int64_t count) const {
    return TensorView(data_ + first, Shape{shape_.batch, shape_.channels, count}, batch_stride_,
                      channel_stride_, device_);
  }

 private:
  T* data_ = nullptr;
  Shape shape_{};
  std::int64_t batch_stride_ = 0;
  std::int64_t channel_stride_ = 0;
  Device device_ = Device::kCpu;
};

namespace detail {
// Frees host or device memory by the device it was allocated on.
struct TensorDeleter {
  Device device = Device::kCpu;
  void operator()(float* p) const noexcept;
};
}  // namespace detail

// Owning, dense float32 tensor on one device. Host memory is 64-byte aligned and left
// uninitialized by the constructor (use Tensor::zeros for zeroed memory): a multi-gigabyte
// buffer that is about to be overwritten should not be written twice.
//
// A tensor has rank 3, (batch, channels, frames), or rank 2, (channels, frames): the
// "unbatched" input PyTorch's Conv1d accepts. A rank-2 tensor has shape().batch == 1; layers
// given a rank-2 input return a rank-2 output, as PyTorch does.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::kCpu);
  static Tensor zeros(Shape shape, Device device = Device::kCpu);
  // A rank-2 (channels, frames) tensor.
  static Tensor unbatched(std::int64_t channels, std::int64_t frames, Device device = Device::kCpu);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;  // copies of audio buffers are explicit: clone()
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() = default;

  Tensor clone() const;
  // A copy of this tensor on `device` (a plain clone when it already lives there).
  Tensor to(Device device) const;

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return shape_.numel(); }
  Device device() const { return device_; }
  int rank() const { return rank_; }
  bool empty() const { return numel() == 0; }

  // Reinterpret as rank 2 or 3 without moving data; rank 2 requires batch == 1.
  void set_rank(int rank);

  TensorView<float> view() { return {data(), shape_, device_}; }
  TensorView<const float> view() const { return {data(), shape_, device_}; }
  operator TensorView<float>() { return view(); }              // NOLINT
  operator TensorView<const float>() const { return view(); }  // NOLINT

  // Host-only element access, for tests and tools.
  float& operator()(std::int64_t b, std::int64_t c, std::int64_t t);
  float operator()(std::int64_t b, std::int64_t c, std::int64_t t) const;

  // "(2, 64, 131072)" or, for rank 2, "(64, 131072)".
  std::string shape_string() const;

 private:
  std::unique_ptr<float[], detail::TensorDeleter> data_;
  Shape shape_{};
  Device device_ = Device::kCpu;
  int rank_ = 3;
};

// Copies between views of equal shape; either side may live on any device the build supports.
void copy(TensorView<const float> src, TensorView<float> dst);

}  // namespace convbank
