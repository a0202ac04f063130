// NumPy .npy files: the simplest way to move tensors between PyTorch and convbank.
//
//   convbank::Tensor w = convbank::io::read_npy("encoder_weight.npy");  // np.save(...) output
//   convbank::io::write_npy("y.npy", y);
//
// Reads float32 ('<f4') and float64 ('<f8', converted to float32), C order, rank 1 to 3.
// Everything else (Fortran order, big-endian, other dtypes, bad magic, truncated data, a shape
// whose size does not match the data) is rejected with an Error naming the file and the rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convbank/tensor.hpp"

namespace convbank::io {

struct NpyArray {
  std::vector<std::int64_t> shape;  // as stored; may be rank 0..N
  std::vector<float> data;          // C order, converted to float32
};

// Parses any float32/float64 C-order array.
NpyArray read_npy_array(const std::string& path);
NpyArray parse_npy(const void* bytes, std::size_t size, const std::string& name);

// The stored shape, reading and validating only the header (dtype, order, and that the file
// holds exactly the data the shape needs), e.g. to check a rank before loading a long signal.
std::vector<std::int64_t> read_npy_shape(const std::string& path);

// A rank-1, 2 or 3 array as a Tensor: rank 3 keeps its shape, rank 2 (C, T) gives a rank-2
// tensor (unbatched), rank 1 (T) gives shape (1, 1, T) with rank 3.
Tensor read_npy(const std::string& path);

// Writes '<f4', C order, with the tensor's rank (2 or 3). Writes to `path` directly; callers
// that must not leave partial files write to a temporary name and rename.
void write_npy(const std::string& path, const Tensor& tensor);
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, const float* data);

}  // namespace convbank::io
