// CPU backend: Conv1d as im2col + GEMM per (batch, group, block of output frames), and
// ConvTranspose1d as GEMM + col2im per block of *output* frames, both through Eigen's
// matrix product. Blocking over output time keeps the column buffer in L2 and makes every
// output frame owned by exactly one task, so threads never write the same element and results
// do not depend on the thread count. Layers whose groups hold one or two channels (depthwise)
// skip the GEMM, whose packing would cost more than the few multiply-adds per frame.
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/backend.hpp"
#include "cpu/parallel.hpp"

namespace convbank::detail::cpu {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowMap = Eigen::Map<const RowMatrix>;
using RowMap = Eigen::Map<RowMatrix>;
using ConstStridedRowMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using StridedRowMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

int g_threads = 0;

// Column buffers of about this many floats (1 MiB) stay in a core's L2 on the machines we use.
constexpr std::int64_t kColumnFloats = 1 << 18;
constexpr std::int64_t kDirectBlockFrames = 4096;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// Frames t of an output row for which input index t * stride + offset lies in [0, length).
struct Range {
  std::int64_t begin, end;
};
Range valid_outputs(std::int64_t offset, std::int64_t stride, std::int64_t length,
                    std::int64_t t_begin, std::int64_t t_end) {
  const std::int64_t lo = std::max(t_begin, ceil_div(-offset, stride));
  const std::int64_t hi = std::min(t_end, floor_div(length - 1 - offset, stride) + 1);
  return {lo, std::max(lo, hi)};
}

std::int64_t pad_index(std::int64_t i, std::int64_t length, PaddingMode mode) {
  switch (mode) {
    case PaddingMode::kReflect:
      return i < 0 ? -i : (i >= length ? 2 * (length - 1) - i : i);
    case PaddingMode::kReplicate:
      return std::clamp<std::int64_t>(i, 0, length - 1);
    case PaddingMode::kCircular:
      return i < 0 ? i + length : (i >= length ? i - length : i);
    case PaddingMode::kZeros:
      break;
  }
  return i;
}

// reflect / replicate / circular: materialize the padded input once, as PyTorch's F.pad does,
// so the convolution itself only ever sees zero padding.
std::vector<float> pad_input(TensorView<const float> x, std::int64_t left, std::int64_t right,
                             PaddingMode mode) {
  const std::int64_t length = x.frames();
  const std::int64_t padded = length + left + right;
  std::vector<float> buffer(static_cast<std::size_t>(x.batch() * x.channels() * padded));
  for (std::int64_t b = 0; b < x.batch(); ++b) {
    for (std::int64_t c = 0; c < x.channels(); ++c) {
      const float* src = x.channel(b, c);
      float* dst = buffer.data() + (b * x.channels() + c) * padded;
      std::memcpy(dst + left, src, static_cast<std::size_t>(length) * sizeof(float));
      for (std::int64_t i = -left; i < 0; ++i) dst[i + left] = src[pad_index(i, length, mode)];
      for (std::int64_t i = length; i < length + right; ++i) {
        dst[i + left] = src[pad_index(i, length, mode)];
      }
    }
  }
  return buffer;
}

void fill_bias(float* row, std::int64_t count, const float* bias, std::int64_t channel) {
  std::fill(row, row + count, bias != nullptr ? bias[channel] : 0.0f);
}

// Conv1d for groups with few channels: out[t] += w * x[t * stride + k * dilation - pad],
// one output row and block of frames per task, vectorized along time.
void conv1d_direct(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                   const float* weight, const float* bias, TensorView<float> out) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t blocks = ceil_div(p.out_frames, kDirectBlockFrames);
  const std::int64_t rows = p.batch * p.out_channels;
  parallel_for(rows * blocks, [&](std::int64_t task, int) {
    const std::int64_t row = task / blocks;
    const std::int64_t t0 = (task % blocks) * kDirectBlockFrames;
    const std::int64_t t1 = std::min(p.out_frames, t0 + kDirectBlockFrames);
    const std::int64_t b = row / p.out_channels;
    const std::int64_t o = row % p.out_channels;
    const std::int64_t g = o / og;
    float* y = out.channel(b, o);
    fill_bias(y + t0, t1 - t0, bias, o);
    for (std::int64_t c = 0; c < cg; ++c) {
      const float* xr = x.channel(b, g * cg + c);
      for (std::int64_t k = 0; k < p.kernel_size; ++k) {
        const float w = weight[(o * cg + c) * p.kernel_size + k];
        const std::int64_t offset = k * p.dilation - pad_left;
        const Range r = valid_outputs(offset, p.stride, x.frames(), t0, t1);
        if (p.stride == 1) {
          for (std::int64_t t = r.begin; t < r.end; ++t) y[t] += w * xr[t + offset];
        } else {
          for (std::int64_t t = r.begin; t < r.end; ++t) y[t] += w * xr[t * p.stride + offset];
        }
      }
    }
  });
}

