#include "convbank/tensor.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank {

namespace {

constexpr std::size_t kHostAlignment = 64;  // one cache line; lets kernels use aligned AVX-512

std::size_t checked_bytes(const Shape& shape) {
  if (shape.batch < 0 || shape.channels < 0 || shape.frames < 0) {
    throw Error("Tensor: shape " + to_string(shape) + " has a negative dimension");
  }
  // A wrapped product would allocate a small buffer and then be written past its end.
  std::size_t n = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(shape.batch),
                             static_cast<std::size_t>(shape.channels), &n) ||
      __builtin_mul_overflow(n, static_cast<std::size_t>(shape.frames), &n) ||
      __builtin_mul_overflow(n, sizeof(float), &n) || n > static_cast<std::size_t>(INT64_MAX)) {
    throw Error("Tensor: shape " + to_string(shape) + " is too large to address");
  }
  return n;
}

}  // namespace

std::string to_string(Device device) {
  return device == Device::kCpu ? "cpu" : "cuda";
}

std::string to_string(const Shape& shape) {
  return "(" + std::to_string(shape.batch) + ", " + std::to_string(shape.channels) + ", " +
         std::to_string(shape.frames) + ")";
}

void detail::TensorDeleter::operator()(float* p) const noexcept {
  if (p == nullptr) return;
  if (device == Device::kCuda) {
    detail::cuda::deallocate(p);
  } else {
    std::free(p);
  }
}

Tensor::Tensor(Shape shape, Device device)
    : data_(nullptr, detail::TensorDeleter{device}), shape_(shape), device_(device) {
  std::size_t bytes = checked_bytes(shape);
  if (bytes == 0) return;
  void* p = nullptr;
  if (device == Device::kCuda) {
    p = detail::cuda::allocate(bytes);
  } else {
    const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    p = std::aligned_alloc(kHostAlignment, rounded);
    if (p == nullptr) {
      throw Error("Tensor: cannot allocate " + std::to_string(bytes) + " bytes for shape " +
                  to_string(shape));
    }
  }
  data_.reset(static_cast<float*>(p));
}

Tensor Tensor::zeros(Shape shape, Device device) {
  Tensor t(shape, device);
  if (t.numel() == 0) return t;
  if (device == Device::kCpu) {
    std::memset(t.data(), 0, static_cast<std::size_t>(t.numel()) * sizeof(float));
  } else {
    Tensor host = Tensor::zeros(shape, Device::kCpu);
    copy(host.view(), t.view());
  }
  return t;
}

Tensor Tensor::unbatched(std::int64_t channels, std::int64_t frames, Device device) {
  Tensor t(Shape{1, channels, frames}, device);
  t.rank_ = 2;
  return t;
}

Tensor Tensor::clone() const {
  return to(device_);
}

Tensor Tensor::to(Device device) const {
  Tensor out(shape_, device);
  out.rank_ = rank_;
  if (numel() > 0) copy(view(), out.view());
  return out;
}

void Tensor::set_rank(int rank) {
  if (rank != 2 && rank != 3)
    throw Error("Tensor: rank must be 2 or 3, got " + std::to_string(rank));
  if (rank == 2 && shape_.batch != 1) {
    throw Error("Tensor: a rank-2 (channels, frames) tensor needs batch 1, shape is " +
                to_string(shape_));
  }
  rank_ = rank;
}

float& Tensor::operator()(std::int64_t b, std::int64_t c, std::int64_t t) {
  return data()[(b * shape_.channels + c) * shape_.frames + t];
}
float Tensor::operator()(std::int64_t b, std::int64_t c, std::int64_t t) const {
  return data()[(b * shape_.channels + c) * shape_.frames + t];
}

std::string Tensor::shape_string() const {
  if (rank_ == 2) {
    return "(" + std::to_string(shape_.channels) + ", " + std::to_string(shape_.frames) + ")";
  }
  return to_string(shape_);
}

void copy(TensorView<const float> src, TensorView<float> dst) {
  if (src.shape() != dst.shape()) {
    throw Error("copy: source shape " + to_string(src.shape()) + " differs from destination " +
                to_string(dst.shape()));
  }
  const Shape s = src.shape();
  if (s.numel() == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(s.frames) * sizeof(float);
  if (src.device() == Device::kCpu && dst.device() == Device::kCpu) {
    for (std::int64_t b = 0; b < s.batch; ++b) {
      for (std::int64_t c = 0; c < s.channels; ++c) {
        std::memcpy(dst.channel(b, c), src.channel(b, c), row_bytes);
      }
    }
    return;
  }
  using detail::cuda::CopyKind;
  const CopyKind kind = src.device() == Device::kCpu   ? CopyKind::kHostToDevice
                        : dst.device() == Device::kCpu ? CopyKind::kDeviceToHost
                                                       : CopyKind::kDeviceToDevice;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    detail::cuda::copy_2d(dst.channel(b, 0), dst.channel_stride() * sizeof(float),
                          src.channel(b, 0), src.channel_stride() * sizeof(float), row_bytes,
                          static_cast<std::size_t>(s.channels), kind);
  }
}

}  // namespace convbank
