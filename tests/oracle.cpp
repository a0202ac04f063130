// Deliberately the slowest, plainest form of each definition: float64 accumulation, no
// blocking, no shared helpers with src/, so that a bug in a backend cannot hide in here too.
#include "oracle.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace oracle {

namespace {

using convbank::PaddingMode;
using convbank::Shape;

std::int64_t positive_mod(std::int64_t a, std::int64_t n) {
  return ((a % n) + n) % n;
}

// Index into the unpadded input that padded position i (i in [-left, length + right)) reads,
// as torch.nn.functional.pad computes it; -1 means "a zero".
std::int64_t source_index(std::int64_t i, std::int64_t length, PaddingMode mode) {
  if (i >= 0 && i < length) return i;
  switch (mode) {
    case PaddingMode::kZeros:
      return -1;
    case PaddingMode::kReflect:
      // Mirror about the first and last sample, which are not repeated.
      return i < 0 ? -i : 2 * (length - 1) - i;
    case PaddingMode::kReplicate:
      return i < 0 ? 0 : length - 1;
    case PaddingMode::kCircular:
      return positive_mod(i, length);
  }
  return -1;
}

Array pad(const Array& x, std::int64_t left, std::int64_t right, PaddingMode mode) {
  const std::int64_t length = x.shape.frames;
  Array out{Shape{x.shape.batch, x.shape.channels, length + left + right}, {}};
  out.data.assign(static_cast<std::size_t>(out.shape.numel()), 0.0);
  for (std::int64_t b = 0; b < x.shape.batch; ++b) {
    for (std::int64_t c = 0; c < x.shape.channels; ++c) {
      for (std::int64_t t = 0; t < out.shape.frames; ++t) {
        const std::int64_t s = source_index(t - left, length, mode);
        if (s >= 0) {
          if (s >= length) throw std::logic_error("oracle: padding index out of range");
          out(b, c, t) = x(b, c, s);
        }
      }
    }
  }
  return out;
}

}  // namespace

Array conv1d(const Array& input, const Array& weight, const std::vector<double>& bias,
             const convbank::Conv1dOptions& o) {
  std::int64_t left = 0;
  std::int64_t right = 0;
  switch (o.padding.kind()) {
    case convbank::Padding::Kind::kExplicit:
      left = right = o.padding.frames();
      break;
    case convbank::Padding::Kind::kValid:
      break;
    case convbank::Padding::Kind::kSame: {
      const std::int64_t total = o.dilation * (o.kernel_size - 1);
      left = total / 2;
      right = total - left;
      break;
    }
  }
  const Array x = pad(input, left, right, o.padding_mode);
  const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
  if (x.shape.frames < span) throw std::invalid_argument("oracle::conv1d: output size < 1");
  const std::int64_t out_frames = (x.shape.frames - span) / o.stride + 1;
  const std::int64_t cg = o.in_channels / o.groups;
  const std::int64_t og = o.out_channels / o.groups;

  Array y{Shape{input.shape.batch, o.out_channels, out_frames}, {}};
  y.data.assign(static_cast<std::size_t>(y.shape.numel()), 0.0);
  for (std::int64_t b = 0; b < y.shape.batch; ++b) {
    for (std::int64_t oc = 0; oc < o.out_channels; ++oc) {
      const std::int64_t g = oc / og;
      for (std::int64_t t = 0; t < out_frames; ++t) {
        double acc = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(oc)];
        for (std::int64_t c = 0; c < cg; ++c) {
          for (std::int64_t k = 0; k < o.kernel_size; ++k) {
            acc += weight(oc, c, k) * x(b, g * cg + c, t * o.stride + k * o.dilation);
          }
        }
        y(b, oc, t) = acc;
      }
    }
  }
  return y;
}