void conv1d_gemm(const Conv1dParams& p, TensorView<const float> x, std::int64_t pad_left,
                 const float* weight, const float* bias, TensorView<float> out) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t kc = cg * p.kernel_size;
  // Pointwise, stride 1, unpadded: the input rows already are the GEMM operand.
  const bool direct_operand = p.kernel_size == 1 && p.stride == 1 && pad_left == 0;
  std::int64_t block = std::clamp<std::int64_t>(kColumnFloats / kc, 64, 8192) / 16 * 16;
  block = std::min(block, p.out_frames);
  const std::int64_t blocks = ceil_div(p.out_frames, block);
  const std::int64_t tasks = p.batch * p.groups * blocks;
  const int threads = threads_for(tasks);
  std::vector<std::vector<float>> columns(direct_operand ? 0 : threads);
  for (auto& c : columns) c.resize(static_cast<std::size_t>(kc * block));

  parallel_for(tasks, [&](std::int64_t task, int thread) {
    const std::int64_t b = task / (p.groups * blocks);
    const std::int64_t g = (task / blocks) % p.groups;
    const std::int64_t t0 = (task % blocks) * block;
    const std::int64_t tn = std::min(block, p.out_frames - t0);
    StridedRowMap y(out.channel(b, g * og) + t0, og, tn, Eigen::OuterStride<>(out.channel_stride()));
    ConstRowMap w(weight + g * og * kc, og, kc);
    if (direct_operand) {
      ConstStridedRowMap xs(x.channel(b, g * cg) + t0, cg, tn,
                            Eigen::OuterStride<>(x.channel_stride()));
      y.noalias() = w * xs;
    } else {
      float* col = columns[thread].data();
      for (std::int64_t c = 0; c < cg; ++c) {
        const float* xr = x.channel(b, g * cg + c);
        for (std::int64_t k = 0; k < p.kernel_size; ++k) {
          float* dst = col + (c * p.kernel_size + k) * tn;
          const std::int64_t offset = t0 * p.stride + k * p.dilation - pad_left;
          const Range r = valid_outputs(offset, p.stride, x.frames(), 0, tn);
          std::fill(dst, dst + r.begin, 0.0f);
          if (p.stride == 1) {
            std::memcpy(dst + r.begin, xr + offset + r.begin,
                        static_cast<std::size_t>(r.end - r.begin) * sizeof(float));
          } else {
            for (std::int64_t j = r.begin; j < r.end; ++j) dst[j] = xr[j * p.stride + offset];
          }
          std::fill(dst + r.end, dst + tn, 0.0f);
        }
      }
      y.noalias() = w * ConstRowMap(col, kc, tn);
    }
    if (bias != nullptr) {
      y.colwise() += Eigen::Map<const Eigen::VectorXf>(bias + g * og, og);
    }
  });
}

void conv_transpose1d_direct(const ConvTranspose1dParams& p, TensorView<const float> x,
                             const float* weight, const float* bias, TensorView<float> out) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t blocks = ceil_div(p.out_frames, kDirectBlockFrames);
  const std::int64_t rows = p.batch * p.out_channels;
  parallel_for(rows * blocks, [&](std::int64_t task, int) {
    const std::int64_t row = task / blocks;
    const std::int64_t t0 = (task % blocks) * kDirectBlockFrames;
    const std::int64_t t1 = std::min(p.out_frames, t0 + kDirectBlockFrames);
    const std::int64_t b = row / p.out_channels;
    const std::int64_t o = row % p.out_channels;
    const std::int64_t g = o / og;
    const std::int64_t ol = o % og;
    float* y = out.channel(b, o);
    fill_bias(y + t0, t1 - t0, bias, o);
    for (std::int64_t c = 0; c < cg; ++c) {
      const std::int64_t ci = g * cg + c;
      const float* xr = x.channel(b, ci);
      for (std::int64_t k = 0; k < p.kernel_size; ++k) {
        const float w = weight[(ci * og + ol) * p.kernel_size + k];
        // Input i lands on output t = i * stride - padding + k * dilation.
        const std::int64_t shift = k * p.dilation - p.padding;
        const std::int64_t i0 = std::max<std::int64_t>(0, ceil_div(t0 - shift, p.stride));
        const std::int64_t i1 = std::min(x.frames(), floor_div(t1 - 1 - shift, p.stride) + 1);
        if (p.stride == 1) {
          for (std::int64_t i = i0; i < i1; ++i) y[i + shift] += w * xr[i];
        } else {
          for (std::int64_t i = i0; i < i1; ++i) y[i * p.stride + shift] += w * xr[i];
        }
      }
    }
  });
}

