// safetensors reading and writing.
//
// Every byte of a file is untrusted. The header length is checked against the file size and a
// cap before anything is allocated for it; the JSON is parsed by nlohmann-json (which rejects
// invalid UTF-8 and does not recurse) with a callback that catches what a DOM would hide:
// duplicate keys and absurd nesting. Then every entry is checked field by field, so a tensor
// that passes holds exactly the bytes its dtype and shape need, inside the data buffer, and
// shares none of them with another tensor. Only then is the data buffer read.
#include "convbank/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "convbank/error.hpp"
#include "io/file.hpp"

namespace convbank::io {

namespace {

// The data buffer is reinterpreted in place (memcpy of F32, bit patterns of F16/BF16); a
// big-endian host would need byte swaps everywhere, and none is in sight.
static_assert(std::endian::native == std::endian::little,
              "the safetensors reader assumes a little-endian host");

using Json = nlohmann::json;

constexpr std::size_t kLengthBytes = 8;
// The reference implementation's limit (safetensors' MAX_HEADER_SIZE): a header describing
// hundreds of thousands of tensors fits, and a corrupted length cannot make us allocate more.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// A genuine header nests 3 deep (root -> entry -> shape); a deep pile of brackets is an attack
// on memory, not a file, and is cut off long before it costs any.
constexpr int kMaxDepth = 32;
// The writer pads the header so the data buffer starts 8-byte aligned, as the reference does.
constexpr std::size_t kDataAlignment = 8;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeInfo {
  const char* name;
  std::size_t bytes;
};
// Every dtype of the format with a whole number of bytes per element. Files holding integer
// buffers (BatchNorm's I64 num_batches_tracked) must still open; only data() refuses them.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};
// Packed sub-byte types: a byte count is not numel * size, so they get their own message.
constexpr const char* kSubByteDTypes[] = {"F4", "F6_E2M3", "F6_E3M2"};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string known_dtypes() {
  std::string s;
  for (const DTypeInfo& d : kDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw Error("safetensors file '" + name + "': " + message);
}

// Untrusted text made printable and short for an error message. Keys are valid UTF-8 (the JSON
// parser checks), so their bytes >= 0x80 are kept; raw header bytes may not be, so `ascii`
// escapes those too.
std::string printable(std::string_view text, std::size_t max_bytes = 100, bool ascii = false) {
  std::string s;
  std::size_t i = 0;
  for (; i < text.size() && s.size() < max_bytes; ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x20 || ch == 0x7f || (ascii && ch >= 0x80)) {
      static const char kHex[] = "0123456789abcdef";
      s += "\\x";
      s += kHex[ch >> 4];
      s += kHex[ch & 15];
    } else {
      s += static_cast<char>(ch);
    }
  }
  if (i < text.size()) {
    // Do not end the excerpt inside a UTF-8 sequence.
    while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xc0) == 0x80) s.pop_back();
    if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xc0) s.pop_back();
    s += "...";
  }
  return s;
}

std::string quote_key(std::string_view key) {
  return "'" + printable(key) + "'";
}

// A JSON value as it appeared (modulo whitespace), shortened: a million-entry shape must not
// become a megabyte error message.
std::string json_text(const Json& value) {
  return printable(value.dump(-1, ' ', true, Json::error_handler_t::replace), 80);
}

