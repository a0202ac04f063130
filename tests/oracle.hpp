// The naive float64 reference for Conv1d and ConvTranspose1d: loops written straight from
// PyTorch's definitions, sharing no code with any backend. Everything else is checked against
// it (and it is itself checked against hand-computed cases and real PyTorch output).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/tensor.hpp"

namespace oracle {

// Dense (batch, channels, frames) float64 data.
struct Array {
  convbank::Shape shape;
  std::vector<double> data;
  double& operator()(std::int64_t b, std::int64_t c, std::int64_t t) {
    return data[static_cast<std::size_t>((b * shape.channels + c) * shape.frames + t)];
  }
  double operator()(std::int64_t b, std::int64_t c, std::int64_t t) const {
    return data[static_cast<std::size_t>((b * shape.channels + c) * shape.frames + t)];
  }
};

// weight in PyTorch layout as an Array: Conv1d (out, in/groups, K), transpose (in, out/groups, K).
// bias: empty vector when the layer has none. Output length by PyTorch's formulas.
Array conv1d(const Array& input, const Array& weight, const std::vector<double>& bias,
             const convbank::Conv1dOptions& options);
Array conv_transpose1d(const Array& input, const Array& weight, const std::vector<double>& bias,
                       const convbank::ConvTranspose1dOptions& options);

// Conversions and measures used by every accuracy test.
Array from_tensor(const convbank::Tensor& t);
convbank::Tensor to_tensor(const Array& a);  // rounds to float32
Array random_array(convbank::Shape shape, std::mt19937_64& rng, double scale = 1.0);
// ||got - ref||_2 / ||ref||_2 (0 when both are zero).
double relative_l2(const convbank::Tensor& got, const Array& ref);
double max_abs(const Array& a);
double max_abs_diff(const convbank::Tensor& got, const Array& ref);

}  // namespace oracle
