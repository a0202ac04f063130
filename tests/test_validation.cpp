// Every configuration-time error: the layer must throw convbank::Error, and the message must
// name the layer, the argument, the offending value and the rule, as design.md asks.
#include <doctest/doctest.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/tensor.hpp"

namespace {

using convbank::Conv1d;
using convbank::Conv1dOptions;
using convbank::ConvTranspose1d;
using convbank::ConvTranspose1dOptions;
using convbank::Padding;
using convbank::PaddingMode;
using convbank::Shape;
using convbank::Tensor;

template <class Fn>
void check_error(const char* file, int line, Fn&& fn,
                 std::initializer_list<std::string_view> parts) {
  std::string message;
  try {
    fn();
  } catch (const convbank::Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAIL_AT(file, line, "threw something other than convbank::Error: " << e.what());
    return;
  }
  if (message.empty()) {
    ADD_FAIL_AT(file, line, "no convbank::Error thrown");
    return;
  }
  for (std::string_view part : parts) {
    if (message.find(part) == std::string::npos) {
      ADD_FAIL_AT(file, line, "'" << part << "' is missing from the message: " << message);
    }
  }
}

// CHECK_ERROR(expression, "part", "part", ...): the expression throws convbank::Error whose
// message contains every part.
#define CHECK_ERROR(expr, ...) check_error(__FILE__, __LINE__, [&] { (void)(expr); }, {__VA_ARGS__})

Conv1d conv(Conv1dOptions o) {
  return Conv1d(o);
}
ConvTranspose1d transpose(ConvTranspose1dOptions o) {
  return ConvTranspose1d(o);
}

}  // namespace

TEST_CASE("validation: the error type is a std::runtime_error") {
  bool caught = false;
  try {
    Conv1d layer(Conv1dOptions{.kernel_size = 0});
  } catch (const std::runtime_error& e) {
    caught = dynamic_cast<const convbank::Error*>(&e) != nullptr;
  }
  CHECK(caught);
}

TEST_CASE("validation: channels not divisible by groups") {
  CHECK_ERROR(conv({.in_channels = 3, .out_channels = 4, .groups = 2}),
              "Conv1d: ", "in_channels must be divisible by groups", "in_channels 3", "groups 2");
  CHECK_ERROR(conv({.in_channels = 4, .out_channels = 3, .groups = 2}),
              "Conv1d: ", "out_channels must be divisible by groups", "out_channels 3", "groups 2");
  CHECK_ERROR(transpose({.in_channels = 6, .out_channels = 4, .groups = 4}),
              "ConvTranspose1d: ", "in_channels must be divisible by groups", "in_channels 6",
              "groups 4");
  CHECK_ERROR(transpose({.in_channels = 4, .out_channels = 6, .groups = 4}),
              "ConvTranspose1d: ", "out_channels must be divisible by groups", "out_channels 6",
              "groups 4");
  CHECK_ERROR(conv({.groups = 0}), "Conv1d: ", "groups must be a positive integer, got 0");
  CHECK_ERROR(transpose({.groups = -2}), "ConvTranspose1d: ", "groups", "got -2");
  CHECK_ERROR(conv({.in_channels = 0}), "in_channels must be >= 1, got 0");
  CHECK_ERROR(transpose({.out_channels = 0}), "out_channels must be >= 1, got 0");
  // groups == channels (depthwise) and channel multipliers are fine
  CHECK_NOTHROW(conv({.in_channels = 8, .out_channels = 24, .groups = 8}));
  CHECK_NOTHROW(transpose({.in_channels = 8, .out_channels = 8, .groups = 8}));
}

TEST_CASE("validation: kernel_size, stride and dilation below 1") {
  CHECK_ERROR(conv({.kernel_size = 0}), "Conv1d: ", "kernel_size must be >= 1, got 0");
  CHECK_ERROR(conv({.stride = 0}), "Conv1d: ", "stride must be >= 1, got 0");
  CHECK_ERROR(conv({.stride = -3}), "stride must be >= 1, got -3");
  CHECK_ERROR(conv({.dilation = 0}), "Conv1d: ", "dilation must be >= 1, got 0");
  CHECK_ERROR(transpose({.kernel_size = -1}),
              "ConvTranspose1d: ", "kernel_size must be >= 1, got -1");
  CHECK_ERROR(transpose({.stride = 0}), "ConvTranspose1d: ", "stride must be >= 1, got 0");
  CHECK_ERROR(transpose({.dilation = 0}), "ConvTranspose1d: ", "dilation must be >= 1, got 0");
}

