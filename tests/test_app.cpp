// The convbank app's conv1d / conv-transpose1d: outputs equal the library's forward() bit for
// bit, and every failure prints one "convbank: error: " line, exits non-zero and leaves the
// output directory as it was (no output file, no temporary file).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app_helpers.hpp"
#include "convbank/conv.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/runtime.hpp"
#include "convbank/tensor.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using convbank::Shape;
using convbank::Tensor;
namespace io = convbank::io;

constexpr const char* kApp = CONVBANK_APP_PATH;

using app_test::read_text;
using app_test::Run;
using app_test::run_app;
using app_test::TempDir;

bool have_app() {
  if (std::string(kApp).empty()) {
    MESSAGE("the convbank app is not built (CONVBANK_BUILD_APPS=OFF): skipping");
    return false;
  }
  return true;
}

Tensor random_tensor(Shape shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
  return t;
}

Tensor random_unbatched(std::int64_t channels, std::int64_t frames, std::mt19937& rng) {
  Tensor t = random_tensor(Shape{1, channels, frames}, rng);
  t.set_rank(2);
  return t;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Inputs for every case: Conv1d weight (6, 2, 5) for groups 2 (in 4, out 6), ConvTranspose1d
// weight (4, 3, 7) for groups 2 (in 4, out 6), inputs with 4 channels (and 3, to mismatch).
struct Fixture {
  TempDir dir{"work"};
  Tensor x3, x2, w, b, wt, bt;

  Fixture() {
    std::mt19937 rng(7);
    x3 = random_tensor(Shape{2, 4, 50}, rng);
    x2 = random_unbatched(4, 50, rng);
    w = random_tensor(Shape{6, 2, 5}, rng);
    wt = random_tensor(Shape{4, 3, 7}, rng);
    Tensor bias = random_tensor(Shape{1, 1, 6}, rng);
    io::write_npy(file("x3.npy"), x3);
    io::write_npy(file("x2.npy"), x2);
    io::write_npy(file("x_3ch.npy"), random_tensor(Shape{2, 3, 50}, rng));
    io::write_npy(file("w.npy"), w);
    io::write_npy(file("wt.npy"), wt);
    io::write_npy(file("b.npy"), {6}, bias.data());
    io::write_npy(file("w_rank2.npy"), {6, 10}, w.data());
    b = bias.clone();
    bt = bias.clone();
  }
  std::string file(const std::string& name) const { return dir.file(name); }
};

void check_equal(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  REQUIRE(got.rank() == expected.rank());
  std::int64_t mismatches = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) mismatches += got.data()[i] != expected.data()[i];
  CHECK(mismatches == 0);
}

void check_success(const Run& run) {
  INFO("stderr: " << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.empty());
}

// A failed run: exit != 0, exactly one stderr line "convbank: error: ..." containing `part`,
// and the output directory exactly as before (no output, no temporary file).
void check_failure(const Fixture& f, const std::vector<std::string>& args, const std::string& part,
                   const std::string& output) {
  const std::vector<std::string> before = listing(f.dir.path());
  const Run run = run_app(args);
  INFO("stderr: " << run.err);
  CHECK(run.exit_code != 0);
  REQUIRE_FALSE(run.err.empty());
  CHECK(run.err.rfind("convbank: error: ", 0) == 0);
  CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
  CHECK(run.err.back() == '\n');
  CHECK(run.err.find(part) != std::string::npos);
  const std::vector<std::string> after = listing(f.dir.path());
  CHECK(after == before);
  for (const std::string& name : after) CHECK(name.find(".tmp-") == std::string::npos);
  if (std::find(before.begin(), before.end(), fs::path(output).filename().string()) ==
      before.end()) {
    CHECK_FALSE(fs::exists(output));
  }
}

}  // namespace

