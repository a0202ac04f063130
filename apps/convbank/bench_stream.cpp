// `convbank bench-stream`: per-chunk latency of the streaming API, host buffer in to host
// buffer out, for the TasNet chain of shared/workloads.md (Conv1d 1->512 K16 s8, then
// ConvTranspose1d 512->1 K16 s8, random weights). --device cpu (default): one thread, the
// stream runs on the caller's thread, as in an audio callback. --device cuda: the chain is
// prepared on the GPU (pinned staging, graph replay per chunk length; the warm-up chunks
// capture the graphs), and each timed call is process() from the host input view to the host
// output view, cudaStreamSynchronize included. scripts/bench_stream.py runs PyTorch on the
// same chain in the same session and prints both side by side.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "convbank/convbank.hpp"

namespace convbank::app {

namespace {

struct StreamBenchArgs {
  std::vector<std::int64_t> chunks = {64, 128, 256, 512, 1024, 4096};
  std::vector<std::int64_t> batches = {1, 8};
  std::int64_t count = 10000;
  std::string device = "cpu";
  std::string json;
};

void fill_random(Tensor& t, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
}

struct Row {
  std::int64_t chunk = 0, batch = 0, count = 0;
  double p50_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
};

double percentile(std::vector<double>& sorted, double q) {
  const std::size_t i = std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()));
  return sorted[i];
}

int run_bench_stream(const StreamBenchArgs& a) {
  if (a.count < 1) throw Error("--count must be >= 1, got " + std::to_string(a.count));
  if (a.device != "cpu" && a.device != "cuda") {
    throw Error("--device must be cpu or cuda, got '" + a.device + "'");
  }
  const Device device = a.device == "cuda" ? Device::kCuda : Device::kCpu;
  set_num_threads(1);
  auto enc = std::make_shared<Conv1d>(
      Conv1dOptions{.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8});
  auto dec = std::make_shared<ConvTranspose1d>(ConvTranspose1dOptions{
      .in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8});
  Tensor we(Shape{512, 1, 16}), wd(Shape{512, 1, 16}), be(Shape{1, 1, 512}), bd(Shape{1, 1, 1});
  fill_random(we, 1, 0.25f);
  fill_random(wd, 2, 0.05f);
  fill_random(be, 3, 0.1f);
  fill_random(bd, 4, 0.1f);
  enc->set_weight(we);
  enc->set_bias(be);
  dec->set_weight(wd);
  dec->set_bias(bd);

  std::vector<Row> rows;
  std::printf(
      "TasNet chain (Conv1d 1->512 K16 s8 -> ConvTranspose1d 512->1 K16 s8), device %s, one "
      "thread, %lld chunks each, microseconds per chunk (host buffer in -> host buffer out)\n",
      a.device.c_str(), static_cast<long long>(a.count));
  std::printf("%8s %6s %10s %10s %10s %10s\n", "chunk", "batch", "p50", "p99", "max", "mean");
  for (std::int64_t batch : a.batches) {
    for (std::int64_t chunk : a.chunks) {
      if (chunk < 1 || batch < 1) throw Error("--chunks and --batches must be >= 1");
      StreamChain chain;
      chain.add(enc).add(dec);
      chain.prepare(chunk, batch, device);
      // A ring of distinct input chunks, so the timing does not hinge on one cached buffer.
      constexpr std::int64_t kRing = 16;
      Tensor input(Shape{batch, 1, chunk * kRing});
      fill_random(input, 5, 1.0f);
      Tensor output(Shape{batch, 1, chain.max_output_frames(chunk) + chain.max_flush_frames()});
      std::vector<double> us(static_cast<std::size_t>(a.count));
      const std::int64_t warmup = std::min<std::int64_t>(200, a.count);
      for (std::int64_t i = -warmup; i < a.count; ++i) {
        const std::int64_t slot = ((i % kRing) + kRing) % kRing;
        std::int64_t frames = 0;
        const auto t0 = std::chrono::steady_clock::now();
        const Status st =
            chain.process(input.view().slice_frames(slot * chunk, chunk), output.view(), &frames);
        const auto t1 = std::chrono::steady_clock::now();
        if (st != Status::kOk) throw Error("bench-stream: process() failed");
        if (i >= 0) {
          us[static_cast<std::size_t>(i)] =
              std::chrono::duration<double, std::micro>(t1 - t0).count();
        }
      }
      Row r;
      r.chunk = chunk;
      r.batch = batch;
      r.count = a.count;
      for (double v : us) r.mean_us += v / static_cast<double>(us.size());
      std::sort(us.begin(), us.end());
      r.p50_us = percentile(us, 0.50);
      r.p99_us = percentile(us, 0.99);
      r.max_us = us.back();
      rows.push_back(r);
      std::printf("%8lld %6lld %10.1f %10.1f %10.1f %10.1f\n", static_cast<long long>(chunk),
                  static_cast<long long>(batch), r.p50_us, r.p99_us, r.max_us, r.mean_us);
      std::fflush(stdout);
    }
  }
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out) throw Error("--json '" + a.json + "': cannot open for writing");
    nlohmann::json records = nlohmann::json::array();
    for (const Row& r : rows) {
      records.push_back({{"device", a.device},
                         {"chunk", r.chunk},
                         {"batch", r.batch},
                         {"count", r.count},
                         {"p50_us", r.p50_us},
                         {"p99_us", r.p99_us},
                         {"max_us", r.max_us},
                         {"mean_us", r.mean_us}});
    }
    out << records.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

void add_bench_stream(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands) {
  auto args = std::make_shared<StreamBenchArgs>();
  CLI::App* b = app.add_subcommand(
      "bench-stream",
      "Per-chunk latency (p50/p99/max) of the stream API on the TasNet encoder -> decoder "
      "chain, host buffer in to host buffer out (CPU: one thread; CUDA: graph replay)");
  b->add_option("--chunks", args->chunks, "Chunk lengths in frames")->capture_default_str();
  b->add_option("--batches", args->batches, "Batch sizes (independent streams)")
      ->capture_default_str();
  b->add_option("--count", args->count, "Timed chunks per configuration (after 200 warm-up)")
      ->capture_default_str();
  b->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  b->add_option("--json", args->json, "Also write the results as JSON to this file");
  commands.emplace_back(b, [args] { return run_bench_stream(*args); });
}

}  // namespace convbank::app