std::string describe(const Json& value) {
  return std::string(value.type_name()) + " " + json_text(value);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    if (i == 8 && shape.size() > 10) {
      s += "... (" + std::to_string(shape.size()) + " dimensions)";
      break;
    }
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string offsets_text(std::uint64_t begin, std::uint64_t end) {
  return "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < kLengthBytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// Validates the 8-byte length field of a file of `file_size` bytes; returns the header length.
std::uint64_t check_header_length(const unsigned char* prefix, std::uint64_t file_size,
                                  const std::string& name) {
  if (file_size < kLengthBytes) {
    fail(name, "file is truncated: " + std::to_string(file_size) +
                   " bytes is too short for the 8-byte header length");
  }
  const std::uint64_t n = load_le64(prefix);
  if (n > file_size - kLengthBytes) {
    fail(name, "header length " + std::to_string(n) +
                   " extends beyond the end of the file (the header starts at byte 8, the file "
                   "is " +
                   std::to_string(file_size) + " bytes)");
  }
  if (n > kMaxHeaderBytes) {
    fail(name, "header length " + std::to_string(n) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  }
  return n;
}

// The JSON text as a DOM, rejecting what nlohmann-json would otherwise accept silently: a
// repeated key (the DOM keeps one of them, so two readers could disagree about a file).
Json parse_json(std::string_view text, const std::string& name) {
  // Key sets of the objects currently open; `root_key` is the entry being read, for messages.
  std::vector<std::unordered_set<std::string>> open_objects;
  std::string root_key;
  const Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxDepth) {
          fail(name, "header JSON nests deeper than " + std::to_string(kMaxDepth) +
                         " levels (a safetensors header nests 3)");
        }
        if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (depth == 1) root_key = key;
        if (!open_objects.empty() && !open_objects.back().insert(key).second) {
          if (depth == 1) fail(name, "duplicate key " + quote_key(key) + " in the header");
          if (depth == 2 && root_key == kMetadataKey) {
            fail(name, "__metadata__ has a duplicate key " + quote_key(key));
          }
          if (depth == 2)
            fail(name, "tensor " + quote_key(root_key) + ": duplicate field " + quote_key(key));
          fail(name,
               "duplicate key " + quote_key(key) + " inside the entry " + quote_key(root_key));
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  // The reference reader insists on this too; without it a byte-order mark or leading space
  // (which nlohmann-json skips) would make a file that loads here and nowhere else.
  if (text.empty() || text.front() != '{') {
    fail(name, "header must be a JSON object starting with '{', got " +
                   (text.empty() ? std::string("an empty header")
                                 : "'" + printable(text, 24, true) + "'"));
  }
  // nlohmann-json takes a NUL byte outside a string for the end of the input and ignores what
  // follows; another reader would parse the rest, and two readers must not disagree.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    fail(name,
         "header is not valid JSON: NUL byte at offset " + std::to_string(nul) + " of the header");
  }
  try {
    return Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    // nlohmann's message quotes the offending bytes ("last read: ..."); make them printable.
    fail(name, "header is not valid JSON: " + printable(e.what(), 300, true));
  }
}

// A JSON integer in [0, max], or an Error saying what `what` got instead.
std::uint64_t get_count(const Json& v, std::uint64_t max, const std::string& name,
                        const std::string& what) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > max) {
      fail(name,
           what + " is " + std::to_string(u) + ", more than the limit " + std::to_string(max));
    }
    return u;
  }
  if (v.is_number_integer()) {
    // "-0" parses as a signed zero; JSON readers that want an unsigned number accept it.
    if (v.get<std::int64_t>() == 0) return 0;
    fail(name, what + " is negative (" + std::to_string(v.get<std::int64_t>()) + ")");
  }
  fail(name, what + " must be a non-negative integer, got " + describe(v));
}

// The field `field` of a tensor entry, which must be present.
const Json& field_of(const Json& entry, const char* field, const std::string& key,
                     const std::string& name) {
  const auto it = entry.find(field);
  if (it == entry.end()) {
    fail(name, "tensor " + quote_key(key) + ": missing field '" + field +
                   "' (an entry holds \"dtype\", \"shape\" and \"data_offsets\")");
  }
  return *it;
}

