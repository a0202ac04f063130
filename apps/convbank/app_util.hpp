// Pieces the subcommands share: output safety (never overwrite an input, never leave a partial
// file), --device parsing, and the progress bar.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "convbank/convbank.hpp"

namespace convbank::app {

// Throws Error when `output` (named `flag` on the command line) is one of the `inputs` (flag,
// path), by path or, through links, by file.
void refuse_overwrite(const std::string& output, const char* flag,
                      const std::vector<std::pair<const char*, std::string>>& inputs);

// "cpu" | "cuda"; throws Error for anything else, or cuda without a usable device.
Device parse_device(const std::string& text);

// Output written to "<path>.tmp-<pid>" and renamed over <path> only once complete: a failed run
// leaves no output file. The constructor checks the directory up front, so a long run does not
// fail only at its end; the destructor removes an uncommitted temporary.
class TemporaryOutput {
 public:
  TemporaryOutput(std::string path, std::string flag);
  ~TemporaryOutput();
  TemporaryOutput(const TemporaryOutput&) = delete;
  TemporaryOutput& operator=(const TemporaryOutput&) = delete;

  const std::string& temp_path() const { return temp_; }
  const std::string& path() const { return path_; }
  // Writes `tensor` as .npy to the temporary path and commits.
  void write(const Tensor& tensor);
  // Renames the temporary over the final path.
  void commit();

 private:
  std::string path_;
  std::string flag_;
  std::string temp_;
  bool committed_ = false;
};

// A one-line progress bar on stderr, drawn only when stderr is a terminal and not --quiet,
// redrawn at most 10 times a second.
class ProgressBar {
 public:
  ProgressBar(std::string label, std::int64_t total, bool enabled);
  ~ProgressBar();
  void update(std::int64_t done);
  void finish();  // clears the line

 private:
  std::string label_;
  std::int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace convbank::app
