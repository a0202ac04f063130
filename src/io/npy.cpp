// NumPy .npy reading and writing (format versions 1.0, 2.0 and 3.0).
//
// Every byte of a file is untrusted: the parser works on a bounded buffer (or a bounded prefix
// of a file) and checks each length before using it, so malformed input ends in an Error that
// names the file, never in an out-of-bounds read. Files are read header first and the data is
// then read straight into its destination, so a long recording costs its size in memory once.
#include "convbank/io/npy.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string_view>
#include <system_error>

#include "convbank/error.hpp"
#include "io/file.hpp"

namespace convbank::io {

namespace {

constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMagicSize = sizeof(kMagic);
// NumPy's ARRAY_ALIGN: data starting at a multiple of 64 bytes can be memory-mapped aligned.
constexpr std::size_t kDataAlignment = 64;
// A genuine header is under a few hundred bytes (a rank-64 shape fits in 2 KiB); a larger
// length field is corruption and must not make us allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;
// NumPy's own limit on the number of dimensions (NPY_MAXDIMS in NumPy 2).
constexpr std::size_t kMaxRank = 64;
// Elements converted per step when the stored type or byte order is not the host's float32.
constexpr std::size_t kConvertChunk = 1 << 16;

enum class DType { kFloat32, kFloat64 };

std::size_t item_bytes(DType dtype) {
  return dtype == DType::kFloat32 ? 4 : 8;
}
const char* dtype_name(DType dtype) {
  return dtype == DType::kFloat32 ? "float32" : "float64";
}

struct Header {
  std::vector<std::int64_t> shape;
  DType dtype = DType::kFloat32;
  std::uint64_t numel = 0;
  std::uint64_t data_offset = 0;  // bytes from the start of the file
  std::uint64_t data_bytes = 0;
};

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw Error("NPY file '" + name + "': " + message);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  // Python spells a 1-tuple "(5,)"; "(5)" would be the integer 5.
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Printable excerpt of untrusted header text for error messages.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMaxChars = 80;
  std::string s;
  for (char ch : text.substr(0, kMaxChars)) {
    s += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
  }
  if (text.size() > kMaxChars) s += "...";
  return s;
}

std::uint64_t load_le(const unsigned char* p, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// Where the header dict lies, from the magic string, version and header-length field.
struct Preamble {
  std::uint64_t header_start = 0;
  std::uint64_t header_bytes = 0;
};

// `bytes` holds the first `available` bytes of a file of `file_size` bytes; at least
// min(file_size, 12) are needed.
Preamble parse_preamble(const unsigned char* bytes, std::size_t available, std::uint64_t file_size,
                        const std::string& name) {
  const std::size_t magic_seen = std::min(available, kMagicSize);
  if (std::memcmp(bytes, kMagic, magic_seen) != 0) {
    fail(name, "not an NPY file: bad magic string (expected \\x93NUMPY at the start)");
  }
  const auto too_short = [&] {
    fail(name, "file is truncated: " + std::to_string(file_size) +
                   " bytes is too short for an NPY header");
  };
  if (available < kMagicSize + 2) too_short();
  const int major = bytes[6];
  const int minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    fail(name, "unsupported NPY format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  // Version 1.0 stores the header length in 2 bytes; 2.0 and 3.0 in 4.
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  Preamble p;
  p.header_start = kMagicSize + 2 + length_bytes;
  if (available < p.header_start) too_short();
  p.header_bytes = load_le(bytes + kMagicSize + 2, length_bytes);
  if (p.header_bytes > file_size - p.header_start) {
    fail(name, "header length " + std::to_string(p.header_bytes) +
                   " extends beyond the end of the file (header starts at byte " +
                   std::to_string(p.header_start) + ", file is " + std::to_string(file_size) +
                   " bytes)");
  }
  if (p.header_bytes > kMaxHeaderBytes) {
    fail(name, "header length " + std::to_string(p.header_bytes) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  }
  return p;
}

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// A small recursive-descent parser for exactly that grammar: no eval, every index checked.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  void parse(Header& header) {
    skip_space();
    if (!consume('{')) malformed("it does not start with '{'");
    bool have_descr = false, have_order = false, have_shape = false;
    std::string descr;
    bool fortran_order = false;
    for (;;) {
      skip_space();
      if (consume('}')) break;
      const std::size_t key_at = pos_;
      const std::string key = parse_string("a quoted key");
      skip_space();
      if (!consume(':')) malformed("expected ':' after key '" + excerpt(key) + "'");
      skip_space();
      bool* seen = nullptr;
      if (key == "descr") {
        seen = &have_descr;
        descr = parse_string("'descr' to be a string such as '<f4'");
      } else if (key == "fortran_order") {
        seen = &have_order;
        fortran_order = parse_bool();
      } else if (key == "shape") {
        seen = &have_shape;
        header.shape = parse_shape();
      } else {
        malformed("unexpected key '" + excerpt(key) +
                  "' (an NPY header holds exactly 'descr', 'fortran_order' and 'shape')");
      }
      if (*seen) malformed("duplicate key '" + key + "' at offset " + std::to_string(key_at));
      *seen = true;
      skip_space();
      if (consume(',')) continue;
      if (consume('}')) break;
      malformed("expected ',' or '}' at offset " + std::to_string(pos_));
    }
    skip_space();
    if (pos_ != text_.size()) malformed("unexpected text after the closing '}'");
    if (!have_descr) malformed("missing key 'descr'");
    if (!have_order) malformed("missing key 'fortran_order'");
    if (!have_shape) malformed("missing key 'shape'");
    header.dtype = parse_dtype(descr);
    if (fortran_order) {
      fail(name_,
           "fortran_order is True; only C-order arrays are supported (save "
           "np.ascontiguousarray(a))");
    }
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    fail(name_, "malformed header dict: " + what + " in \"" + excerpt(text_) + "\"");
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(char ch) {
    if (pos_ < text_.size() && text_[pos_] == ch) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  std::string parse_string(const char* expected) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      malformed(std::string("expected ") + expected + " at offset " + std::to_string(pos_));
    }
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) malformed("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  bool parse_bool() {
    if (consume(std::string_view("True"))) return true;
    if (consume(std::string_view("False"))) return false;
    malformed("'fortran_order' must be True or False");
  }

  std::int64_t parse_dim() {
    if (consume('-')) {
      std::string digits;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9' &&
             digits.size() < 20) {
        digits += text_[pos_++];
      }
      fail(name_, "shape has a negative dimension -" + digits);
    }
    const std::size_t start = pos_;
    std::uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + static_cast<std::uint64_t>(text_[pos_] - '0');
      if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail(name_, "shape dimension starting at offset " + std::to_string(start) +
                        " does not fit in 64 bits");
      }
      ++pos_;
    }
    if (pos_ == start) malformed("expected a dimension at offset " + std::to_string(pos_));
    consume('L');  // Python 2 wrote long integers as "3L"
    return static_cast<std::int64_t>(value);
  }

  std::vector<std::int64_t> parse_shape() {
    if (!consume('(')) malformed("'shape' must be a tuple such as (2, 3)");
    std::vector<std::int64_t> shape;
    bool trailing_comma = false;
    for (;;) {
      skip_space();
      if (consume(')')) break;
      if (shape.size() == kMaxRank) {
        fail(name_, "shape has more than " + std::to_string(kMaxRank) + " dimensions");
      }
      shape.push_back(parse_dim());
      skip_space();
      trailing_comma = consume(',');
      if (trailing_comma) continue;
      if (consume(')')) break;
      malformed("expected ',' or ')' in 'shape' at offset " + std::to_string(pos_));
    }
    if (shape.size() == 1 && !trailing_comma) {
      malformed("'shape' (" + std::to_string(shape[0]) +
                ") is an integer, not a tuple (a 1-tuple is written (n,))");
    }
    return shape;
  }

  DType parse_dtype(const std::string& descr) const {
    // '=' is native order; only on a little-endian host is it the '<' we decode.
    constexpr bool kLittleHost = std::endian::native == std::endian::little;
    const bool little = !descr.empty() && (descr[0] == '<' || (descr[0] == '=' && kLittleHost));
    const std::string type = descr.empty() ? "" : descr.substr(1);
    if (little && type == "f4") return DType::kFloat32;
    if (little && type == "f8") return DType::kFloat64;
    if (!descr.empty() && (descr[0] == '>' || descr[0] == '=') && (type == "f4" || type == "f8")) {
      fail(name_, "big-endian dtype '" + descr + "' is not supported; convert with a.astype('<" +
                      type + "')");
    }
    fail(name_, "unsupported dtype '" + excerpt(descr) +
                    "'; only float32 ('<f4') and float64 ('<f8') are supported");
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

// Parses the header text and sizes the data against what the file holds after it.
Header parse_header(const Preamble& preamble, std::string_view text, std::uint64_t file_size,
                    const std::string& name) {
  Header h;
  HeaderParser(text, name).parse(h);
  std::uint64_t numel = 1;
  for (std::int64_t d : h.shape) {
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && numel > std::numeric_limits<std::uint64_t>::max() / dim) {
      fail(name,
           "the product of the dimensions of shape " + shape_text(h.shape) + " overflows 64 bits");
    }
    numel *= dim;
  }
  const std::size_t item = item_bytes(h.dtype);
  if (numel > std::numeric_limits<std::uint64_t>::max() / item) {
    fail(name, "shape " + shape_text(h.shape) + " needs more bytes than 64 bits can count");
  }
  h.numel = numel;
  h.data_bytes = numel * item;
  h.data_offset = preamble.header_start + preamble.header_bytes;
  const std::uint64_t available = file_size - h.data_offset;
  const std::string needs = "shape " + shape_text(h.shape) + " of " + dtype_name(h.dtype) +
                            " needs " + std::to_string(h.data_bytes) + " bytes of data";
  if (available < h.data_bytes) {
    fail(name, "data is truncated: " + needs + ", got " + std::to_string(available));
  }
  if (available > h.data_bytes) {
    fail(name, "file has " + std::to_string(available - h.data_bytes) + " bytes after the data (" +
                   needs + ")");
  }
  if (numel > std::numeric_limits<std::size_t>::max() / sizeof(float)) {
    fail(name, "shape " + shape_text(h.shape) + " is too large for this machine");
  }
  return h;
}

