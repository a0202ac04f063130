// Our layers against real PyTorch output. data/fixtures/torch holds cases made by
// tests/tools/make_torch_cases.py (nn.Conv1d / nn.ConvTranspose1d, float32, fixed seeds); the
// same cases also check the float64 oracle, so the oracle every other test trusts is itself
// tied to PyTorch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "convbank/conv.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/tensor.hpp"
#include "oracle.hpp"

namespace {

using convbank::Tensor;
using nlohmann::json;

const std::string kFixtureDir = std::string(CONVBANK_DATA_DIR) + "/fixtures/torch/";

json load_manifest() {
  std::ifstream in(kFixtureDir + "cases.json");
  REQUIRE_MESSAGE(in.good(), "cannot open " << kFixtureDir
                                            << "cases.json; regenerate with /usr/bin/python3 "
                                               "tests/tools/make_torch_cases.py");
  return json::parse(in);
}

Tensor load(const json& c, const char* key) {
  return convbank::io::read_npy(kFixtureDir + c.at("files").at(key).get<std::string>());
}

convbank::Conv1dOptions conv_options(const json& a) {
  convbank::Conv1dOptions o;
  o.in_channels = a.at("in_channels").get<std::int64_t>();
  o.out_channels = a.at("out_channels").get<std::int64_t>();
  o.kernel_size = a.at("kernel_size").get<std::int64_t>();
  o.stride = a.at("stride").get<std::int64_t>();
  const json& padding = a.at("padding");
  o.padding = padding.is_string() ? convbank::Padding::parse(padding.get<std::string>())
                                  : convbank::Padding(padding.get<std::int64_t>());
  o.dilation = a.at("dilation").get<std::int64_t>();
  o.groups = a.at("groups").get<std::int64_t>();
  o.bias = a.at("bias").get<bool>();
  o.padding_mode = convbank::parse_padding_mode(a.at("padding_mode").get<std::string>());
  return o;
}

convbank::ConvTranspose1dOptions transpose_options(const json& a) {
  convbank::ConvTranspose1dOptions o;
  o.in_channels = a.at("in_channels").get<std::int64_t>();
  o.out_channels = a.at("out_channels").get<std::int64_t>();
  o.kernel_size = a.at("kernel_size").get<std::int64_t>();
  o.stride = a.at("stride").get<std::int64_t>();
  o.padding = a.at("padding").get<std::int64_t>();
  o.output_padding = a.at("output_padding").get<std::int64_t>();
  o.groups = a.at("groups").get<std::int64_t>();
  o.bias = a.at("bias").get<bool>();
  o.dilation = a.at("dilation").get<std::int64_t>();
  return o;
}

std::vector<double> to_vector(const Tensor& t) {
  return std::vector<double>(t.data(), t.data() + t.numel());
}

struct Result {
  Tensor ours;
  oracle::Array reference;  // the float64 oracle on the same float32 inputs
};

template <class Layer, class Options>
Result run(const Options& o, const json& c) {
  Layer layer(o);
  const Tensor weight = load(c, "weight");
  layer.set_weight(weight);
  std::vector<double> bias;
  if (o.bias) {
    const Tensor b = load(c, "bias");
    layer.set_bias(b);
    bias = to_vector(b);
  }
  const Tensor x = load(c, "x");
  Tensor y = layer.forward(x);
  oracle::Array ref;
  if constexpr (std::is_same_v<Options, convbank::Conv1dOptions>) {
    ref = oracle::conv1d(oracle::from_tensor(x), oracle::from_tensor(weight), bias, o);
  } else {
    ref = oracle::conv_transpose1d(oracle::from_tensor(x), oracle::from_tensor(weight), bias, o);
  }
  return {std::move(y), std::move(ref)};
}

}  // namespace

TEST_CASE("torch: every fixture case matches PyTorch's output") {
  const json manifest = load_manifest();
  const json& cases = manifest.at("cases");
  REQUIRE(cases.size() >= 40);
  MESSAGE(cases.size() << " cases from PyTorch " << manifest.value("torch_version", "?"));

  std::set<std::string> seen;  // which arguments took a non-default value somewhere
  double worst = 0.0;
  std::string worst_case;
  for (const json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    const std::string op = c.at("op").get<std::string>();
    const json& args = c.at("args");
    INFO("case " << name << " (" << op << " " << args.dump() << ")");
    REQUIRE((op == "conv1d" || op == "conv_transpose1d"));

    Result r = op == "conv1d" ? run<convbank::Conv1d>(conv_options(args), c)
                              : run<convbank::ConvTranspose1d>(transpose_options(args), c);
    const Tensor expected = load(c, "output");
    const bool unbatched = c.at("input_shape").size() == 2;
    CHECK(r.ours.rank() == (unbatched ? 2 : 3));
    CHECK(expected.rank() == r.ours.rank());
    REQUIRE(r.ours.shape() == expected.shape());

    const oracle::Array torch_out = oracle::from_tensor(expected);
    const double bound = 1e-5 * oracle::max_abs(torch_out) + 1e-6;
    const double ours = oracle::max_abs_diff(r.ours, torch_out);
    CHECK_MESSAGE(ours <= bound, "max |ours - torch| = " << ours << " > " << bound);
    // The oracle must agree with PyTorch to the same bound, or it could not judge anyone.
    const double ref = oracle::max_abs_diff(oracle::to_tensor(r.reference), torch_out);
    CHECK_MESSAGE(ref <= bound, "max |oracle - torch| = " << ref << " > " << bound);
    if (ours / bound > worst) {
      worst = ours / bound;
      worst_case = name;
    }

    for (auto it = args.begin(); it != args.end(); ++it) {
      const json& v = it.value();
      const bool non_default =
          (it.key() == "padding_mode" && v != "zeros") || (it.key() == "bias" && v == false) ||
          (it.key() == "padding" && (v.is_string() || v.get<std::int64_t>() > 0)) ||
          ((it.key() == "stride" || it.key() == "dilation" || it.key() == "groups") && v != 1) ||
          (it.key() == "output_padding" && v != 0);
      if (non_default)
        seen.insert(op + "." + it.key() + (v.is_string() ? "=" + v.get<std::string>() : ""));
    }
    if (unbatched) seen.insert(op + ".unbatched");
  }
  MESSAGE("worst case " << worst_case << " at " << worst << " of the bound");

  // The fixtures must keep covering every argument of both ops.
  for (const char* key :
       {"conv1d.stride", "conv1d.padding", "conv1d.padding=same", "conv1d.padding=valid",
        "conv1d.dilation", "conv1d.groups", "conv1d.bias", "conv1d.padding_mode=reflect",
        "conv1d.padding_mode=replicate", "conv1d.padding_mode=circular", "conv1d.unbatched",
        "conv_transpose1d.stride", "conv_transpose1d.padding", "conv_transpose1d.output_padding",
        "conv_transpose1d.groups", "conv_transpose1d.bias", "conv_transpose1d.dilation",
        "conv_transpose1d.unbatched"}) {
    CHECK_MESSAGE(seen.count(key) == 1, "no fixture case covers " << key);
  }
}