Array conv_transpose1d(const Array& input, const Array& weight, const std::vector<double>& bias,
                       const convbank::ConvTranspose1dOptions& o) {
  const std::int64_t out_frames = (input.shape.frames - 1) * o.stride - 2 * o.padding +
                                  o.dilation * (o.kernel_size - 1) + o.output_padding + 1;
  if (out_frames < 1) throw std::invalid_argument("oracle::conv_transpose1d: output size < 1");
  const std::int64_t cg = o.in_channels / o.groups;
  const std::int64_t og = o.out_channels / o.groups;

  Array y{Shape{input.shape.batch, o.out_channels, out_frames}, {}};
  y.data.assign(static_cast<std::size_t>(y.shape.numel()), 0.0);
  for (std::int64_t b = 0; b < y.shape.batch; ++b) {
    for (std::int64_t oc = 0; oc < o.out_channels; ++oc) {
      const double v = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(oc)];
      for (std::int64_t t = 0; t < out_frames; ++t) y(b, oc, t) = v;
    }
    // The gradient of Conv1d with respect to its input, i.e. a scatter: every input sample
    // adds a scaled copy of the kernel; samples landing in the trimmed padding are dropped.
    for (std::int64_t ci = 0; ci < o.in_channels; ++ci) {
      const std::int64_t g = ci / cg;
      for (std::int64_t i = 0; i < input.shape.frames; ++i) {
        for (std::int64_t ol = 0; ol < og; ++ol) {
          for (std::int64_t k = 0; k < o.kernel_size; ++k) {
            const std::int64_t t = i * o.stride - o.padding + k * o.dilation;
            if (t < 0 || t >= out_frames) continue;
            y(b, g * og + ol, t) += input(b, ci, i) * weight(ci, ol, k);
          }
        }
      }
    }
  }
  return y;
}

Array from_tensor(const convbank::Tensor& t) {
  Array a{t.shape(), {}};
  a.data.resize(static_cast<std::size_t>(t.numel()));
  const convbank::TensorView<const float> v = t.view();
  for (std::int64_t b = 0; b < a.shape.batch; ++b) {
    for (std::int64_t c = 0; c < a.shape.channels; ++c) {
      for (std::int64_t f = 0; f < a.shape.frames; ++f) a(b, c, f) = v(b, c, f);
    }
  }
  return a;
}

convbank::Tensor to_tensor(const Array& a) {
  convbank::Tensor t(a.shape);
  const convbank::TensorView<float> v = t.view();
  for (std::int64_t b = 0; b < a.shape.batch; ++b) {
    for (std::int64_t c = 0; c < a.shape.channels; ++c) {
      for (std::int64_t f = 0; f < a.shape.frames; ++f) v(b, c, f) = static_cast<float>(a(b, c, f));
    }
  }
  return t;
}

Array random_array(convbank::Shape shape, std::mt19937_64& rng, double scale) {
  // Values exactly representable in float32, so the float64 reference sees what the float32
  // layer sees and the measured error is the layer's alone.
  std::uniform_real_distribution<double> dist(-scale, scale);
  Array a{shape, {}};
  a.data.resize(static_cast<std::size_t>(shape.numel()));
  for (double& v : a.data) v = static_cast<double>(static_cast<float>(dist(rng)));
  return a;
}

double relative_l2(const convbank::Tensor& got, const Array& ref) {
  if (got.shape() != ref.shape) return INFINITY;
  double diff = 0.0;
  double norm = 0.0;
  for (std::int64_t b = 0; b < ref.shape.batch; ++b) {
    for (std::int64_t c = 0; c < ref.shape.channels; ++c) {
      for (std::int64_t t = 0; t < ref.shape.frames; ++t) {
        const double r = ref(b, c, t);
        const double d = static_cast<double>(got(b, c, t)) - r;
        diff += d * d;
        norm += r * r;
      }
    }
  }
  if (std::isnan(diff)) return NAN;
  if (norm == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(diff / norm);
}

double max_abs(const Array& a) {
  double m = 0.0;
  for (double v : a.data) m = std::max(m, std::abs(v));
  return m;
}

double max_abs_diff(const convbank::Tensor& got, const Array& ref) {
  if (got.shape() != ref.shape) return INFINITY;
  double m = 0.0;
  for (std::int64_t b = 0; b < ref.shape.batch; ++b) {
    for (std::int64_t c = 0; c < ref.shape.channels; ++c) {
      for (std::int64_t t = 0; t < ref.shape.frames; ++t) {
        const double d = std::abs(static_cast<double>(got(b, c, t)) - ref(b, c, t));
        if (std::isnan(d)) return NAN;
        m = std::max(m, d);
      }
    }
  }
  return m;
}

}  // namespace oracle
