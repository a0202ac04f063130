#include "app_util.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace convbank::app {

namespace fs = std::filesystem;

void refuse_overwrite(const std::string& output, const char* flag,
                      const std::vector<std::pair<const char*, std::string>>& inputs) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(output, ec);
  for (const auto& [in_flag, path] : inputs) {
    if (path.empty()) continue;
    std::error_code ec_in, ec_same;
    const fs::path in = fs::weakly_canonical(path, ec_in);
    const bool same_path = !ec && !ec_in && out == in;
    const bool same_file = fs::equivalent(output, path, ec_same) && !ec_same;
    if (same_path || same_file) {
      throw Error(std::string(flag) + " '" + output + "' is the same file as " + in_flag + " '" +
                  path + "'; refusing to overwrite an input");
    }
  }
}

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::kCpu;
  if (text == "cuda") {
    if (!cuda_built()) {
      throw Error("--device cuda: this convbank was built without the CUDA backend");
    }
    if (!cuda_available()) {
      throw Error("--device cuda: this convbank has the CUDA backend but no CUDA device is usable");
    }
    return Device::kCuda;
  }
  throw Error("--device must be cpu or cuda, got '" + text + "'");
}

TemporaryOutput::TemporaryOutput(std::string path, std::string flag)
    : path_(std::move(path)),
      flag_(std::move(flag)),
      temp_(path_ + ".tmp-" + std::to_string(::getpid())) {
  const fs::path parent = fs::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    throw Error(flag_ + " '" + path_ + "': directory '" + parent.string() + "' does not exist");
  }
  if (fs::is_directory(path_, ec)) throw Error(flag_ + " '" + path_ + "' is a directory");
}

TemporaryOutput::~TemporaryOutput() {
  if (!committed_) {
    std::error_code ignored;
    fs::remove(temp_, ignored);
  }
}

void TemporaryOutput::write(const Tensor& tensor) {
  io::write_npy(temp_, tensor);
  commit();
}

void TemporaryOutput::commit() {
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    throw Error(flag_ + " '" + path_ + "': cannot rename '" + temp_ +
                "' to it: " + std::strerror(errno));
  }
  committed_ = true;
}

ProgressBar::ProgressBar(std::string label, std::int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled && ::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::update(std::int64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done < total_) return;
  last_ = now;
  drawn_ = true;
  const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(done) / total_) : 0.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  char eta[32] = "";
  if (frac > 0.01 && frac < 1.0) {
    std::snprintf(eta, sizeof eta, " eta %.0fs", elapsed / frac - elapsed);
  }
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %.1fs%s\033[K", label_.c_str(), bar.c_str(), frac * 100,
               elapsed, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace convbank::app