SafetensorsInfo parse_entry(const std::string& key, const Json& entry, std::uint64_t buffer_bytes,
                            const std::string& name) {
  const std::string tensor = "tensor " + quote_key(key);
  if (!entry.is_object()) {
    fail(name, tensor + ": entry must be an object {\"dtype\", \"shape\", \"data_offsets\"}, got " +
                   describe(entry));
  }
  SafetensorsInfo info;
  info.name = key;

  const Json& dtype = field_of(entry, "dtype", key, name);
  if (!dtype.is_string()) fail(name, tensor + ": 'dtype' must be a string, got " + describe(dtype));
  info.dtype = dtype.get<std::string>();
  const DTypeInfo* d = find_dtype(info.dtype);
  if (d == nullptr) {
    for (const char* sub : kSubByteDTypes) {
      if (info.dtype == sub) {
        fail(name, tensor + ": dtype '" + info.dtype +
                       "' packs elements into sub-byte fields, which is not supported");
      }
    }
    fail(name,
         tensor + ": unknown dtype " + quote_key(info.dtype) + " (known: " + known_dtypes() + ")");
  }

  const Json& shape = field_of(entry, "shape", key, name);
  if (!shape.is_array()) {
    fail(name, tensor + ": 'shape' must be an array of integers, got " + describe(shape));
  }
  info.shape.reserve(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    info.shape.push_back(static_cast<std::int64_t>(
        get_count(shape[i], std::numeric_limits<std::int64_t>::max(), name,
                  tensor + ": shape entry " + std::to_string(i) + " of " + json_text(shape))));
  }
  // Downstream code multiplies dimensions in any order (Shape::numel, view strides), so even
  // an empty tensor must have dimensions whose product fits: [2^40, 2^40, 0] is refused.
  std::uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (std::int64_t dim : info.shape) {
    if (dim == 0) {
      has_zero = true;
      continue;
    }
    const auto u = static_cast<std::uint64_t>(dim);
    if (nonzero_product >
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / u) {
      fail(name, tensor + ": the product of the dimensions of shape " + shape_text(info.shape) +
                     " overflows 64 bits");
    }
    nonzero_product *= u;
  }
  const std::uint64_t numel = has_zero ? 0 : nonzero_product;
  if (numel > std::numeric_limits<std::uint64_t>::max() / d->bytes) {
    fail(name, tensor + ": shape " + shape_text(info.shape) + " of " + info.dtype +
                   " needs more bytes than 64 bits can count");
  }
  info.numel = static_cast<std::int64_t>(numel);
  const std::uint64_t bytes = numel * d->bytes;

  const Json& offsets = field_of(entry, "data_offsets", key, name);
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(name, tensor + ": 'data_offsets' must be an array [begin, end], got " + describe(offsets));
  }
  const auto u64_max = std::numeric_limits<std::uint64_t>::max();
  info.data_begin = get_count(offsets[0], u64_max, name, tensor + ": data_offsets begin");
  info.data_end = get_count(offsets[1], u64_max, name, tensor + ": data_offsets end");
  const std::string where = offsets_text(info.data_begin, info.data_end);
  if (info.data_begin > info.data_end) {
    fail(name, tensor + ": " + where + " has begin > end");
  }
  if (info.data_end > buffer_bytes) {
    fail(name, tensor + ": " + where + " extends beyond the data buffer, which is " +
                   std::to_string(buffer_bytes) + " bytes");
  }
  if (info.data_end - info.data_begin != bytes) {
    fail(name, tensor + ": " + where + " holds " + std::to_string(info.data_end - info.data_begin) +
                   " bytes, but shape " + shape_text(info.shape) + " of " + info.dtype + " needs " +
                   std::to_string(bytes) + " (" + std::to_string(numel) + " x " +
                   std::to_string(d->bytes) + ")");
  }
  return info;
}

struct Header {
  std::map<std::string, SafetensorsInfo> tensors;
  std::map<std::string, std::string> metadata;
};

Header parse_header(std::string_view text, std::uint64_t buffer_bytes, const std::string& name) {
  const Json root = parse_json(text, name);
  if (!root.is_object()) {
    fail(name, "header must be a JSON object {\"name\": {...}, ...}, got " + describe(root));
  }
  Header h;
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) {
        fail(name, "__metadata__ must be an object of strings, got " + describe(value));
      }
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          fail(name, "__metadata__ key " + quote_key(mkey) + ": value must be a string, got " +
                         describe(mvalue));
        }
        h.metadata.emplace(mkey, mvalue.get<std::string>());
      }
      continue;
    }
    h.tensors.emplace(key, parse_entry(key, value, buffer_bytes, name));
  }

  // Tensors may leave holes but never share bytes: sorted by begin, disjoint ranges follow each
  // other, so comparing neighbours finds any overlap. Empty tensors occupy no bytes.
  std::vector<const SafetensorsInfo*> ranges;
  for (const auto& [key, info] : h.tensors) {
    if (info.data_end > info.data_begin) ranges.push_back(&info);
  }
  std::sort(ranges.begin(), ranges.end(), [](const auto* a, const auto* b) {
    return a->data_begin != b->data_begin ? a->data_begin < b->data_begin : a->name < b->name;
  });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const SafetensorsInfo& a = *ranges[i - 1];
    const SafetensorsInfo& b = *ranges[i];
    if (b.data_begin < a.data_end) {
      fail(name, "tensors " + quote_key(a.name) + " (" + offsets_text(a.data_begin, a.data_end) +
                     ") and " + quote_key(b.name) + " (" + offsets_text(b.data_begin, b.data_end) +
                     ") overlap");
    }
  }
  return h;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    // Inf, or NaN with its payload (and quiet bit) moved to the top of float's mantissa.
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal half: normal in float. Shift the leading 1 into the implicit bit position and
    // lower the exponent once per shift; done in bits so no FTZ/DAZ mode can flush it.
    exponent = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// Converts `count` stored elements of `dtype` to float32; false for a dtype with no float
