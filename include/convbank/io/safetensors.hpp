// safetensors files: how trained PyTorch weights usually travel (`safetensors.torch.save_file`,
// Hugging Face checkpoints).
//
//   auto st = convbank::io::Safetensors::open("encoder.safetensors");
//   convbank::Tensor w = st.tensor("encoder.weight");      // (out, in/groups, K), as PyTorch
//   std::vector<float> b = st.data("encoder.bias");
//   convbank::io::write_safetensors("y.safetensors", {{"y", &y}}, {{"format", "pt"}});
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data buffer; offsets count from the buffer's start. Every byte of a file is
// untrusted: open() and parse() validate the whole header (JSON syntax, duplicate keys, field
// types, known dtypes, shapes, offsets inside the buffer, sizes matching shapes, no overlapping
// tensors) before anything is returned, and throw convbank::Error naming the file, the tensor
// key, the value and the rule otherwise. Holes between tensors are allowed, as in the format.
// Tensors of any known dtype (BOOL, U8..U64, I8..I64, F8_E5M2, F8_E4M3, F16, BF16, F32, F64,
// C64) are listed; data() converts F32, F64, F16 and BF16 to float32 (F16 and BF16 exactly,
// F64 rounded to nearest) and rejects the rest by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "convbank/tensor.hpp"

namespace convbank::io {

struct SafetensorsInfo {
  std::string name;
  std::string dtype;                // as stored: "F32", "BF16", "I64", ...
  std::vector<std::int64_t> shape;  // rank 0..N, every entry >= 0
  std::int64_t numel = 1;           // product of `shape` (1 for rank 0)
  std::uint64_t data_begin = 0;     // byte range [data_begin, data_end) in the data buffer
  std::uint64_t data_end = 0;
};

// An opened, fully validated file, held in memory. Cheap to query; copying copies the data.
class Safetensors {
 public:
  // Reads the whole file. Throws Error when it cannot be read or breaks any rule above.
  static Safetensors open(const std::string& path);
  // The same for a file already in memory; `name` is what error messages call it.
  static Safetensors parse(const void* bytes, std::size_t size, const std::string& name);

  const std::string& name() const { return name_; }
  std::vector<std::string> keys() const;  // sorted
  bool contains(const std::string& key) const;
  // Throws Error naming the missing key and (some of) the keys the file holds.
  const SafetensorsInfo& info(const std::string& key) const;
  // The tensor's elements in C order, converted to float32.
  std::vector<float> data(const std::string& key) const;
  // Rank 3 keeps its shape, rank 2 (C, T) gives an unbatched rank-2 Tensor, rank 1 (N) gives
  // shape (1, 1, N), as io::read_npy maps ranks; rank 0 or above 3 throws. A Conv1d weight
  // (out, in/groups, K) is rank 3 and loads unchanged; a bias (out) becomes (1, 1, out).
  Tensor tensor(const std::string& key) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  Safetensors() = default;

  std::string name_;
  std::map<std::string, SafetensorsInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<unsigned char> buffer_;  // the data buffer, without the header
};

// Writes the tensors as F32 with their rank (2 or 3), in the order given, and `metadata` as
// "__metadata__". Names must be unique, valid UTF-8 and not "__metadata__"; tensors may live on
// any device. Writes to `path` directly and removes it if a write fails; callers that must
// not replace a good file with a partial one write to a temporary name and rename.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace convbank::io
