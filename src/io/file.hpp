// std::FILE with the error reporting the tensor-file readers and writers need (npy.cpp,
// safetensors.cpp): every failure is an Error naming the format, the file and the cause.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "convbank/error.hpp"
#include "convbank/tensor.hpp"

namespace convbank::io::detail {

class File {
 public:
  File(const std::string& path, const char* mode) : file_(std::fopen(path.c_str(), mode)) {}
  ~File() {
    if (file_ != nullptr) std::fclose(file_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  std::FILE* get() const { return file_; }
  std::string error_text() const { return errno != 0 ? std::strerror(errno) : "unknown I/O error"; }
  // Closes and reports whether buffered data reached the file.
  bool close() {
    const int rc = std::fclose(file_);
    file_ = nullptr;
    return rc == 0;
  }

 private:
  std::FILE* file_;
};

// Reads exactly `bytes` or throws Error("<format> file '<path>': short read of <what>: ...").
inline void read_exact(File& file, void* dst, std::size_t bytes, const char* format,
                       const std::string& path, const char* what) {
  if (bytes == 0) return;
  errno = 0;
  const std::size_t got = std::fread(dst, 1, bytes, file.get());
  if (got != bytes) {
    const bool io_error = std::ferror(file.get()) != 0;
    throw Error(std::string(format) + " file '" + path + "': short read of " + what +
                ": expected " + std::to_string(bytes) + " bytes, got " + std::to_string(got) +
                (io_error ? " (" + file.error_text() + ")" : " (file changed while reading?)"));
  }
}

// The tensor an array of `shape` loads into: rank 1 is (frames), 2 (channels, frames), 3 (batch,
// channels, frames). Other ranks throw Error("<where>: shape <shape_text> has rank R; ...").
inline Tensor tensor_for_shape(const std::vector<std::int64_t>& shape, const std::string& where,
                               const std::string& shape_text) {
  switch (shape.size()) {
    case 1:
      return Tensor(Shape{1, 1, shape[0]});
    case 2:
      return Tensor::unbatched(shape[0], shape[1]);
    case 3:
      return Tensor(Shape{shape[0], shape[1], shape[2]});
    default:
      throw Error(where + ": shape " + shape_text + " has rank " + std::to_string(shape.size()) +
                  "; a tensor needs rank 1 (frames), 2 (channels, frames) or 3 (batch, channels, "
                  "frames)");
  }
}

}  // namespace convbank::io::detail