// meaning here.
bool convert(std::string_view dtype, const unsigned char* src, std::size_t count, float* dst) {
  if (count == 0) return dtype == "F32" || dtype == "F64" || dtype == "F16" || dtype == "BF16";
  if (dtype == "F32") {
    std::memcpy(dst, src, count * sizeof(float));
  } else if (dtype == "F64") {
    for (std::size_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, sizeof v);
      // Out-of-range values become +-inf, as IEEE-754 conversion (and torch's .float()) does.
      dst[i] = static_cast<float>(v);
    }
  } else if (dtype == "F16") {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t v;
      std::memcpy(&v, src + 2 * i, sizeof v);
      dst[i] = half_to_float(v);
    }
  } else if (dtype == "BF16") {
    // bfloat16 is the top half of a float32: widening is exact, NaN payloads included.
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t v;
      std::memcpy(&v, src + 2 * i, sizeof v);
      dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(v) << 16);
    }
  } else {
    return false;
  }
  return true;
}

using detail::File;

void read_exact(File& file, void* dst, std::size_t bytes, const std::string& path,
                const char* what) {
  detail::read_exact(file, dst, bytes, "safetensors", path, what);
}

void write_all(File& file, const void* src, std::size_t bytes, const std::string& path) {
  if (bytes == 0) return;  // an empty tensor's data pointer may be null
  errno = 0;
  if (std::fwrite(src, 1, bytes, file.get()) != bytes) {
    fail(path, "write failed: " + file.error_text());
  }
}

// The JSON string for untrusted-by-the-writer text, or an Error naming it: nlohmann refuses to
// serialize invalid UTF-8, and a file with such a key would not load anywhere.
void check_utf8(const std::string& text, const std::string& what, const std::string& path) {
  try {
    (void)Json(text).dump();
  } catch (const Json::exception&) {
    fail(path, "cannot write " + what + " " + quote_key(text) + ": it is not valid UTF-8");
  }
}

}  // namespace

Safetensors Safetensors::parse(const void* bytes, std::size_t size, const std::string& name) {
  if (bytes == nullptr && size > 0) fail(name, "null buffer of " + std::to_string(size) + " bytes");
  const auto* b = static_cast<const unsigned char*>(bytes);
  const std::uint64_t header_bytes = check_header_length(b, size, name);
  const std::string_view text(reinterpret_cast<const char*>(b + kLengthBytes),
                              static_cast<std::size_t>(header_bytes));
  const std::size_t data_start = kLengthBytes + static_cast<std::size_t>(header_bytes);
  Header h = parse_header(text, size - data_start, name);
  Safetensors st;
  st.name_ = name;
  st.tensors_ = std::move(h.tensors);
  st.metadata_ = std::move(h.metadata);
  st.buffer_.assign(b + data_start, b + size);
  return st;
}

Safetensors Safetensors::open(const std::string& path) {
  errno = 0;
  File file(path, "rb");
  if (file.get() == nullptr) fail(path, "cannot open: " + file.error_text());
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && !std::filesystem::is_regular_file(status)) {
    fail(path, "cannot read: not a regular file");
  }
  const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot determine the file size: " + ec.message());

  unsigned char prefix[kLengthBytes] = {};
  read_exact(file, prefix, static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, 8)), path,
             "the header length");
  const std::uint64_t header_bytes = check_header_length(prefix, file_size, path);
  std::string text(static_cast<std::size_t>(header_bytes), '\0');
  read_exact(file, text.data(), text.size(), path, "the header");
  const std::uint64_t buffer_bytes = file_size - kLengthBytes - header_bytes;
  if (buffer_bytes > std::numeric_limits<std::size_t>::max()) {
    fail(path,
         "data buffer of " + std::to_string(buffer_bytes) + " bytes is too large for this machine");
  }
  // The header is validated before the buffer is read, so a bad file fails before a
  // gigabyte-sized read.
  Header h = parse_header(text, buffer_bytes, path);
  Safetensors st;
  st.name_ = path;
  st.tensors_ = std::move(h.tensors);
  st.metadata_ = std::move(h.metadata);
  st.buffer_.resize(static_cast<std::size_t>(buffer_bytes));
  read_exact(file, st.buffer_.data(), st.buffer_.size(), path, "the data buffer");
  return st;
}

