// Uses the installed public API only: a 3-tap moving sum over a short ramp.
#include <convbank/convbank.hpp>

#include <cstdio>

int main() {
  try {
    convbank::Conv1d layer({.in_channels = 1, .out_channels = 1, .kernel_size = 3, .bias = false});
    convbank::Tensor w(convbank::Shape{1, 1, 3});
    for (int k = 0; k < 3; ++k) w(0, 0, k) = 1.0f;
    layer.set_weight(w);

    convbank::Tensor x(convbank::Shape{1, 1, 5});
    for (int t = 0; t < 5; ++t) x(0, 0, t) = static_cast<float>(t + 1);  // 1 2 3 4 5
    const convbank::Tensor y = layer.forward(x);                         // 6 9 12

    if (y.shape() != convbank::Shape{1, 1, 3} || y(0, 0, 0) != 6.0f || y(0, 0, 2) != 12.0f) {
      std::fprintf(stderr, "consumer: unexpected output %s\n", y.shape_string().c_str());
      return 1;
    }
    std::printf("consumer: ok, %s\n", convbank::build_info().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: error: %s\n", e.what());
    return 1;
  }
}