TEST_CASE("validation: negative padding") {
  CHECK_ERROR(conv({.padding = -1}), "Conv1d: ", "padding must be >= 0, got -1");
  CHECK_ERROR(transpose({.padding = -2}), "ConvTranspose1d: ", "padding must be >= 0, got -2");
  CHECK_ERROR(transpose({.output_padding = -1}),
              "ConvTranspose1d: ", "output_padding must be >= 0, got -1");
}

TEST_CASE("validation: output_padding must be smaller than stride or dilation") {
  CHECK_ERROR(transpose({.kernel_size = 3, .stride = 2, .output_padding = 2}),
              "ConvTranspose1d: ", "output_padding must be smaller than either stride or dilation",
              "output_padding 2", "stride 2", "dilation 1");
  CHECK_ERROR(transpose({.kernel_size = 3, .stride = 3, .output_padding = 4, .dilation = 4}),
              "output_padding 4", "stride 3", "dilation 4");
  CHECK_ERROR(transpose({.output_padding = 1}), "output_padding 1", "stride 1", "dilation 1");
  // At the limit, through either rule, PyTorch accepts it.
  CHECK_NOTHROW(transpose({.kernel_size = 3, .stride = 4, .output_padding = 3}));
  CHECK_NOTHROW(transpose({.kernel_size = 3, .stride = 1, .output_padding = 2, .dilation = 3}));
}

TEST_CASE("validation: padding same with stride > 1") {
  CHECK_ERROR(conv({.kernel_size = 3, .stride = 2, .padding = Padding::same()}),
              "Conv1d: ", "padding='same' is not supported for strided convolutions", "stride 2");
  CHECK_NOTHROW(conv({.kernel_size = 4, .stride = 1, .padding = Padding::same()}));
  CHECK_NOTHROW(conv({.kernel_size = 3, .stride = 2, .padding = Padding::valid()}));
}

TEST_CASE("validation: reflect padding not smaller than the input") {
  const Conv1d layer =
      conv({.kernel_size = 3, .padding = 2, .padding_mode = PaddingMode::kReflect});
  CHECK_ERROR(layer.output_frames(2), "Conv1d: ", "reflect padding (left 2, right 2)",
              "must be smaller than the input length 2");
  CHECK_ERROR(layer.forward(Tensor::zeros(Shape{1, 1, 1})), "reflect padding", "input length 1");
  CHECK(layer.output_frames(3) == 5);
  // "same" with an odd total pads one frame more on the right: that side decides.
  const Conv1d same =
      conv({.kernel_size = 4, .padding = Padding::same(), .padding_mode = PaddingMode::kReflect});
  CHECK_ERROR(same.output_frames(2), "reflect padding (left 1, right 2)", "input length 2");
  CHECK(same.output_frames(3) == 3);
}

TEST_CASE("validation: circular padding larger than the input") {
  const Conv1d layer =
      conv({.kernel_size = 3, .padding = 3, .padding_mode = PaddingMode::kCircular});
  CHECK_ERROR(layer.output_frames(2), "Conv1d: ", "circular padding (left 3, right 3)",
              "must not exceed the input length 2");
  CHECK(layer.output_frames(3) == 7);  // wrapping exactly once is allowed
}

TEST_CASE("validation: empty or negative input length") {
  // PyTorch: "Only zero batch or zero channel inputs are supported" — zero frames is an error
  // for every padding mode, even when padding alone would give output frames.
  const Conv1d layer =
      conv({.kernel_size = 1, .padding = 1, .padding_mode = PaddingMode::kReplicate});
  CHECK_ERROR(layer.output_frames(0), "Conv1d: ", "input frames must be >= 1, got 0");
  CHECK_ERROR(conv({.kernel_size = 1, .padding = 2}).output_frames(0), "input frames must be >= 1");
  CHECK_ERROR(conv({}).output_frames(-1), "Conv1d: ", "input frames must be >= 1, got -1");
  CHECK_ERROR(transpose({}).output_frames(0),
              "ConvTranspose1d: ", "input frames must be >= 1, got 0");
}

