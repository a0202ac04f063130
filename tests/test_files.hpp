// Small file helpers the tests share: a temporary directory removed with its contents, whole-file
// byte I/O, and the message of the convbank::Error a call throws.
#pragma once

#include <unistd.h>

#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <system_error>

#include "convbank/error.hpp"

namespace test_files {

// A fresh directory under the system temp dir ("convbank-<tag>-<pid>-<n>").
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    static std::atomic<int> counter{0};
    path_ =
        std::filesystem::temp_directory_path() /
        ("convbank-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The message of the convbank::Error f throws; "<no error>" when it returns, and a marked text
// for any other exception, so a message check fails either way.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const convbank::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a convbank::Error: ") + e.what() + ">";
  }
  return "<no error>";
}

}  // namespace test_files
