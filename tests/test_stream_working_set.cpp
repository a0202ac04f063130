// Offline forward() on inputs longer than the working-set limit runs in pieces; its output must
// be bit-identical to whole-buffer processing on every CPU path (direct, GEMM, Winograd,
// transpose) and padding mode, since pieces are whole multiples of the backend's blocks.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/runtime.hpp"
#include "convbank/tensor.hpp"
#include "stream_helpers.hpp"

namespace {

using convbank::Shape;
using convbank::Tensor;

struct WorkingSetGuard {
  ~WorkingSetGuard() { convbank::set_working_set_frames(0); }
};

template <class Layer>
void check_pieces_equal_whole(const Layer& layer, const Tensor& x, std::int64_t limit) {
  convbank::set_working_set_frames(0);
  const Tensor whole = layer.forward(x);
  convbank::set_working_set_frames(limit);
  const Tensor pieces = layer.forward(x);
  convbank::set_working_set_frames(0);
  CHECK(stream_test::bit_equal(pieces, whole));
}

}  // namespace

TEST_CASE("stream: working-set limit splits long offline calls with identical output") {
  WorkingSetGuard guard;
  CHECK(convbank::working_set_frames() == (std::int64_t{1} << 22));
  CHECK_THROWS_AS(convbank::set_working_set_frames(-1), convbank::Error);
  std::mt19937_64 rng(404);
  auto pick = [&](std::vector<std::int64_t> v) { return v[rng() % v.size()]; };
  int checked = 0;
  for (int i = 0; i < 120; ++i) {
    convbank::Conv1dOptions o;
    const bool wide = i % 3 == 0;
    o.in_channels = wide ? pick({16, 32}) : pick({1, 2, 4});
    o.out_channels = wide ? pick({16, 24}) : pick({1, 2, 6});
    o.groups = (o.in_channels % 2 == 0 && o.out_channels % 2 == 0) ? pick({1, 2}) : 1;
    o.kernel_size = wide && i % 2 == 0 ? 3 : pick({1, 3, 5, 16});
    o.stride = wide && i % 2 == 0 ? 1 : pick({1, 2, 3, 8});
    o.dilation = pick({1, 1, 2});
    o.padding = pick({0, 1, 4, 7});
    if (o.kernel_size == 3 && o.stride == 1 && rng() % 2 == 0) o.dilation = 1;  // Winograd
    o.padding_mode = o.padding.frames() > 0 && rng() % 3 == 0
                         ? static_cast<convbank::PaddingMode>(rng() % 4)
                         : convbank::PaddingMode::kZeros;
    o.bias = rng() % 2 == 0;
    convbank::Conv1d conv(o);
    conv.set_weight(stream_test::random_tensor(
        Shape{o.out_channels, o.in_channels / o.groups, o.kernel_size}, rng));
    if (o.bias) conv.set_bias(stream_test::random_tensor(Shape{1, 1, o.out_channels}, rng));
    const std::int64_t frames = pick({300, 1000, 3001, 9000});
    const Tensor x = stream_test::random_tensor(Shape{pick({1, 2}), o.in_channels, frames}, rng);
    CAPTURE(i);
    CAPTURE(frames);
    check_pieces_equal_whole(conv, x, pick({1, 37, 100, 700, 2048}));

    convbank::ConvTranspose1dOptions t;
    t.in_channels = wide ? pick({16, 32}) : pick({1, 2, 4});
    t.out_channels = wide ? pick({1, 16}) : pick({1, 2});
    t.groups = (t.in_channels % 2 == 0 && t.out_channels % 2 == 0) ? pick({1, 2}) : 1;
    t.kernel_size = pick({1, 3, 4, 16});
    t.stride = pick({1, 2, 8});
    t.dilation = pick({1, 2});
    t.padding = pick({0, 1, 3});
    t.output_padding = t.stride > 1 ? pick({0, 1}) : 0;
    t.bias = rng() % 2 == 0;
    convbank::ConvTranspose1d tr(t);
    tr.set_weight(stream_test::random_tensor(
        Shape{t.in_channels, t.out_channels / t.groups, t.kernel_size}, rng));
    if (t.bias) tr.set_bias(stream_test::random_tensor(Shape{1, 1, t.out_channels}, rng));
    const Tensor xt =
        stream_test::random_tensor(Shape{pick({1, 2}), t.in_channels, frames / 4 + 1}, rng);
    check_pieces_equal_whole(tr, xt, pick({1, 37, 100, 700, 2048}));
    ++checked;
  }
  CHECK(checked == 120);
}