TEST_CASE("validation: input too short for the kernel") {
  const Conv1d layer = conv({.kernel_size = 5, .padding = 1});
  CHECK_ERROR(layer.output_frames(2), "Conv1d: ", "calculated output size is too small",
              "input frames 2", "padding 1 + 1 = 4", "dilation * (kernel_size - 1) + 1 = 5");
  CHECK(layer.output_frames(3) == 1);
  const Conv1d dilated = conv({.kernel_size = 3, .padding = Padding::valid(), .dilation = 4});
  CHECK_ERROR(dilated.forward(Tensor::zeros(Shape{2, 1, 8})), "calculated output size is too small",
              "input frames 8", "= 9");

  const ConvTranspose1d t = transpose({.kernel_size = 3, .stride = 2, .padding = 3});
  // (2 - 1) * 2 - 6 + 2 + 0 + 1 = -1
  CHECK_ERROR(t.output_frames(2), "ConvTranspose1d: ", "calculated output size is too small",
              "input frames 2", "stride 2", "padding 3", "kernel_size 3", "= -1", "must be >= 1");
  CHECK_ERROR(t.forward(Tensor::zeros(Shape{1, 1, 2})), "calculated output size is too small");
  CHECK(t.output_frames(3) == 1);
}

TEST_CASE("validation: weight shape mismatch") {
  Conv1d c = conv({.in_channels = 4, .out_channels = 6, .kernel_size = 3, .groups = 2});
  CHECK_ERROR(c.set_weight(Tensor::zeros(Shape{6, 4, 3})), "Conv1d: ", "weight shape mismatch",
              "expected (6, 2, 3)", "(out_channels, in_channels / groups, kernel_size)",
              "got (6, 4, 3)");
  CHECK_NOTHROW(c.set_weight(Tensor::zeros(Shape{6, 2, 3})));

  ConvTranspose1d t =
      transpose({.in_channels = 4, .out_channels = 6, .kernel_size = 3, .groups = 2});
  CHECK_ERROR(t.set_weight(Tensor::zeros(Shape{6, 2, 3})),
              "ConvTranspose1d: ", "weight shape mismatch", "expected (4, 3, 3)",
              "(in_channels, out_channels / groups, kernel_size)", "got (6, 2, 3)");
  CHECK_NOTHROW(t.set_weight(Tensor::zeros(Shape{4, 3, 3})));
}

TEST_CASE("validation: bias shape mismatch") {
  Conv1d c = conv({.in_channels = 2, .out_channels = 6});
  CHECK_ERROR(c.set_bias(Tensor::zeros(Shape{1, 1, 5})), "Conv1d: ", "bias shape mismatch",
              "expected (6) = (out_channels)", "got (1, 1, 5)");
  // Six values but not in one row.
  CHECK_ERROR(c.set_bias(Tensor::zeros(Shape{1, 2, 3})), "bias shape mismatch", "got (1, 2, 3)");
  CHECK_NOTHROW(c.set_bias(Tensor::zeros(Shape{1, 1, 6})));
  CHECK_NOTHROW(c.set_bias(Tensor::unbatched(1, 6)));

  ConvTranspose1d t = transpose({.in_channels = 2, .out_channels = 3});
  CHECK_ERROR(t.set_bias(Tensor::zeros(Shape{1, 1, 2})), "ConvTranspose1d: ", "bias shape mismatch",
              "expected (3)", "got (1, 1, 2)");

  Conv1d no_bias = conv({.bias = false});
  CHECK_ERROR(no_bias.set_bias(Tensor::zeros(Shape{1, 1, 1})), "Conv1d: ", "bias = false");
  ConvTranspose1d t_no_bias = transpose({.bias = false});
  CHECK_ERROR(t_no_bias.set_bias(Tensor::zeros(Shape{1, 1, 1})),
              "ConvTranspose1d: ", "bias = false");
}