void conv_transpose1d_gemm(const ConvTranspose1dParams& p, TensorView<const float> x,
                           const float* weight, const float* bias, TensorView<float> out) {
  const std::int64_t cg = p.in_channels / p.groups;
  const std::int64_t og = p.out_channels / p.groups;
  const std::int64_t ok = og * p.kernel_size;
  // Inputs that touch `block` output frames: block / stride plus the kernel's reach.
  const std::int64_t reach = ceil_div(p.dilation * (p.kernel_size - 1), p.stride) + 1;
  std::int64_t block_inputs = std::max<std::int64_t>(kColumnFloats / ok, 8 * reach);
  block_inputs = std::clamp<std::int64_t>(block_inputs, 16, 8192);
  std::int64_t block = std::min(block_inputs * p.stride, p.out_frames);
  const std::int64_t blocks = ceil_div(p.out_frames, block);
  const std::int64_t tasks = p.batch * p.groups * blocks;
  const int threads = threads_for(tasks);
  const std::int64_t max_inputs = block / p.stride + reach + 1;
  std::vector<std::vector<float>> columns(threads);
  for (auto& c : columns) c.resize(static_cast<std::size_t>(ok * max_inputs));

  parallel_for(tasks, [&](std::int64_t task, int thread) {
    const std::int64_t b = task / (p.groups * blocks);
    const std::int64_t g = (task / blocks) % p.groups;
    const std::int64_t t0 = (task % blocks) * block;
    const std::int64_t t1 = std::min(p.out_frames, t0 + block);
    for (std::int64_t o = 0; o < og; ++o) {
      fill_bias(out.channel(b, g * og + o) + t0, t1 - t0, bias, g * og + o);
    }
    const std::int64_t i_lo = std::max<std::int64_t>(
        0, ceil_div(t0 + p.padding - p.dilation * (p.kernel_size - 1), p.stride));
    const std::int64_t i_hi = std::min(x.frames(), floor_div(t1 - 1 + p.padding, p.stride) + 1);
    if (i_lo >= i_hi) return;
    const std::int64_t ni = i_hi - i_lo;
    float* col = columns[thread].data();
    ConstRowMap w(weight + g * cg * ok, cg, ok);
    ConstStridedRowMap xs(x.channel(b, g * cg) + i_lo, cg, ni,
                          Eigen::OuterStride<>(x.channel_stride()));
    RowMap(col, ok, ni).noalias() = w.transpose() * xs;
    for (std::int64_t o = 0; o < og; ++o) {
      float* y = out.channel(b, g * og + o);
      for (std::int64_t k = 0; k < p.kernel_size; ++k) {
        const float* cr = col + (o * p.kernel_size + k) * ni;
        const std::int64_t shift = k * p.dilation - p.padding;
        const std::int64_t i0 = std::max(i_lo, ceil_div(t0 - shift, p.stride));
        const std::int64_t i1 = std::min(i_hi, floor_div(t1 - 1 - shift, p.stride) + 1);
        if (p.stride == 1) {
          for (std::int64_t i = i0; i < i1; ++i) y[i + shift] += cr[i - i_lo];
        } else {
          for (std::int64_t i = i0; i < i1; ++i) y[i * p.stride + shift] += cr[i - i_lo];
        }
      }
    }
  });
}

}  // namespace

void set_num_threads(int threads) { g_threads = threads; }

int num_threads() {
  if (g_threads > 0) return g_threads;
#if defined(CONVBANK_HAVE_OPENMP)
  return omp_get_num_procs();
#else
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#endif
}

const char* description() {
#if defined(CONVBANK_HAVE_OPENMP)
  return "Eigen " EIGEN_MAKESTRING(EIGEN_WORLD_VERSION) "." EIGEN_MAKESTRING(
      EIGEN_MAJOR_VERSION) "." EIGEN_MAKESTRING(EIGEN_MINOR_VERSION) ", OpenMP";
#else
  return "Eigen " EIGEN_MAKESTRING(EIGEN_WORLD_VERSION) "." EIGEN_MAKESTRING(
      EIGEN_MAJOR_VERSION) "." EIGEN_MAKESTRING(EIGEN_MINOR_VERSION) ", single thread";
#endif
}

void conv1d(const Conv1dParams& p, TensorView<const float> input, const float* weight,
            const float* bias, TensorView<float> output) {
  TensorView<const float> x = input;
  std::int64_t pad_left = p.pad_left;
  std::vector<float> padded;
  if (p.padding_mode != PaddingMode::kZeros && (p.pad_left > 0 || p.pad_right > 0)) {
    padded = pad_input(input, p.pad_left, p.pad_right, p.padding_mode);
    x = TensorView<const float>(padded.data(),
                                Shape{p.batch, p.in_channels, p.in_frames + p.pad_left + p.pad_right});
    pad_left = 0;
  }
  if (p.in_channels / p.groups <= 2 && p.out_channels / p.groups <= 2) {
    conv1d_direct(p, x, pad_left, weight, bias, output);
  } else {
    conv1d_gemm(p, x, pad_left, weight, bias, output);
  }
}

void conv_transpose1d(const ConvTranspose1dParams& p, TensorView<const float> input,
                      const float* weight, const float* bias, TensorView<float> output) {
  if (p.in_channels / p.groups <= 2 && p.out_channels / p.groups <= 2) {
    conv_transpose1d_direct(p, input, weight, bias, output);
  } else {
    conv_transpose1d_gemm(p, input, weight, bias, output);
  }
}

}  // namespace convbank::detail::cpu