// Converts `count` stored little-endian elements to float32.
void convert(DType dtype, const unsigned char* src, std::size_t count, float* dst) {
  if (dtype == DType::kFloat32) {
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(dst, src, count * sizeof(float));
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(load_le(src + 4 * i, 4)));
      }
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      // Out-of-range values become +-inf, as IEEE-754 conversion (and NumPy's astype) does.
      dst[i] = static_cast<float>(std::bit_cast<double>(load_le(src + 8 * i, 8)));
    }
  }
}

using detail::File;

void read_exact(File& file, void* dst, std::size_t bytes, const std::string& path,
                const char* what) {
  detail::read_exact(file, dst, bytes, "NPY", path, what);
}

// Opens `path` and reads and validates its header; leaves the file positioned at the data.
Header open_and_read_header(File& file, const std::string& path) {
  if (file.get() == nullptr) fail(path, "cannot open: " + file.error_text());
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && !std::filesystem::is_regular_file(status)) {
    fail(path, "cannot read: not a regular file");
  }
  const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot determine the file size: " + ec.message());

  unsigned char prefix[kMagicSize + 2 + 4];
  const std::size_t prefix_bytes =
      static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, sizeof(prefix)));
  read_exact(file, prefix, prefix_bytes, path, "the header");
  const Preamble preamble = parse_preamble(prefix, prefix_bytes, file_size, path);

  std::string text(static_cast<std::size_t>(preamble.header_bytes), '\0');
  if (std::fseek(file.get(), static_cast<long>(preamble.header_start), SEEK_SET) != 0) {
    fail(path, "cannot seek to the header: " + file.error_text());
  }
  read_exact(file, text.data(), text.size(), path, "the header");
  return parse_header(preamble, text, file_size, path);
}

