// The oracle against numbers worked out by hand. Every expected value below was computed on
// paper from the definitions (padded signal written out, then the dot products or the
// scatter), so a mistake in the oracle cannot be copied into its own expectations.
#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <vector>

#include "oracle.hpp"

namespace {

using convbank::Conv1dOptions;
using convbank::ConvTranspose1dOptions;
using convbank::Padding;
using convbank::PaddingMode;
using convbank::Shape;

oracle::Array make(Shape shape, std::initializer_list<double> values) {
  oracle::Array a{shape, std::vector<double>(values)};
  REQUIRE(static_cast<std::int64_t>(a.data.size()) == shape.numel());
  return a;
}

// A (1, 1, n) signal.
oracle::Array signal(std::initializer_list<double> values) {
  return make(Shape{1, 1, static_cast<std::int64_t>(values.size())}, values);
}

void check_equal(const oracle::Array& got, const oracle::Array& expected) {
  REQUIRE(got.shape == expected.shape);
  for (std::size_t i = 0; i < expected.data.size(); ++i) {
    INFO("element " << i);
    CHECK(got.data[i] == doctest::Approx(expected.data[i]).epsilon(1e-14));
  }
}

// Conv1d with a one-tap kernel of weight 1 returns the padded signal itself, which shows the
// index map of a padding mode directly.
oracle::Array padded_by(const oracle::Array& x, std::int64_t padding, PaddingMode mode) {
  Conv1dOptions o{.kernel_size = 1, .padding = padding, .bias = false, .padding_mode = mode};
  return oracle::conv1d(x, signal({1.0}), {}, o);
}

}  // namespace

TEST_CASE("oracle: conv1d stride 2") {
  Conv1dOptions o{.kernel_size = 2, .stride = 2, .bias = false};
  // [1*1 - 2, 3 - 4]
  check_equal(oracle::conv1d(signal({1, 2, 3, 4}), signal({1, -1}), {}, o), signal({-1, -1}));
}

TEST_CASE("oracle: conv1d zero padding and bias") {
  Conv1dOptions o{.kernel_size = 3, .padding = 1};
  // padded [0 1 2 3 0], w [1 2 3]: [0+2+6, 1+4+9, 2+6+0] + 0.5
  check_equal(oracle::conv1d(signal({1, 2, 3}), signal({1, 2, 3}), {0.5}, o),
              signal({8.5, 14.5, 8.5}));
}

TEST_CASE("oracle: conv1d dilation and valid") {
  Conv1dOptions dilated{.kernel_size = 2, .dilation = 2, .bias = false};
  // taps two apart: [1+3, 2+4, 3+5]
  check_equal(oracle::conv1d(signal({1, 2, 3, 4, 5}), signal({1, 1}), {}, dilated),
              signal({4, 6, 8}));
  Conv1dOptions valid{.kernel_size = 3, .padding = Padding::valid(), .bias = false};
  check_equal(oracle::conv1d(signal({1, 2, 3, 4}), signal({1, 1, 1}), {}, valid), signal({6, 9}));
  Conv1dOptions strided{.kernel_size = 2, .stride = 3, .dilation = 2, .bias = false};
  // span 3, outputs at 0 and 3 of 7 frames: [x0 - x2, x3 - x5]
  check_equal(oracle::conv1d(signal({1, 2, 4, 8, 16, 32, 64}), signal({1, -1}), {}, strided),
              signal({-3, -24}));
}

