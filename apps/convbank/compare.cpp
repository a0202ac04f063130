// `convbank compare`: how far one .npy tensor is from a reference, with the parity rule the
// tests use against PyTorch (max |a - b| <= rtol * max |b| + atol).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "convbank/convbank.hpp"

namespace convbank::app {

void add_compare(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands) {
  struct Options {
    std::string actual, reference;
    double rtol = 1e-5;
    double atol = 1e-6;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Compare a .npy tensor with a reference: exit 0 when max|a-b| <= rtol*max|ref| + atol");
  sub->add_option("actual", opt->actual, "Tensor to check (.npy)")->required();
  sub->add_option("reference", opt->reference, "Reference tensor (.npy), e.g. PyTorch's output")
      ->required();
  sub->add_option("--rtol", opt->rtol, "Tolerance relative to max|reference| (default 1e-5)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--atol", opt->atol, "Absolute tolerance (default 1e-6)")
      ->check(CLI::NonNegativeNumber);
  commands.emplace_back(sub, [opt]() {
    const io::NpyArray a = io::read_npy_array(opt->actual);
    const io::NpyArray b = io::read_npy_array(opt->reference);
    if (a.shape != b.shape) {
      auto text = [](const std::vector<std::int64_t>& s) {
        std::string t = "(";
        for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
        return t + ")";
      };
      throw Error("compare: shape " + text(a.shape) + " of '" + opt->actual + "' differs from " +
                  text(b.shape) + " of '" + opt->reference + "'");
    }
    double max_diff = 0, max_ref = 0, diff2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      const double d = static_cast<double>(a.data[i]) - b.data[i];
      // NaN in either counts as an infinite difference: parity means the same values.
      max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, std::fabs(d));
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(b.data[i])));
      diff2 += d * d;
      ref2 += static_cast<double>(b.data[i]) * b.data[i];
    }
    const double bound = opt->rtol * max_ref + opt->atol;
    const bool ok = max_diff <= bound;
    std::printf("%zu elements: max |diff| %.3g, bound %.3g, relative L2 %.3g: %s\n", a.data.size(),
                max_diff, bound, ref2 > 0 ? std::sqrt(diff2 / ref2) : 0.0,
                ok ? "match" : "MISMATCH");
    return ok ? 0 : 1;
  });
}

}  // namespace convbank::app
