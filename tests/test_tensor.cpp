// Shape, TensorView and Tensor basics, and the proof that sizes and indices are 64-bit: layers
// over a single channel longer than 2^31 frames read the right samples.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/tensor.hpp"

namespace {

using convbank::Conv1d;
using convbank::ConvTranspose1d;
using convbank::Shape;
using convbank::Tensor;
using convbank::TensorView;

void iota(Tensor& t, float start = 0.0f) {
  std::iota(t.data(), t.data() + t.numel(), start);
}

}  // namespace

TEST_CASE("tensor: Shape") {
  constexpr Shape s{2, 3, 5};
  static_assert(s.numel() == 30);
  CHECK(s == Shape{2, 3, 5});
  CHECK(s != Shape{2, 5, 3});
  CHECK(convbank::to_string(s) == "(2, 3, 5)");
  // numel is 64-bit: hours of multi-channel audio exceed 2^31 samples
  CHECK(Shape{4, 64, 1LL << 30}.numel() == (1LL << 38));
  CHECK(Shape{}.numel() == 0);
}

TEST_CASE("tensor: dense views, strides and element access") {
  Tensor t(Shape{2, 3, 4});
  iota(t);
  const TensorView<float> v = t.view();
  CHECK(v.data() == t.data());
  CHECK(v.batch() == 2);
  CHECK(v.channels() == 3);
  CHECK(v.frames() == 4);
  CHECK(v.channel_stride() == 4);
  CHECK(v.batch_stride() == 12);
  CHECK(v.is_dense());
  CHECK(v.device() == convbank::Device::kCpu);
  CHECK(v.channel(1, 2) == t.data() + 12 + 8);
  CHECK(v(1, 2, 3) == 23.0f);
  CHECK(t(1, 2, 3) == 23.0f);
  v(0, 1, 0) = -1.0f;
  CHECK(t(0, 1, 0) == -1.0f);

  // mutable -> const converts implicitly and keeps the strides
  const TensorView<const float> c = v;
  CHECK(c.data() == v.data());
  CHECK(c.batch_stride() == 12);
  static_assert(!std::is_convertible_v<TensorView<const float>, TensorView<float>>);
}

TEST_CASE("tensor: slice_frames and strided views") {
  Tensor t(Shape{2, 3, 10});
  iota(t);
  const TensorView<float> s = t.view().slice_frames(3, 4);
  CHECK(s.shape() == Shape{2, 3, 4});
  CHECK(s.channel_stride() == 10);  // strides of the parent
  CHECK(s.batch_stride() == 30);
  CHECK_FALSE(s.is_dense());
  CHECK(s(0, 0, 0) == 3.0f);
  CHECK(s(1, 2, 3) == 30.0f + 20.0f + 6.0f);
  const TensorView<float> s2 = s.slice_frames(1, 2);  // slices compose
  CHECK(s2(1, 1, 1) == 30.0f + 10.0f + 5.0f);

  // A view with explicit strides: every other channel of the tensor.
  const TensorView<const float> odd(t.data() + 10, Shape{2, 1, 10}, 30, 20);
  CHECK(odd(1, 0, 9) == 30.0f + 10.0f + 9.0f);
  CHECK_FALSE(odd.is_dense());
  // One channel of one batch item spanning the whole row is dense whatever its parent.
  CHECK(TensorView<const float>(t.data(), Shape{1, 1, 10}, 10, 10).is_dense());
}

TEST_CASE("tensor: rank-2 tensors") {
  Tensor u = Tensor::unbatched(3, 7);
  CHECK(u.rank() == 2);
  CHECK(u.shape() == Shape{1, 3, 7});
  CHECK(u.shape_string() == "(3, 7)");
  u.set_rank(3);
  CHECK(u.rank() == 3);
  CHECK(u.shape_string() == "(1, 3, 7)");
  u.set_rank(2);
  CHECK(u.rank() == 2);

  Tensor b(Shape{2, 3, 7});
  CHECK(b.rank() == 3);
  CHECK_THROWS_WITH_AS(b.set_rank(2), doctest::Contains("batch 1"), convbank::Error);
  CHECK_THROWS_WITH_AS(b.set_rank(4), doctest::Contains("rank must be 2 or 3, got 4"),
                       convbank::Error);

  // A rank-2 input gives a rank-2 output, as PyTorch's unbatched Conv1d input does.
  Conv1d layer({.in_channels = 3, .out_channels = 2, .kernel_size = 3});
  Tensor x = Tensor::unbatched(3, 7);
  std::fill(x.data(), x.data() + x.numel(), 1.0f);
  const Tensor y = layer.forward(x);
  CHECK(y.rank() == 2);
  CHECK(y.shape() == Shape{1, 2, 5});
  CHECK(y.shape_string() == "(2, 5)");
  ConvTranspose1d tl({.in_channels = 3, .out_channels = 2, .kernel_size = 3});
  CHECK(tl.forward(x).rank() == 2);
}