void read_data(File& file, const Header& h, float* dst, const std::string& path) {
  if (h.numel == 0) return;
  const auto numel = static_cast<std::size_t>(h.numel);
  if (h.dtype == DType::kFloat32 && std::endian::native == std::endian::little) {
    read_exact(file, dst, numel * sizeof(float), path, "the data");
    return;
  }
  const std::size_t item = item_bytes(h.dtype);
  std::vector<unsigned char> buffer(std::min(numel, kConvertChunk) * item);
  for (std::size_t done = 0; done < numel;) {
    const std::size_t count = std::min(numel - done, kConvertChunk);
    read_exact(file, buffer.data(), count * item, path, "the data");
    convert(h.dtype, buffer.data(), count, dst + done);
    done += count;
  }
}

void write_all(File& file, const void* src, std::size_t bytes, const std::string& path) {
  if (bytes == 0) return;  // an empty tensor's data pointer may be null
  errno = 0;
  if (std::fwrite(src, 1, bytes, file.get()) != bytes) {
    fail(path, "write failed: " + file.error_text());
  }
}

void write_file(const std::string& path, const std::vector<std::int64_t>& shape, const float* data,
                std::uint64_t numel) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Pad with spaces and end with '\n' (as NumPy does) so the data starts 64-byte aligned; fall
  // back to version 2.0 only when the header no longer fits a 2-byte length.
  std::size_t preamble = kMagicSize + 2 + 2;
  auto padded_length = [&] {
    const std::size_t unpadded = preamble + dict.size() + 1;
    return (unpadded + kDataAlignment - 1) / kDataAlignment * kDataAlignment - preamble;
  };
  if (padded_length() > 0xffff) preamble = kMagicSize + 2 + 4;
  const std::size_t header_bytes = padded_length();
  dict.resize(header_bytes - 1, ' ');
  dict += '\n';

  std::string head(reinterpret_cast<const char*>(kMagic), kMagicSize);
  const std::size_t length_bytes = preamble - kMagicSize - 2;
  head += static_cast<char>(length_bytes == 2 ? 1 : 2);  // version 1.0 or 2.0
  head += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i) {
    head += static_cast<char>((header_bytes >> (8 * i)) & 0xff);
  }
  head += dict;

  errno = 0;
  File file(path, "wb");
  if (file.get() == nullptr) fail(path, "cannot open for writing: " + file.error_text());
  // A failed write must not leave a file that looks like a valid but wrong array.
  try {
    write_all(file, head.data(), head.size(), path);
    const auto count = static_cast<std::size_t>(numel);
    if constexpr (std::endian::native == std::endian::little) {
      write_all(file, data, count * sizeof(float), path);
    } else {
      std::vector<unsigned char> buffer(std::min(count, kConvertChunk) * 4);
      for (std::size_t done = 0; done < count;) {
        const std::size_t n = std::min(count - done, kConvertChunk);
        for (std::size_t i = 0; i < n; ++i) {
          const auto u = std::bit_cast<std::uint32_t>(data[done + i]);
          for (int b = 0; b < 4; ++b) buffer[4 * i + b] = static_cast<unsigned char>(u >> (8 * b));
        }
        write_all(file, buffer.data(), n * 4, path);
        done += n;
      }
    }
    errno = 0;
    if (!file.close()) fail(path, "write failed when closing: " + file.error_text());
  } catch (...) {
    // Only a regular file is ours to remove: the path may name a device such as /dev/full.
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
    throw;
  }
}

}  // namespace

