// `convbank conv1d / conv-transpose1d --chunk`: the app streams the input through the stream API
// and must write the offline output (bit for bit on direct-path shapes, 1e-6 otherwise).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/tensor.hpp"
#include "stream_helpers.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using convbank::Shape;
using convbank::Tensor;
namespace io = convbank::io;

constexpr const char* kApp = CONVBANK_APP_PATH;

struct Run {
  int exit_code = -1;
  std::string err;
};

Run run_app(const fs::path& dir, const std::vector<std::string>& args) {
  const std::string err_path = (dir / "stderr.txt").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> argv_strings = {kApp};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, kApp, &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_path);
  run.err = {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return run;
}

struct Dir {
  fs::path path;
  Dir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("convbank-test-stream-app-" + std::to_string(::getpid()) +
                                        "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void check_same(const Tensor& got, const Tensor& expected, bool exact) {
  REQUIRE(got.shape() == expected.shape());
  CHECK(got.rank() == expected.rank());
  if (exact) {
    CHECK(stream_test::bit_equal(got, expected));
  } else {
    CHECK(stream_test::relative_l2(got, expected) <= 1e-6);
  }
}

}  // namespace

TEST_CASE("stream: app --chunk writes the offline output") {
  if (std::string(kApp).empty()) return;
  Dir d;
  std::mt19937_64 rng(17);
  const Tensor x3 = stream_test::random_tensor(Shape{2, 4, 301}, rng);
  Tensor x2 = stream_test::random_tensor(Shape{1, 4, 301}, rng);
  x2.set_rank(2);
  io::write_npy(d.file("x3.npy"), x3);
  io::write_npy(d.file("x2.npy"), x2);
  // groups 2: (4 -> 4) is a direct-path shape (bit-exact), (4 -> 12) a GEMM shape.
  for (std::int64_t out : {4, 12}) {
    CAPTURE(out);
    const Tensor w = stream_test::random_tensor(Shape{out, 2, 5}, rng);
    const Tensor b = stream_test::random_tensor(Shape{1, 1, out}, rng);
    io::write_npy(d.file("w.npy"), w);
    io::write_npy(d.file("b.npy"), {out}, b.data());
    convbank::Conv1d conv({.in_channels = 4,
                           .out_channels = out,
                           .kernel_size = 5,
                           .stride = 3,
                           .padding = 4,
                           .dilation = 2,
                           .groups = 2});
    conv.set_weight(w);
    conv.set_bias(b);
    const Tensor wt = stream_test::random_tensor(Shape{4, out / 2, 7}, rng);
    io::write_npy(d.file("wt.npy"), wt);
    convbank::ConvTranspose1d tr({.in_channels = 4,
                                  .out_channels = out,
                                  .kernel_size = 7,
                                  .stride = 3,
                                  .padding = 2,
                                  .output_padding = 1,
                                  .groups = 2});
    tr.set_weight(wt);
    tr.set_bias(b);
    for (const char* input : {"x3.npy", "x2.npy"}) {
      for (const char* chunk : {"1", "7", "random:5:1:13", "1000"}) {
        CAPTURE(input);
        CAPTURE(chunk);
        const Tensor& x = std::string(input) == "x3.npy" ? x3 : x2;
        Run r = run_app(d.path,
                        {"conv1d", "--input", d.file(input), "--weight", d.file("w.npy"), "--bias",
                         d.file("b.npy"), "--stride", "3", "--padding", "4", "--dilation", "2",
                         "--groups", "2", "--chunk", chunk, "--output", d.file("y.npy")});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        check_same(io::read_npy(d.file("y.npy")), conv.forward(x), out == 4);
        r = run_app(d.path, {"conv-transpose1d", "--input", d.file(input), "--weight",
                             d.file("wt.npy"), "--bias", d.file("b.npy"), "--stride", "3",
                             "--padding", "2", "--output-padding", "1", "--groups", "2", "--chunk",
                             chunk, "--output", d.file("yt.npy")});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        check_same(io::read_npy(d.file("yt.npy")), tr.forward(x), out == 4);
      }
    }
  }
}

TEST_CASE("stream: app --chunk rejects bad values and circular padding, streams reflect") {
  if (std::string(kApp).empty()) return;
  Dir d;
  std::mt19937_64 rng(2);
  io::write_npy(d.file("x.npy"), stream_test::random_tensor(Shape{1, 1, 50}, rng));
  io::write_npy(d.file("w.npy"), stream_test::random_tensor(Shape{1, 1, 3}, rng));
  auto conv = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"conv1d",        "--input",  d.file("x.npy"), "--weight",
                                     d.file("w.npy"), "--output", d.file("y.npy")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_app(d.path, args);
  };
  for (const char* bad : {"0", "abc", "random:1:0:5", "random:1:5:4", "random:1:5", "-3"}) {
    CAPTURE(bad);
    const Run r = conv({"--chunk", bad});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("--chunk") != std::string::npos);
    CHECK_FALSE(fs::exists(d.file("y.npy")));
  }
  // Reflect padding streams (the CPU) and equals the offline run; circular cannot stream.
  const Run offline = conv({"--padding", "1", "--padding-mode", "reflect"});
  REQUIRE(offline.exit_code == 0);
  const Tensor whole = io::read_npy(d.file("y.npy"));
  fs::remove(d.file("y.npy"));
  const Run chunked =
      conv({"--chunk", "random:7:1:9", "--padding", "1", "--padding-mode", "reflect"});
  REQUIRE(chunked.exit_code == 0);
  CHECK(stream_test::relative_l2(io::read_npy(d.file("y.npy")), whole) <= 1e-6);
  fs::remove(d.file("y.npy"));
  const Run r = conv({"--chunk", "8", "--padding", "1", "--padding-mode", "circular"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("cannot stream") != std::string::npos);
  CHECK_FALSE(fs::exists(d.file("y.npy")));
  const Run help = run_app(d.path, {"conv1d", "--help"});
  CHECK(help.exit_code == 0);
}