TEST_CASE("tensor: clone, to, zeros, empty") {
  Tensor t(Shape{2, 2, 5});
  iota(t, 1.0f);
  t.set_rank(3);
  const Tensor c = t.clone();
  CHECK(c.shape() == t.shape());
  CHECK(c.data() != t.data());
  CHECK(std::memcmp(c.data(), t.data(), sizeof(float) * 20) == 0);
  t(0, 0, 0) = 100.0f;
  CHECK(c(0, 0, 0) == 1.0f);  // a deep copy

  Tensor u = Tensor::unbatched(2, 3);
  iota(u);
  const Tensor uc = u.clone();
  CHECK(uc.rank() == 2);
  const Tensor moved_to = u.to(convbank::Device::kCpu);
  CHECK(moved_to.rank() == 2);
  CHECK(moved_to(0, 1, 2) == 5.0f);

  const Tensor z = Tensor::zeros(Shape{3, 4, 1001});
  CHECK(z.numel() == 3 * 4 * 1001);
  CHECK(std::all_of(z.data(), z.data() + z.numel(), [](float v) { return v == 0.0f; }));

  const Tensor e = Tensor::zeros(Shape{0, 4, 10});
  CHECK(e.empty());
  CHECK(e.numel() == 0);
  const Tensor d;
  CHECK(d.empty());
  CHECK(d.clone().empty());

  // Moving transfers ownership without copying the samples.
  Tensor a(Shape{1, 1, 8});
  const float* p = a.data();
  Tensor b = std::move(a);
  CHECK(b.data() == p);

  CHECK_THROWS_WITH_AS(Tensor(Shape{1, -1, 4}), doctest::Contains("negative dimension"),
                       convbank::Error);
}

TEST_CASE("tensor: host memory is 64-byte aligned") {
  for (std::int64_t frames : {1, 3, 7, 16, 17, 1000, 4097}) {
    const Tensor t(Shape{1, 1, frames});
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
    const Tensor z = Tensor::zeros(Shape{2, 3, frames});
    CHECK(reinterpret_cast<std::uintptr_t>(z.data()) % 64 == 0);
    const Tensor c = z.clone();
    CHECK(reinterpret_cast<std::uintptr_t>(c.data()) % 64 == 0);
  }
}

TEST_CASE("tensor: copy between views with different strides") {
  Tensor src(Shape{2, 3, 8});
  iota(src);
  Tensor dst = Tensor::zeros(Shape{2, 5, 12});
  // frames 2..6 of every channel of src into channels 1..3, frames 4..8 of dst
  const TensorView<const float> from = src.view().slice_frames(2, 5);
  const TensorView<float> to(dst.data() + 12 + 4, Shape{2, 3, 5}, 60, 12);
  convbank::copy(from, to);
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t c = 0; c < 5; ++c) {
      for (std::int64_t t = 0; t < 12; ++t) {
        const bool inside = c >= 1 && c <= 3 && t >= 4 && t < 9;
        const float want = inside ? src(b, c - 1, t - 4 + 2) : 0.0f;
        INFO("b " << b << " c " << c << " t " << t);
        CHECK(dst(b, c, t) == want);
      }
    }
  }
  // and back into a dense tensor
  Tensor back(Shape{2, 3, 5});
  convbank::copy(TensorView<const float>(to), back.view());
  CHECK(back(1, 2, 4) == src(1, 2, 6));

  CHECK_THROWS_WITH_AS(
      convbank::copy(src.view(), back.view()),
      doctest::Contains("source shape (2, 3, 8) differs from destination (2, 3, 5)"),
      convbank::Error);
}

// ---------------------------------------------------------------------------------------------
// 64-bit indexing. The input is one channel of 2^31 + 10 frames (8 GiB), allocated
// uninitialized so that only the pages holding the samples a layer reads are ever touched;
// each test writes exactly those samples. AddressSanitizer accepts the allocation as well
// (its shadow pages are mapped lazily too), so these tests run in sanitizer builds.