TEST_CASE("app: conv1d equals the library's Conv1d, batched and unbatched") {
  if (!have_app()) return;
  Fixture f;
  convbank::Conv1dOptions o;
  o.in_channels = 4;
  o.out_channels = 6;
  o.kernel_size = 5;
  o.stride = 2;
  o.padding = 3;
  o.dilation = 2;
  o.groups = 2;
  convbank::Conv1d layer(o);
  layer.set_weight(f.w);
  layer.set_bias(f.b);

  for (const char* input : {"x3.npy", "x2.npy"}) {
    CAPTURE(input);
    const std::string out = f.file(std::string("y_") + input);
    const Run run =
        run_app({"conv1d", "--input", f.file(input), "--weight", f.file("w.npy"), "--bias",
                 f.file("b.npy"), "--stride", "2", "--padding", "3", "--dilation", "2", "--groups",
                 "2", "--threads", "1", "--output", out});
    check_success(run);
    const Tensor& x = std::string(input) == "x3.npy" ? f.x3 : f.x2;
    const Tensor y = io::read_npy(out);
    check_equal(y, layer.forward(x));
    CHECK(io::read_npy_shape(out).size() == (x.rank() == 2 ? 2u : 3u));
  }
  for (const std::string& name : listing(f.dir.path()))
    CHECK(name.find(".tmp-") == std::string::npos);
}

TEST_CASE("app: conv1d with --padding same and --padding-mode reflect") {
  if (!have_app()) return;
  Fixture f;
  convbank::Conv1dOptions o;
  o.in_channels = 4;
  o.out_channels = 6;
  o.kernel_size = 5;
  o.padding = convbank::Padding::same();
  o.dilation = 2;
  o.groups = 2;
  o.bias = false;
  o.padding_mode = convbank::PaddingMode::kReflect;
  convbank::Conv1d layer(o);
  layer.set_weight(f.w);

  const std::string out = f.file("y_same.npy");
  check_success(run_app({"conv1d", "--input", f.file("x3.npy"), "--weight", f.file("w.npy"),
                         "--padding", "same", "--padding-mode", "reflect", "--dilation", "2",
                         "--groups", "2", "--output", out}));
  const Tensor y = io::read_npy(out);
  CHECK(y.shape() == Shape{2, 6, 50});
  check_equal(y, layer.forward(f.x3));
}

TEST_CASE("app: conv-transpose1d equals the library's ConvTranspose1d, batched and unbatched") {
  if (!have_app()) return;
  Fixture f;
  convbank::ConvTranspose1dOptions o;
  o.in_channels = 4;
  o.out_channels = 6;
  o.kernel_size = 7;
  o.stride = 3;
  o.padding = 2;
  o.output_padding = 1;
  o.groups = 2;
  convbank::ConvTranspose1d layer(o);
  layer.set_weight(f.wt);
  layer.set_bias(f.bt);

  for (const char* input : {"x3.npy", "x2.npy"}) {
    CAPTURE(input);
    const std::string out = f.file(std::string("yt_") + input);
    check_success(
        run_app({"conv-transpose1d", "--input", f.file(input), "--weight", f.file("wt.npy"),
                 "--bias", f.file("b.npy"), "--stride", "3", "--padding", "2", "--output-padding",
                 "1", "--groups", "2", "--output", out}));
    const Tensor& x = std::string(input) == "x3.npy" ? f.x3 : f.x2;
    const Tensor y = io::read_npy(out);
    check_equal(y, layer.forward(x));
    CHECK(y.shape().frames == (50 - 1) * 3 - 2 * 2 + (7 - 1) + 1 + 1);
  }
}

TEST_CASE("app: --help describes both layer commands") {
  if (!have_app()) return;
  const Run conv = run_app({"conv1d", "--help"});
  CHECK(conv.exit_code == 0);
  for (const char* option :
       {"--input", "--weight", "--bias", "--stride", "--padding", "--padding-mode", "--dilation",
        "--groups", "--device", "--threads", "--output"}) {
    CHECK_MESSAGE(conv.out.find(option) != std::string::npos, option);
  }
  const Run transpose = run_app({"conv-transpose1d", "--help"});
  CHECK(transpose.exit_code == 0);
  CHECK(transpose.out.find("--output-padding") != std::string::npos);
  CHECK(transpose.out.find("--padding-mode") == std::string::npos);
}

// Every field of `expected` has its value in the `convbank bench --json` record.
void check_record(const nlohmann::json& record, const nlohmann::json& expected) {
  for (const auto& [key, value] : expected.items()) {
    CAPTURE(key);
    CHECK(record[key] == value);
  }
}

