// Running the convbank app from tests: a temporary directory, and a run that captures the exit
// code, stdout and stderr.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_files.hpp"

extern char** environ;

namespace app_test {

using test_files::TempDir;

inline std::string read_text(const std::string& path) {
  return test_files::read_bytes(path);
}

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The app's stdout and stderr go to files in a directory of their own, so that tests can
// inspect an output directory without finding the logs there.
inline Run run_app(const std::vector<std::string>& args) {
  const std::string app = CONVBANK_APP_PATH;
  TempDir logs("logs");
  const std::string out_path = logs.file("stdout.txt");
  const std::string err_path = logs.file("stderr.txt");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> argv_strings = {app};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_rc = posix_spawn(&pid, app.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE_MESSAGE(spawn_rc == 0, "posix_spawn failed: " << std::strerror(spawn_rc));
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = read_text(out_path);
  run.err = read_text(err_path);
  return run;
}

}  // namespace app_test