namespace {

constexpr std::int64_t kLong = (std::int64_t{1} << 31) + 10;

// A small integer-valued pattern: exact in float32, different for neighbouring indices.
float pattern(std::int64_t i) {
  return static_cast<float>(i % 1021 - 510);
}

}  // namespace

TEST_CASE("tensor: Conv1d K=1 with stride 65536 over 2^31 + 10 frames") {
  constexpr std::int64_t kStride = 65536;
  Tensor x(Shape{1, 1, kLong});
  const std::int64_t out_frames = (kLong - 1) / kStride + 1;  // 32769
  REQUIRE(out_frames == 32769);
  for (std::int64_t t = 0; t < out_frames; ++t) x(0, 0, t * kStride) = pattern(t * kStride);

  // One output channel takes the direct path, three the GEMM (im2col) path.
  for (std::int64_t out_channels : {1, 3}) {
    INFO("out_channels " << out_channels);
    Conv1d layer(
        {.in_channels = 1, .out_channels = out_channels, .kernel_size = 1, .stride = kStride});
    Tensor w(Shape{out_channels, 1, 1});
    Tensor bias(Shape{1, 1, out_channels});
    for (std::int64_t o = 0; o < out_channels; ++o) {
      w(o, 0, 0) = static_cast<float>(2 + o);
      bias(0, 0, o) = 0.5f;
    }
    layer.set_weight(w);
    layer.set_bias(bias);
    REQUIRE(layer.output_frames(kLong) == out_frames);
    const Tensor y = layer.forward(x);
    REQUIRE(y.shape() == Shape{1, out_channels, out_frames});
    std::int64_t wrong = 0;
    for (std::int64_t o = 0; o < out_channels; ++o) {
      for (std::int64_t t = 0; t < out_frames; ++t) {
        const float want = static_cast<float>(2 + o) * pattern(t * kStride) + 0.5f;
        if (y(0, o, t) != want) ++wrong;
      }
      // The last output reads sample 2^31 itself.
      CHECK(y(0, o, out_frames - 1) ==
            static_cast<float>(2 + o) * pattern(std::int64_t{1} << 31) + 0.5f);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("tensor: Conv1d K=2 with a dilation beyond 2^31") {
  // dilation 2^31 + 1: output t reads x[t] and x[t + 2^31 + 1], so the second tap reads only
  // samples beyond 2^31, and dilation * (K - 1) itself does not fit in 32 bits.
  constexpr std::int64_t kDilation = (std::int64_t{1} << 31) + 1;
  Tensor x(Shape{1, 1, kLong});
  const std::int64_t out_frames = kLong - kDilation;  // 9
  for (std::int64_t t = 0; t < out_frames; ++t) {
    x(0, 0, t) = pattern(t);
    x(0, 0, t + kDilation) = pattern(t + kDilation);
  }
  for (std::int64_t out_channels : {1, 3}) {
    INFO("out_channels " << out_channels);
    Conv1d layer({.in_channels = 1,
                  .out_channels = out_channels,
                  .kernel_size = 2,
                  .dilation = kDilation,
                  .bias = false});
    Tensor w(Shape{out_channels, 1, 2});
    for (std::int64_t o = 0; o < out_channels; ++o) {
      w(o, 0, 0) = 1.0f;
      w(o, 0, 1) = static_cast<float>(1000 * (o + 1));
    }
    layer.set_weight(w);
    const Tensor y = layer.forward(x);
    REQUIRE(y.shape() == Shape{1, out_channels, out_frames});
    for (std::int64_t o = 0; o < out_channels; ++o) {
      for (std::int64_t t = 0; t < out_frames; ++t) {
        INFO("o " << o << " t " << t);
        CHECK(y(0, o, t) ==
              pattern(t) + static_cast<float>(1000 * (o + 1)) * pattern(t + kDilation));
      }
    }
  }
}

TEST_CASE("tensor: ConvTranspose1d output longer than 2^31 frames") {
  // (2^16 + 1 - 1) * 2^15 + (K - 1) + 1 = 2^31 + 5 frames from a short input.
  ConvTranspose1d layer({.kernel_size = 5, .stride = 1 << 15});
  const std::int64_t in_frames = (1 << 16) + 1;
  CHECK(layer.output_frames(in_frames) == (std::int64_t{1} << 31) + 5);
  CHECK(layer.output_shape(Shape{3, 1, in_frames}) == Shape{3, 1, (std::int64_t{1} << 31) + 5});
  // Running it would write 8 GiB of output (every frame gets at least the bias): the shape
  // check is the affordable part.
}