TEST_CASE("app: bench --json records each workload's layer arguments and time") {
  // scripts/bench_cpu.py builds PyTorch's layers from these records.
  if (!have_app()) return;
  TempDir dir("bench");
  const std::string path = dir.file("bench.json");
  const Run run = run_app({"bench", "--workload", "tcn_depthwise", "up2x", "--repeat", "1",
                           "--threads", "1", "--json", path});
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(read_text(path));
  REQUIRE(j.size() == 2);
  check_record(j[0], {{"workload", "tcn_depthwise"},
                      {"op", "Conv1d"},
                      {"batch", 1},
                      {"in_channels", 512},
                      {"out_channels", 512},
                      {"frames", 16384},
                      {"kernel_size", 3},
                      {"stride", 1},
                      {"padding", 8},
                      {"dilation", 8},
                      {"groups", 512}});
  check_record(j[1], {{"workload", "up2x"},
                      {"op", "ConvTranspose1d"},
                      {"stride", 2},
                      {"in_channels", 64},
                      {"out_channels", 32}});
  for (const auto& r : j) {
    CHECK(r["threads"] == 1);
    CHECK(r["median_ms"].get<double>() > 0.0);
    CHECK(r["gflop"].get<double>() > 0.0);
  }
  const Run bad = run_app({"bench", "--workload", "seedC"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("seedC") != std::string::npos);
}

TEST_CASE("app: bench --op/--shape times one shape of the user's") {
  if (!have_app()) return;
  TempDir dir("bench_shape");
  const std::string path = dir.file("bench.json");
  const Run run = run_app({"bench", "--op", "conv-transpose1d", "--shape", "2,16,8,301,5,3,1,2,4",
                           "--repeat", "1", "--threads", "1", "--json", path});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const nlohmann::json j = nlohmann::json::parse(read_text(path));
  REQUIRE(j.size() == 1);
  check_record(j[0], {{"workload", "custom"},
                      {"op", "ConvTranspose1d"},
                      {"batch", 2},
                      {"in_channels", 16},
                      {"out_channels", 8},
                      {"frames", 301},
                      {"kernel_size", 5},
                      {"stride", 3},
                      {"padding", 1},
                      {"dilation", 2},
                      {"groups", 4}});
  CHECK(j[0]["median_ms"].get<double>() > 0.0);
  // Each bad shape fails before any timing, naming the value and the rule.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--op", "conv1d", "--shape", "1,64,128"}, "--shape: At least 9 required but received 3"},
      {{"--op", "conv1d", "--shape", "1,64,128,1x,3,1,0,1,1"}, "Could not convert: --shape"},
      {{"--op", "conv1d", "--shape", "1,64,128,100,3,0,0,1,1"}, "stride must be >= 1, got 0"},
      {{"--op", "conv1d", "--shape", "1,64,128,2,5,1,0,1,1"}, "shorter than the dilated kernel"},
      {{"--op", "conv1d", "--shape", "0,64,128,100,3,1,0,1,1"}, "N (0) and L (100) must be >= 1"},
      {{"--shape", "1,64,128,100,3,1,0,1,1"}, "--shape requires --op"},
      {{"--op", "conv2d", "--shape", "1,64,128,100,3,1,0,1,1"}, "conv2d"},
  };
  for (const auto& [args, message] : bad) {
    std::vector<std::string> argv = {"bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    const Run r = run_app(argv);
    CAPTURE(message);
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(r.out.find("| workload |") == std::string::npos);
  }
}

TEST_CASE("app: bench-stream --json records one row per chunk and batch") {
  // scripts/bench_stream.py reads these rows.
  if (!have_app()) return;
  TempDir dir("bench_stream");
  const std::string path = dir.file("stream.json");
  const Run run = run_app(
      {"bench-stream", "--chunks", "64", "300", "--batches", "2", "--count", "40", "--json", path});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const nlohmann::json j = nlohmann::json::parse(read_text(path));
  REQUIRE(j.size() == 2);
  CHECK(j[0]["chunk"] == 64);
  CHECK(j[1]["chunk"] == 300);
  for (const auto& r : j) {
    CHECK(r["device"] == "cpu");
    CHECK(r["batch"] == 2);
    CHECK(r["count"] == 40);
    const double p50 = r["p50_us"], p99 = r["p99_us"], max = r["max_us"], mean = r["mean_us"];
    CHECK(p50 > 0.0);
    CHECK(p50 <= p99);
    CHECK(p99 <= max);
    CHECK(mean <= max);
  }
}

TEST_CASE("app: failures print one error line and leave no output or temporary file") {
  if (!have_app()) return;
  Fixture f;
  const std::string out = f.file("y.npy");
  const auto conv = [&](std::vector<std::string> extra, const std::string& output = "") {
    std::vector<std::string> args = {"conv1d",
                                     "--weight",
                                     f.file("w.npy"),
                                     "--groups",
                                     "2",
                                     "--output",
                                     output.empty() ? out : output};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const auto transpose = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "conv-transpose1d", "--input", f.file("x3.npy"), "--weight", f.file("wt.npy"),
        "--output",         out};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };

  SUBCASE("missing input file") {
    check_failure(f, conv({"--input", f.file("missing.npy")}), "missing.npy': cannot open", out);
  }
  SUBCASE("weight of rank 2") {
    check_failure(
        f,
        {"conv1d", "--input", f.file("x3.npy"), "--weight", f.file("w_rank2.npy"), "--output", out},
        "has shape (6, 10) (rank 2); the weight must have rank 3", out);
  }
  SUBCASE("bias of the wrong size") {
    check_failure(f, transpose({"--groups", "1", "--bias", f.file("b.npy")}),
                  "expected (out_channels,) = (3,)", out);
  }
  SUBCASE("input channels differ from the weight's") {
    check_failure(f, conv({"--input", f.file("x_3ch.npy")}), "in_channels = 4", out);
  }
  SUBCASE("bad --padding-mode") {
    check_failure(f, conv({"--input", f.file("x3.npy"), "--padding-mode", "mirror"}),
                  "--padding-mode must be one of zeros, reflect, replicate, circular", out);
  }
  SUBCASE("bad --padding") {
    check_failure(f, conv({"--input", f.file("x3.npy"), "--padding", "half"}),
                  "--padding must be a non-negative integer, 'same' or 'valid', got 'half'", out);
  }
  SUBCASE("--padding same with a stride") {
    check_failure(f, conv({"--input", f.file("x3.npy"), "--padding", "same", "--stride", "2"}),
                  "padding='same' is not supported for strided convolutions", out);
  }
  SUBCASE("output_padding >= stride") {
    check_failure(f, transpose({"--groups", "2", "--stride", "2", "--output-padding", "2"}),
                  "output_padding must be smaller than either stride or dilation", out);
  }
  SUBCASE("bad --device") {
    check_failure(f, conv({"--input", f.file("x3.npy"), "--device", "gpu"}),
                  "--device must be cpu or cuda, got 'gpu'", out);
  }
  SUBCASE("--device cuda without a usable CUDA device") {
    if (!convbank::cuda_available()) {
      check_failure(f, conv({"--input", f.file("x3.npy"), "--device", "cuda"}), "cuda", out);
    }
  }
  SUBCASE("output directory missing") {
    const std::string nowhere = f.file("no_dir/y.npy");
    check_failure(f, conv({"--input", f.file("x3.npy")}, nowhere),
                  "directory '" + f.file("no_dir") + "' does not exist", nowhere);
  }
  SUBCASE("output is a directory: refused before any work") {
    const std::string dir_out = f.file("y_dir.npy");
    fs::create_directories(dir_out);
    check_failure(f, conv({"--input", f.file("x3.npy")}, dir_out), "is a directory", dir_out);
  }
}

TEST_CASE("app: refuses to overwrite an input") {
  if (!have_app()) return;
  Fixture f;
  const std::string x_bytes = read_text(f.file("x3.npy"));
  const std::string w_bytes = read_text(f.file("w.npy"));
  const auto refused = [&](const std::string& output, const std::string& flag) {
    check_failure(f,
                  {"conv1d", "--input", f.file("x3.npy"), "--weight", f.file("w.npy"), "--bias",
                   f.file("b.npy"), "--groups", "2", "--output", output},
                  "is the same file as " + flag, output);
  };
  SUBCASE("same path as --input") {
    refused(f.file("x3.npy"), "--input");
  }
  SUBCASE("another spelling of --weight") {
    refused((f.dir.path() / "." / "w.npy").string(), "--weight");
  }
  SUBCASE("a symbolic link to --bias") {
    fs::create_symlink(f.file("b.npy"), f.file("link.npy"));
    refused(f.file("link.npy"), "--bias");
  }
  CHECK(read_text(f.file("x3.npy")) == x_bytes);
  CHECK(read_text(f.file("w.npy")) == w_bytes);
}