TEST_CASE("oracle: conv1d padding modes") {
  const oracle::Array x = signal({1, 2, 3, 4});
  check_equal(padded_by(x, 2, PaddingMode::kZeros), signal({0, 0, 1, 2, 3, 4, 0, 0}));
  // reflect mirrors about the edge samples without repeating them
  check_equal(padded_by(x, 2, PaddingMode::kReflect), signal({3, 2, 1, 2, 3, 4, 3, 2}));
  check_equal(padded_by(x, 3, PaddingMode::kReflect), signal({4, 3, 2, 1, 2, 3, 4, 3, 2, 1}));
  check_equal(padded_by(x, 2, PaddingMode::kReplicate), signal({1, 1, 1, 2, 3, 4, 4, 4}));
  check_equal(padded_by(x, 2, PaddingMode::kCircular), signal({3, 4, 1, 2, 3, 4, 1, 2}));
  // circular padding may reach the whole length, wrapping exactly once
  check_equal(padded_by(x, 4, PaddingMode::kCircular),
              signal({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
  check_equal(padded_by(signal({5}), 3, PaddingMode::kReplicate), signal({5, 5, 5, 5, 5, 5, 5}));

  // A difference kernel over the reflect-padded [2 1 2 3 4 3]: [2-2, 1-3, 2-4, 3-3]
  Conv1dOptions o{
      .kernel_size = 3, .padding = 1, .bias = false, .padding_mode = PaddingMode::kReflect};
  check_equal(oracle::conv1d(x, signal({1, 0, -1}), {}, o), signal({0, -2, -2, 0}));
}

TEST_CASE("oracle: conv1d same padding puts the odd frame on the right") {
  const oracle::Array x = signal({1, 2, 3, 4, 5});
  // K 4: total 3, left 1, right 2; padded [0 1 2 3 4 5 0 0]
  Conv1dOptions o{.kernel_size = 4, .padding = Padding::same(), .bias = false};
  check_equal(oracle::conv1d(x, signal({1, 0, 0, 0}), {}, o), signal({0, 1, 2, 3, 4}));
  check_equal(oracle::conv1d(x, signal({0, 0, 0, 1}), {}, o), signal({3, 4, 5, 0, 0}));
  // K 2, dilation 3: total 3 as well; taps 3 apart over the same padded signal
  Conv1dOptions d{.kernel_size = 2, .padding = Padding::same(), .dilation = 3, .bias = false};
  check_equal(oracle::conv1d(x, signal({1, 10}), {}, d), signal({30, 41, 52, 3, 4}));
  // replicate, K 2: total 1, all on the right; padded [1 2 3 3]
  Conv1dOptions r{.kernel_size = 2,
                  .padding = Padding::same(),
                  .bias = false,
                  .padding_mode = PaddingMode::kReplicate};
  check_equal(oracle::conv1d(signal({1, 2, 3}), signal({1, 1}), {}, r), signal({3, 5, 6}));
}

TEST_CASE("oracle: conv1d channels, groups and batch") {
  // Two input channels summed into one output: [1*1+2*2 + 3*1+4*0, 1*2+2*3 + 3*0+4*1]
  Conv1dOptions mix{.in_channels = 2, .out_channels = 1, .kernel_size = 2, .bias = false};
  check_equal(
      oracle::conv1d(make({1, 2, 3}, {1, 2, 3, 1, 0, 1}), make({1, 2, 2}, {1, 2, 3, 4}), {}, mix),
      make({1, 1, 2}, {8, 12}));

  // groups 2, two outputs per group: outputs 0,1 see only channel 0, outputs 2,3 channel 1.
  Conv1dOptions grouped{.in_channels = 2, .out_channels = 4, .kernel_size = 1, .groups = 2};
  check_equal(oracle::conv1d(make({1, 2, 2}, {1, 2, 10, 20}), make({4, 1, 1}, {1, 2, 3, 4}),
                             {0, 0, 0, 1}, grouped),
              make({1, 4, 2}, {1, 2, 2, 4, 30, 60, 41, 81}));

  // Two batch items share the weights.
  Conv1dOptions batched{.kernel_size = 2, .bias = false};
  check_equal(oracle::conv1d(make({2, 1, 3}, {1, 2, 3, 0, 1, 0}), signal({1, 2}), {}, batched),
              make({2, 1, 2}, {5, 8, 2, 1}));
}

TEST_CASE("oracle: conv_transpose1d stride 2, padding 1, output_padding 1") {
  ConvTranspose1dOptions o{
      .kernel_size = 3, .stride = 2, .padding = 1, .output_padding = 1, .bias = false};
  // Scatter of [1 2 3] with w [1 2 3] at stride 2 before trimming:
  //   i0: [1 2 3 . . . .]  i1: [. . 2 4 6 . .]  i2: [. . . . 3 6 9]  sum [1 2 5 4 9 6 9]
  // padding 1 drops the first frame; output_padding 1 keeps the last: 6 frames.
  check_equal(oracle::conv_transpose1d(signal({1, 2, 3}), signal({1, 2, 3}), {}, o),
              signal({2, 5, 4, 9, 6, 9}));
  o.output_padding = 0;
  check_equal(oracle::conv_transpose1d(signal({1, 2, 3}), signal({1, 2, 3}), {}, o),
              signal({2, 5, 4, 9, 6}));
}

TEST_CASE("oracle: conv_transpose1d padding, dilation, gaps") {
  // stride 1, padding 1: full [1 3 6 5 3], one frame trimmed from each side
  ConvTranspose1dOptions trim{.kernel_size = 3, .padding = 1, .bias = false};
  check_equal(oracle::conv_transpose1d(signal({1, 2, 3}), signal({1, 1, 1}), {}, trim),
              signal({3, 6, 5}));
  // dilation 2 with output_padding 1 (< dilation): the extra last frame gets only the bias
  ConvTranspose1dOptions dil{.kernel_size = 2, .output_padding = 1, .dilation = 2};
  check_equal(oracle::conv_transpose1d(signal({1, 2}), signal({1, 1}), {0.5}, dil),
              signal({1.5, 2.5, 1.5, 2.5, 0.5}));
  // stride 3 > kernel 1: zeros between the copies
  ConvTranspose1dOptions gaps{.out_channels = 2, .kernel_size = 1, .stride = 3, .bias = false};
  check_equal(oracle::conv_transpose1d(signal({1, 2}), make({1, 2, 1}, {2, -1}), {}, gaps),
              make({1, 2, 4}, {2, 0, 0, 4, -1, 0, 0, -2}));
}

TEST_CASE("oracle: conv_transpose1d groups and channel sums") {
  // groups 2: channel 0 through w[0] = [1 2] into output 0, channel 1 through w[1] = [3 4]
  // into output 1. out0 = [1, 2+1, 2]; out1 = [3, 4-3, -4]
  ConvTranspose1dOptions g{
      .in_channels = 2, .out_channels = 2, .kernel_size = 2, .groups = 2, .bias = false};
  check_equal(oracle::conv_transpose1d(make({1, 2, 2}, {1, 1, 1, -1}),
                                       make({2, 1, 2}, {1, 2, 3, 4}), {}, g),
              make({1, 2, 3}, {1, 3, 2, 3, 1, -4}));
  // groups 1: both input channels add into the one output
  ConvTranspose1dOptions sum{.in_channels = 2, .out_channels = 1, .kernel_size = 2};
  // ch0 [1 2] * w[0]=[1 1] -> [1 3 2]; ch1 [3 4] * w[1]=[1 -1] -> [3 1 -4]; + bias 1
  check_equal(oracle::conv_transpose1d(make({1, 2, 2}, {1, 2, 3, 4}),
                                       make({2, 1, 2}, {1, 1, 1, -1}), {1}, sum),
              make({1, 1, 3}, {5, 5, -1}));
}

TEST_CASE("oracle: measures and conversions") {
  const oracle::Array ref = make({1, 2, 2}, {3, 0, 0, 4});  // norm 5
  convbank::Tensor t = oracle::to_tensor(ref);
  CHECK(t.shape() == ref.shape);
  CHECK(oracle::relative_l2(t, ref) == 0.0);
  CHECK(oracle::max_abs(ref) == 4.0);
  t(0, 1, 1) = 4.5f;  // error 0.5 of norm 5
  CHECK(oracle::relative_l2(t, ref) == doctest::Approx(0.1));
  CHECK(oracle::max_abs_diff(t, ref) == doctest::Approx(0.5));
  t(0, 0, 0) = NAN;
  CHECK(std::isnan(oracle::relative_l2(t, ref)));
  const oracle::Array back = oracle::from_tensor(oracle::to_tensor(ref));
  CHECK(back.data == ref.data);

  std::mt19937_64 rng(1);
  const oracle::Array r = oracle::random_array({2, 3, 5}, rng, 2.0);
  CHECK(r.shape == Shape{2, 3, 5});
  for (double v : r.data) {
    CHECK(std::abs(v) <= 2.0);
    CHECK(static_cast<double>(static_cast<float>(v)) == v);  // float32-exact by construction
  }
}