std::vector<std::string> Safetensors::keys() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [key, info] : tensors_) out.push_back(key);
  return out;
}

bool Safetensors::contains(const std::string& key) const {
  return tensors_.count(key) != 0;
}

const SafetensorsInfo& Safetensors::info(const std::string& key) const {
  const auto it = tensors_.find(key);
  if (it != tensors_.end()) return it->second;
  constexpr std::size_t kMaxListed = 10;
  std::string message = "no tensor named " + quote_key(key);
  if (tensors_.empty()) {
    message += "; the file holds no tensors";
  } else {
    message += "; the file holds " + std::to_string(tensors_.size()) + " tensor" +
               (tensors_.size() == 1 ? "" : "s") + ": ";
    std::size_t listed = 0;
    for (const auto& [name, info] : tensors_) {
      if (listed == kMaxListed) {
        message += ", ... (" + std::to_string(tensors_.size() - kMaxListed) + " more)";
        break;
      }
      message += (listed++ > 0 ? ", " : "") + quote_key(name);
    }
  }
  fail(name_, message);
}

std::vector<float> Safetensors::data(const std::string& key) const {
  const SafetensorsInfo& i = info(key);
  std::vector<float> out(static_cast<std::size_t>(i.numel));
  if (!convert(i.dtype, buffer_.data() + i.data_begin, out.size(), out.data())) {
    fail(name_, "tensor " + quote_key(key) + ": dtype " + i.dtype +
                    " cannot be read as float32 (supported: F32, F64, F16, BF16)");
  }
  return out;
}

Tensor Safetensors::tensor(const std::string& key) const {
  const SafetensorsInfo& i = info(key);
  Tensor t = detail::tensor_for_shape(
      i.shape, "safetensors file '" + name_ + "': tensor " + quote_key(key), shape_text(i.shape));
  if (!convert(i.dtype, buffer_.data() + i.data_begin, static_cast<std::size_t>(i.numel),
               t.data())) {
    fail(name_, "tensor " + quote_key(key) + ": dtype " + i.dtype +
                    " cannot be read as float32 (supported: F32, F64, F16, BF16)");
  }
  return t;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> host_copies;  // tensors that live on a device, copied once
  std::vector<const Tensor*> sources;
  Json header = Json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (tensor == nullptr) fail(path, "cannot write tensor " + quote_key(name) + ": null pointer");
    if (name == kMetadataKey) {
      fail(path, "cannot write a tensor named '__metadata__': the name is reserved for metadata");
    }
    check_utf8(name, "tensor name", path);
    if (header.contains(name)) fail(path, "cannot write tensor " + quote_key(name) + " twice");
    const Tensor* src = tensor;
    if (src->device() != Device::kCpu) {
      host_copies.push_back(src->to(Device::kCpu));
      src = &host_copies.back();
    }
    sources.push_back(src);
    const Shape& s = src->shape();
    const std::uint64_t bytes = static_cast<std::uint64_t>(src->numel()) * sizeof(float);
    header[name] = {
        {"dtype", "F32"},
        {"shape", src->rank() == 2 ? Json::array({s.channels, s.frames})
                                   : Json::array({s.batch, s.channels, s.frames})},
        {"data_offsets", Json::array({offset, offset + bytes})},
    };
    offset += bytes;
  }
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [key, value] : metadata) {
      check_utf8(key, "metadata key", path);
      check_utf8(value, "metadata value of " + quote_key(key) + ":", path);
      m[key] = value;
    }
    header[kMetadataKey] = std::move(m);
  }
  std::string text = header.dump();
  // Spaces are JSON whitespace: padding keeps every reader happy and the data aligned.
  text.resize((kLengthBytes + text.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment -
                  kLengthBytes,
              ' ');
  unsigned char length[kLengthBytes];
  for (std::size_t i = 0; i < kLengthBytes; ++i) {
    length[i] = static_cast<unsigned char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)));
  }

  errno = 0;
  File file(path, "wb");
  if (file.get() == nullptr) fail(path, "cannot open for writing: " + file.error_text());
  // A failed write must not leave a file that looks like valid but wrong weights.
  try {
    write_all(file, length, sizeof length, path);
    write_all(file, text.data(), text.size(), path);
    for (const Tensor* src : sources) {
      write_all(file, src->data(), static_cast<std::size_t>(src->numel()) * sizeof(float), path);
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

}  // namespace convbank::io