NpyArray parse_npy(const void* bytes, std::size_t size, const std::string& name) {
  if (bytes == nullptr && size > 0) fail(name, "null buffer of " + std::to_string(size) + " bytes");
  static const unsigned char kEmpty = 0;
  const auto* b = bytes != nullptr ? static_cast<const unsigned char*>(bytes) : &kEmpty;
  const Preamble preamble = parse_preamble(b, size, size, name);
  const std::string_view text(reinterpret_cast<const char*>(b + preamble.header_start),
                              static_cast<std::size_t>(preamble.header_bytes));
  const Header h = parse_header(preamble, text, size, name);
  NpyArray array;
  array.shape = h.shape;
  array.data.resize(static_cast<std::size_t>(h.numel));
  if (h.numel > 0) {
    convert(h.dtype, b + h.data_offset, array.data.size(), array.data.data());
  }
  return array;
}

NpyArray read_npy_array(const std::string& path) {
  errno = 0;
  File file(path, "rb");
  const Header h = open_and_read_header(file, path);
  NpyArray array;
  array.shape = h.shape;
  array.data.resize(static_cast<std::size_t>(h.numel));
  read_data(file, h, array.data.data(), path);
  return array;
}

std::vector<std::int64_t> read_npy_shape(const std::string& path) {
  errno = 0;
  File file(path, "rb");
  return open_and_read_header(file, path).shape;
}

Tensor read_npy(const std::string& path) {
  errno = 0;
  File file(path, "rb");
  const Header h = open_and_read_header(file, path);
  Tensor t = detail::tensor_for_shape(h.shape, "NPY file '" + path + "'", shape_text(h.shape));
  read_data(file, h, t.data(), path);
  return t;
}

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, const float* data) {
  std::uint64_t numel = 1;
  for (std::int64_t d : shape) {
    if (d < 0) fail(path, "cannot write shape " + shape_text(shape) + ": negative dimension");
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && numel > std::numeric_limits<std::uint64_t>::max() / dim) {
      fail(path, "cannot write shape " + shape_text(shape) + ": its size overflows 64 bits");
    }
    numel *= dim;
  }
  if (numel > std::numeric_limits<std::size_t>::max() / sizeof(float)) {
    fail(path, "cannot write shape " + shape_text(shape) + ": too large for this machine");
  }
  if (data == nullptr && numel > 0) {
    fail(path, "cannot write shape " + shape_text(shape) + " from a null data pointer");
  }
  write_file(path, shape, data, numel);
}

void write_npy(const std::string& path, const Tensor& tensor) {
  if (tensor.device() != Device::kCpu) {
    write_npy(path, tensor.to(Device::kCpu));
    return;
  }
  const Shape& s = tensor.shape();
  if (tensor.rank() == 2) {
    write_npy(path, {s.channels, s.frames}, tensor.data());
  } else {
    write_npy(path, {s.batch, s.channels, s.frames}, tensor.data());
  }
}

}  // namespace convbank::io