TEST_CASE("validation: input channels differ from the layer's") {
  const Conv1d c = conv({.in_channels = 2, .out_channels = 3, .kernel_size = 3});
  CHECK_ERROR(c.forward(Tensor::zeros(Shape{1, 3, 10})), "Conv1d: ", "input (1, 3, 10)",
              "has 3 channels", "in_channels = 2");
  CHECK_ERROR(c.output_shape(Shape{4, 1, 10}), "has 1 channels", "in_channels = 2");
  const ConvTranspose1d t = transpose({.in_channels = 4, .out_channels = 2});
  CHECK_ERROR(t.forward(Tensor::zeros(Shape{2, 2, 10})), "ConvTranspose1d: ", "input (2, 2, 10)",
              "has 2 channels", "in_channels = 4");
}

TEST_CASE("validation: caller-allocated output of the wrong shape") {
  const Conv1d c = conv({.kernel_size = 3});
  Tensor x = Tensor::zeros(Shape{1, 1, 10});
  Tensor y = Tensor::zeros(Shape{1, 1, 9});
  CHECK_ERROR(c.forward(x.view(), y.view()), "Conv1d: ", "output shape (1, 1, 9)",
              "expected (1, 1, 8)", "input (1, 1, 10)");
  const ConvTranspose1d t = transpose({.kernel_size = 3});
  CHECK_ERROR(t.forward(x.view(), y.view()), "ConvTranspose1d: ", "output shape (1, 1, 9)",
              "expected (1, 1, 12)");
}

TEST_CASE("validation: Padding::parse") {
  CHECK(Padding::parse("same").kind() == Padding::Kind::kSame);
  CHECK(Padding::parse("valid").kind() == Padding::Kind::kValid);
  CHECK(Padding::parse("0").frames() == 0);
  CHECK(Padding::parse("17").frames() == 17);
  CHECK(Padding::parse("17").kind() == Padding::Kind::kExplicit);
  CHECK(Padding::parse("17").to_string() == "17");
  CHECK(Padding::same().to_string() == "same");
  CHECK(Padding::valid().to_string() == "valid");
  for (const char* bad : {"-1", "", "abc", "1.5", "Same", " 3", "3 ", "+3", "full"}) {
    INFO("text '" << bad << "'");
    CHECK_ERROR(Padding::parse(bad), "padding must be a non-negative integer, 'same' or 'valid'",
                std::string("got '") + bad + "'");
  }
  // The caller names the argument, e.g. the command-line flag.
  CHECK_ERROR(Padding::parse("x", "--analysis-padding"), "--analysis-padding must be", "got 'x'");
  // Too many digits for int64 must not wrap around to a small or negative padding.
  CHECK_ERROR(Padding::parse("99999999999999999999"), "got '99999999999999999999'");
}

TEST_CASE("validation: parse_padding_mode") {
  CHECK(convbank::parse_padding_mode("zeros") == PaddingMode::kZeros);
  CHECK(convbank::parse_padding_mode("reflect") == PaddingMode::kReflect);
  CHECK(convbank::parse_padding_mode("replicate") == PaddingMode::kReplicate);
  CHECK(convbank::parse_padding_mode("circular") == PaddingMode::kCircular);
  for (PaddingMode m : {PaddingMode::kZeros, PaddingMode::kReflect, PaddingMode::kReplicate,
                        PaddingMode::kCircular}) {
    CHECK(convbank::parse_padding_mode(convbank::to_string(m)) == m);
  }
  for (const char* bad : {"mirror", "", "Zeros", "reflection", "zero"}) {
    INFO("text '" << bad << "'");
    CHECK_ERROR(convbank::parse_padding_mode(bad),
                "padding_mode must be one of zeros, reflect, replicate, circular",
                std::string("got '") + bad + "'");
  }
  CHECK_ERROR(convbank::parse_padding_mode("wrap", "--mode"), "--mode must be one of",
              "got 'wrap'");
}
