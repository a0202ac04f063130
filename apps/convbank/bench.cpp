// `convbank bench`: times the CPU backend on the workloads of shared/workloads.md (at batch 1
// by default, the CPU table's setting). scripts/bench_cpu.py runs PyTorch on the shapes this
// command writes to its --json file, in the same session, and prints both side by side;
// convbank-bench-cuda does the same on the GPU against cuDNN.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "convbank/convbank.hpp"

namespace convbank::app {

namespace {

struct Workload {
  const char* name;
  bool transpose;
  std::int64_t batch, in_channels, out_channels, frames, kernel_size, stride, padding, dilation,
      groups;
};

// The GPU table of shared/workloads.md; the CPU table runs the same shapes at batch 1 (--batch).
constexpr Workload kWorkloads[] = {
    {"seedA", false, 32, 64, 128, 131072, 3, 1, 0, 1, 1},
    {"seedB", true, 64, 128, 128, 65536, 3, 1, 0, 1, 1},
    {"enc_tasnet", false, 16, 1, 512, 131072, 16, 8, 0, 1, 1},
    {"dec_tasnet", true, 16, 512, 1, 16383, 16, 8, 0, 1, 1},
    {"enc_stft512", false, 16, 1, 514, 131072, 512, 128, 0, 1, 1},
    {"dec_stft512", true, 16, 514, 1, 1021, 512, 128, 0, 1, 1},
    {"tcn_depthwise", false, 16, 512, 512, 16384, 3, 1, 8, 8, 512},
    {"tcn_pointwise", false, 16, 512, 128, 16384, 1, 1, 0, 1, 1},
    {"up2x", true, 8, 64, 32, 65536, 4, 2, 1, 1, 1},
};

// --shape N,Cin,Cout,L,K,stride,padding,dilation,groups (CLI11 read the 9 integers) of --op
// conv1d|conv-transpose1d; the layer's constructor checks the rest.
Workload shape_workload(const std::string& op, const std::vector<std::int64_t>& v) {
  if (v[0] < 1 || v[3] < 1) {
    throw Error("bench: --shape N (" + std::to_string(v[0]) + ") and L (" + std::to_string(v[3]) +
                ") must be >= 1");
  }
  return {"custom", op == "conv-transpose1d", v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
}

void fill_random(Tensor& t, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
}

struct Result {
  std::string name;
  std::string shape;
  double median_ms = 0;
  double min_ms = 0;
  double gflop = 0;
};

template <class Layer>
Result time_layer(const Workload& w, int repeat, Layer& layer) {
  const std::int64_t batch = w.batch;
  Tensor x(Shape{batch, w.in_channels, w.frames});
  fill_random(x, 1);
  Tensor y(layer.output_shape(x.shape()));
  layer.forward(x.view(), y.view());  // warm-up: page in the output, fill caches
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    layer.forward(x.view(), y.view());
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  Result r;
  r.name = w.name;
  r.median_ms = ms[ms.size() / 2];
  r.min_ms = ms.front();
  // Multiply-adds per output (transpose: per input) frame, as the workloads table counts them.
  const std::int64_t frames = w.transpose ? w.frames : y.shape().frames;
  r.gflop = 2.0 * batch * (w.transpose ? w.in_channels : w.out_channels) * frames *
            (w.transpose ? w.out_channels : w.in_channels) / w.groups * w.kernel_size * 1e-9;
  r.shape = std::to_string(batch) + ", " + std::to_string(w.in_channels) + "->" +
            std::to_string(w.out_channels) + ", " + std::to_string(w.frames) + ", K" +
            std::to_string(w.kernel_size) + ", s" + std::to_string(w.stride) + ", p" +
            std::to_string(w.padding) + ", d" + std::to_string(w.dilation) + ", g" +
            std::to_string(w.groups);
  return r;
}

// Calls f with the workload's layer (Conv1d or ConvTranspose1d); the constructor checks the
// arguments.
template <class F>
auto with_layer(const Workload& w, F&& f) {
  if (w.transpose) {
    ConvTranspose1d layer({.in_channels = w.in_channels,
                           .out_channels = w.out_channels,
                           .kernel_size = w.kernel_size,
                           .stride = w.stride,
                           .padding = w.padding,
                           .groups = w.groups,
                           .dilation = w.dilation});
    return f(layer);
  }
  Conv1d layer({.in_channels = w.in_channels,
                .out_channels = w.out_channels,
                .kernel_size = w.kernel_size,
                .stride = w.stride,
                .padding = w.padding,
                .dilation = w.dilation,
                .groups = w.groups});
  return f(layer);
}

Result run_workload(const Workload& w, int repeat) {
  return with_layer(w, [&](auto& layer) {
    Tensor weight(layer.weight().shape());
    fill_random(weight, 2);
    layer.set_weight(weight);
    return time_layer(w, repeat, layer);
  });
}

}  // namespace

void add_bench(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands) {
  struct Options {
    std::vector<std::string> workloads;
    std::int64_t batch = 1;
    int repeat = 10;
    int threads = 0;
    std::string json;
    std::string op;
    std::vector<std::int64_t> shape;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Time the CPU backend on the workloads of shared/workloads.md, or on one --shape "
      "(median of runs)");
  sub->add_option("--workload", opt->workloads,
                  "Workload name(s): seedA seedB enc_tasnet dec_tasnet enc_stft512 dec_stft512 "
                  "tcn_depthwise tcn_pointwise up2x (default: all)");
  CLI::Option* batch = sub->add_option("--batch", opt->batch,
                                       "Batch size of the workloads (default 1, as the CPU table)")
                           ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  CLI::Option* op = sub->add_option("--op", opt->op, "With --shape: the layer to time")
                        ->check(CLI::IsMember({"conv1d", "conv-transpose1d"}));
  CLI::Option* shape = sub->add_option("--shape", opt->shape,
                                       "Time this shape (also): N,Cin,Cout,L,K,stride,padding,"
                                       "dilation,groups, N the batch; needs --op")
                           ->delimiter(',')
                           ->expected(9);
  op->needs(shape);
  shape->needs(op)->excludes(batch);
  sub->add_option("--repeat", opt->repeat, "Timed runs per workload after one warm-up (default 10)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--threads", opt->threads, "CPU threads (default 0: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--json", opt->json, "Also write the results as JSON to this file");
  commands.emplace_back(sub, [opt]() {
    set_num_threads(opt->threads);
    for (const std::string& name : opt->workloads) {
      const bool known = std::any_of(std::begin(kWorkloads), std::end(kWorkloads),
                                     [&](const Workload& w) { return name == w.name; });
      if (!known) throw Error("bench: unknown --workload '" + name + "'");
    }
    // The named workloads at --batch, and the --shape; all workloads when neither is given.
    std::vector<Workload> selected;
    for (const Workload& w : kWorkloads) {
      const bool named =
          std::find(opt->workloads.begin(), opt->workloads.end(), w.name) != opt->workloads.end();
      if (named || (opt->workloads.empty() && opt->shape.empty())) {
        selected.push_back(w);
        selected.back().batch = opt->batch;
      }
    }
    if (!opt->shape.empty()) {
      const Workload w = shape_workload(opt->op, opt->shape);
      // Bad arguments (stride 0, an input shorter than the kernel, ...) fail here, before the
      // table starts.
      with_layer(w, [&](auto& layer) {
        return layer.output_shape(Shape{w.batch, w.in_channels, w.frames});
      });
      selected.push_back(w);
    }
    std::printf("%s, %d threads\n\n", build_info().c_str(), num_threads());
    std::printf("| workload | shape | median ms | min ms | GFLOP/s |\n|---|---|---|---|---|\n");
    nlohmann::json records = nlohmann::json::array();
    for (const Workload& w : selected) {
      const Result r = run_workload(w, opt->repeat);
      std::printf("| %s | %s | %.3f | %.3f | %.1f |\n", r.name.c_str(), r.shape.c_str(),
                  r.median_ms, r.min_ms, r.gflop / (r.median_ms * 1e-3));
      std::fflush(stdout);
      // The layer's arguments too: scripts/bench_cpu.py builds PyTorch's layer from them.
      records.push_back({{"workload", r.name},
                         {"op", w.transpose ? "ConvTranspose1d" : "Conv1d"},
                         {"batch", w.batch},
                         {"in_channels", w.in_channels},
                         {"out_channels", w.out_channels},
                         {"frames", w.frames},
                         {"kernel_size", w.kernel_size},
                         {"stride", w.stride},
                         {"padding", w.padding},
                         {"dilation", w.dilation},
                         {"groups", w.groups},
                         {"threads", num_threads()},
                         {"median_ms", r.median_ms},
                         {"min_ms", r.min_ms},
                         {"gflop", r.gflop}});
    }
    if (!opt->json.empty()) {
      std::ofstream out(opt->json);
      out << records.dump(2) << "\n";
      if (!out) throw Error("bench: cannot write --json file '" + opt->json + "'");
    }
    return 0;
  });
}

}  // namespace convbank::app
