// safetensors reading and writing: round trips, files written by an independent Python writer
// (tests/tools/make_safetensors_cases.py) checked against .npy copies, every rule of the format
// with its message, and a corruption loop that feeds thousands of damaged files to the parser.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "convbank/error.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/io/safetensors.hpp"
#include "convbank/tensor.hpp"
#include "test_files.hpp"

namespace {

using test_files::error_of;
using test_files::read_bytes;
using test_files::TempDir;
using test_files::write_bytes;

namespace fs = std::filesystem;
using convbank::Error;
using convbank::Shape;
using convbank::Tensor;
using Json = nlohmann::json;
namespace io = convbank::io;

const char* const kFixtures = CONVBANK_DATA_DIR "/fixtures/safetensors";

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

// A file: the header length, the header text as given, the buffer.
std::string st_bytes(const std::string& header, const std::string& buffer = {}) {
  return le64(header.size()) + header + buffer;
}

std::string entry(const std::string& dtype, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end) {
  return "{\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": [" +
         std::to_string(begin) + ", " + std::to_string(end) + "]}";
}

template <class T>
std::string raw(const std::vector<T>& values) {
  static_assert(std::endian::native == std::endian::little, "the fixtures are little-endian");
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

io::Safetensors parse(const std::string& bytes, const std::string& name = "bad.safetensors") {
  return io::Safetensors::parse(bytes.data(), bytes.size(), name);
}

// Checks that parsing `bytes` fails naming the file and every fragment in `parts`.
void check_rejected(const std::string& bytes, std::initializer_list<const char*> parts) {
  const std::string message = error_of([&] { parse(bytes); });
  INFO("message: " << message);
  CHECK(contains(message, "safetensors file 'bad.safetensors': "));
  for (const char* part : parts) CHECK(contains(message, part));
}

// Bitwise, so NaN payloads, signed zeros and subnormals count.
bool same_bits(const std::vector<float>& a, const float* b, std::size_t n) {
  return a.size() == n && (n == 0 || std::memcmp(a.data(), b, n * sizeof(float)) == 0);
}

const std::string kSix = raw(std::vector<float>{1, 2, 3, 4, 5, 6});

}  // namespace

TEST_CASE("safetensors: round trip keeps names, ranks, bits and metadata") {
  TempDir dir;
  Tensor w(Shape{4, 2, 3});
  for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] = 0.25f * static_cast<float>(i) - 1;
  w.data()[0] = std::numeric_limits<float>::quiet_NaN();
  w.data()[1] = -0.0f;
  w.data()[2] = std::numeric_limits<float>::denorm_min();
  w.data()[3] = -std::numeric_limits<float>::infinity();
  Tensor x = Tensor::unbatched(2, 5);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i * i);
  Tensor empty(Shape{1, 3, 0});
  const std::string path = dir.file("rt.safetensors");
  io::write_safetensors(path, {{"enc.weight", &w}, {"x", &x}, {"empty", &empty}},
                        {{"format", "pt"}, {"note", "\xc3\xbc \"q\"\n"}});

  const io::Safetensors st = io::Safetensors::open(path);
  CHECK(st.name() == path);
  CHECK(st.keys() == std::vector<std::string>{"empty", "enc.weight", "x"});
  CHECK(st.contains("x"));
  CHECK_FALSE(st.contains("y"));
  CHECK(st.metadata() ==
        std::map<std::string, std::string>{{"format", "pt"}, {"note", "\xc3\xbc \"q\"\n"}});
  CHECK(st.info("enc.weight").dtype == "F32");
  CHECK(st.info("enc.weight").shape == std::vector<std::int64_t>{4, 2, 3});
  CHECK(st.info("x").shape == std::vector<std::int64_t>{2, 5});
  CHECK(st.info("empty").shape == std::vector<std::int64_t>{1, 3, 0});
  CHECK(st.info("empty").numel == 0);
  CHECK(same_bits(st.data("enc.weight"), w.data(), 24));
  const Tensor w2 = st.tensor("enc.weight");
  CHECK(w2.rank() == 3);
  CHECK(w2.shape() == w.shape());
  CHECK(std::memcmp(w2.data(), w.data(), 24 * sizeof(float)) == 0);
  const Tensor x2 = st.tensor("x");
  CHECK(x2.rank() == 2);
  CHECK(x2.shape_string() == "(2, 5)");
  CHECK(same_bits(st.data("x"), x.data(), 10));
  CHECK(st.tensor("empty").shape() == Shape{1, 3, 0});
  CHECK(st.data("empty").empty());

  // The reference layout: a JSON header padded with spaces so the data starts 8-byte aligned,
  // tensors packed in the order given.
  const std::string bytes = read_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK((8 + n) % 8 == 0);
  CHECK(bytes.size() == 8 + n + (24 + 10) * 4);
  const Json header = Json::parse(bytes.substr(8, n));
  CHECK(header["enc.weight"]["data_offsets"] == Json::array({0, 96}));
  CHECK(header["x"]["data_offsets"] == Json::array({96, 136}));
  CHECK(header["empty"]["data_offsets"] == Json::array({136, 136}));
  CHECK(header["__metadata__"]["format"] == "pt");

  // The same bytes parsed from memory give the same tensors.
  const io::Safetensors mem = io::Safetensors::parse(bytes.data(), bytes.size(), "mem");
  CHECK(mem.keys() == st.keys());
  CHECK(same_bits(mem.data("x"), x.data(), 10));

  // No metadata: no "__metadata__" entry; no tensors at all is a valid file too.
  io::write_safetensors(path, {});
  const io::Safetensors none = io::Safetensors::open(path);
  CHECK(none.keys().empty());
  CHECK(none.metadata().empty());
  CHECK(read_bytes(path).substr(8, 2) == "{}");
}

TEST_CASE("safetensors: write errors name the path and the tensor") {
  TempDir dir;
  Tensor t = Tensor::zeros(Shape{1, 1, 4});
  const std::string path = dir.file("w.safetensors");
  CHECK(contains(error_of([&] {
                   io::write_safetensors(path, {{"a", nullptr}});
                 }),
                 "safetensors file '" + path + "': cannot write tensor 'a': null pointer"));
  CHECK(contains(error_of([&] {
                   io::write_safetensors(path, {{"a", &t}, {"a", &t}});
                 }),
                 "cannot write tensor 'a' twice"));
  CHECK(contains(error_of([&] {
                   io::write_safetensors(path, {{"__metadata__", &t}});
                 }),
                 "reserved for metadata"));
  CHECK(contains(error_of([&] {
                   io::write_safetensors(path, {{"bad\xff", &t}});
                 }),
                 "is not valid UTF-8"));
  CHECK(contains(error_of([&] {
                   io::write_safetensors(path, {}, {{"k", "\xc3"}});
                 }),
                 "metadata value of 'k'"));
  CHECK_FALSE(fs::exists(path));
  const std::string nowhere = dir.file("no/such/dir/x.safetensors");
  CHECK(contains(error_of([&] {
                   io::write_safetensors(nowhere, {{"a", &t}});
                 }),
                 "safetensors file '" + nowhere + "': cannot open for writing"));
  if (fs::exists("/dev/full")) {
    Tensor big = Tensor::zeros(Shape{1, 1, 1 << 16});
    const std::string message = error_of([&] {
      io::write_safetensors("/dev/full", {{"big", &big}});
    });
    CHECK(contains(message, "safetensors file '/dev/full': write failed"));
    CHECK(fs::exists("/dev/full"));
  }
}

TEST_CASE("safetensors: files from the Python writer match their .npy copies") {
  const Json cases = Json::parse(read_bytes(std::string(kFixtures) + "/cases.json"));
  REQUIRE(cases["files"].size() >= 8);
  int compared = 0;
  for (const Json& file : cases["files"]) {
    const std::string path = std::string(kFixtures) + "/" + file["file"].get<std::string>();
    INFO("file: " << path);
    const io::Safetensors st = io::Safetensors::open(path);
    CHECK(st.metadata() == file["metadata"].get<std::map<std::string, std::string>>());
    std::vector<std::string> names;
    for (const Json& t : file["tensors"]) names.push_back(t["name"].get<std::string>());
    CHECK(st.keys() == names);
    for (const Json& t : file["tensors"]) {
      const std::string key = t["name"].get<std::string>();
      INFO("tensor: " << key);
      const io::SafetensorsInfo& info = st.info(key);
      CHECK(info.name == key);
      CHECK(info.dtype == t["dtype"].get<std::string>());
      CHECK(info.shape == t["shape"].get<std::vector<std::int64_t>>());
      if (!t.contains("npy")) {
        CHECK(contains(error_of([&] { st.data(key); }),
                       "dtype " + info.dtype + " cannot be read as float32"));
        continue;
      }
      const io::NpyArray expected =
          io::read_npy_array(std::string(kFixtures) + "/" + t["npy"].get<std::string>());
      CHECK(expected.shape == info.shape);
      const std::vector<float> got = st.data(key);
      CHECK(same_bits(got, expected.data.data(), expected.data.size()));
      const Tensor tensor = st.tensor(key);
      CHECK(tensor.numel() == info.numel);
      CHECK(tensor.rank() == (info.shape.size() == 2 ? 2 : 3));
      if (info.shape.size() == 1) CHECK(tensor.shape() == Shape{1, 1, info.shape[0]});
      if (info.shape.size() == 3) {
        CHECK(tensor.shape() == Shape{info.shape[0], info.shape[1], info.shape[2]});
      }
      CHECK(same_bits(got, tensor.data(), static_cast<std::size_t>(tensor.numel())));
      ++compared;
    }
  }
  CHECK(compared >= 20);

  // What the fixtures are there to show, spelled out.
  const io::Safetensors f16 = io::Safetensors::open(std::string(kFixtures) + "/f16.safetensors");
  const std::vector<float> special = f16.data("special");
  CHECK(special[9] == std::ldexp(1.0f, -24));  // smallest subnormal half
  CHECK(std::isinf(special[13]));
  CHECK(std::isnan(special[15]));
  CHECK(std::signbit(special[1]));
  const io::Safetensors sd =
      io::Safetensors::open(std::string(kFixtures) + "/state_dict.safetensors");
  CHECK(sd.info("norm.num_batches_tracked").dtype == "I64");
  CHECK(sd.tensor("encoder.weight").shape() == Shape{8, 1, 16});
  CHECK(sd.tensor("encoder.bias").shape() == Shape{1, 1, 8});
}

TEST_CASE("safetensors: F16 and BF16 convert exactly, for all 65536 bit patterns each") {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const std::string buffer = raw(all);
  const std::string bytes = st_bytes("{\"h\": " + entry("F16", "[65536]", 0, 131072) + ", \"b\": " +
                                         entry("BF16", "[256, 256]", 131072, 262144) + "}",
                                     buffer + buffer);
  const io::Safetensors st = parse(bytes);
  const std::vector<float> h = st.data("h");
  const std::vector<float> b = st.data("b");
  int mismatches = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const double sign = (i & 0x8000) != 0 ? -1.0 : 1.0;
    // IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits; bfloat16: 8 (bias 127), 7.
    const std::uint32_t he = (i >> 10) & 0x1f, hm = i & 0x3ff;
    const std::uint32_t be = (i >> 7) & 0xff, bm = i & 0x7f;
    const auto expect = [&](float got, std::uint32_t e, std::uint32_t m, std::uint32_t e_max,
                            int bias, int mbits, std::uint32_t quiet_bit) {
      if (e == e_max && m != 0) {
        // NaN: sign and quiet bit survive.
        const auto bits = std::bit_cast<std::uint32_t>(got);
        return std::isnan(got) && std::signbit(got) == (sign < 0) &&
               ((bits & 0x400000u) != 0) == ((m & quiet_bit) != 0);
      }
      double value;
      if (e == e_max) {
        value = std::numeric_limits<double>::infinity();
      } else if (e == 0) {
        value = std::ldexp(static_cast<double>(m), 1 - bias - mbits);
      } else {
        value = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mbits),
                           static_cast<int>(e) - bias);
      }
      value *= sign;
      return std::bit_cast<std::uint32_t>(got) ==
             std::bit_cast<std::uint32_t>(static_cast<float>(value));
    };
    if (!expect(h[i], he, hm, 0x1f, 15, 10, 0x200)) ++mismatches;
    if (!expect(b[i], be, bm, 0xff, 127, 7, 0x40)) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("safetensors: tensor() maps ranks as read_npy does; rank 0 and 4 are refused") {
  const std::string header = "{\"r0\": " + entry("F32", "[]", 0, 4) +
                             ", \"r4\": " + entry("F32", "[1, 1, 1, 2]", 4, 12) +
                             ", \"r1\": " + entry("F32", "[6]", 24, 48) + "}";
  const io::Safetensors st = parse(st_bytes(header, kSix + kSix));
  CHECK(st.data("r0") == std::vector<float>{1});
  CHECK(st.info("r0").numel == 1);
  CHECK(st.data("r4") == std::vector<float>{2, 3});
  CHECK(contains(error_of([&] { st.tensor("r0"); }), "tensor 'r0': shape [] has rank 0"));
  CHECK(contains(error_of([&] { st.tensor("r4"); }), "shape [1, 1, 1, 2] has rank 4"));
  CHECK(st.tensor("r1").shape() == Shape{1, 1, 6});
}

TEST_CASE("safetensors: a missing key is named, with the keys the file holds") {
  std::string header = "{";
  for (int i = 0; i < 15; ++i) {
    header +=
        (i > 0 ? ", \"k" : "\"k") + std::to_string(i + 10) + "\": " + entry("F32", "[0]", 0, 0);
  }
  const io::Safetensors st = parse(st_bytes(header + "}"), "w.safetensors");
  const std::string message = error_of([&] { st.info("encoder.weight"); });
  CHECK(contains(message, "safetensors file 'w.safetensors': no tensor named 'encoder.weight'"));
  CHECK(contains(message, "holds 15 tensors: 'k10', 'k11'"));
  CHECK(contains(message, "'k19', ... (5 more)"));
  CHECK_FALSE(contains(message, "k20"));
  CHECK(contains(error_of([&] { st.data("x"); }), "no tensor named 'x'"));
  CHECK(contains(error_of([&] { st.tensor("x"); }), "no tensor named 'x'"));
  CHECK(contains(error_of([&] { parse(st_bytes("{}")).info("a"); }), "the file holds no tensors"));
}

TEST_CASE("safetensors: header length and truncation are rejected") {
  const std::string good = st_bytes("{\"a\": " + entry("F32", "[6]", 0, 24) + "}", kSix);
  CHECK(parse(good).data("a").size() == 6);
  check_rejected("", {"0 bytes is too short for the 8-byte header length"});
  check_rejected(good.substr(0, 7), {"7 bytes is too short"});
  check_rejected(le64(1000) + "{}",
                 {"header length 1000 extends beyond the end of the file", "the file is 10 bytes"});
  check_rejected(le64(~0ULL) + "{}", {"header length 18446744073709551615 extends beyond"});
  // Within the file but over the cap: reject before allocating or parsing.
  std::string huge = le64(100'000'001) + std::string(100'000'001, ' ');
  check_rejected(huge, {"header length 100000001 exceeds the limit of 100000000 bytes"});
  huge.clear();
  huge.shrink_to_fit();
  check_rejected(le64(0), {"header must be a JSON object starting with '{', got an empty header"});
  // Truncated data: the offsets now point past the buffer.
  check_rejected(good.substr(0, good.size() - 1),
                 {"tensor 'a': data_offsets [0, 24] extends beyond the data buffer, which is 23 "
                  "bytes"});
  // A length that cuts the JSON short.
  std::string cut = good;
  cut[0] = static_cast<char>(cut[0] - 2);
  check_rejected(cut, {"header is not valid JSON"});
  CHECK(contains(error_of([] { io::Safetensors::parse(nullptr, 8, "null"); }), "null buffer"));
}

TEST_CASE("safetensors: malformed JSON and wrongly typed fields are rejected") {
  check_rejected(st_bytes("{\"a\": "), {"header is not valid JSON", "parse error"});
  check_rejected(st_bytes("{\"a\": 1,}"), {"header is not valid JSON"});
  check_rejected(st_bytes("{\"a\x01\": 1}"), {"header is not valid JSON"});
  check_rejected(st_bytes("{} {}"), {"header is not valid JSON"});
  check_rejected(st_bytes(std::string("{}\0{\"a\": 1}", 11)),
                 {"header is not valid JSON: NUL byte at offset 2"});
  check_rejected(st_bytes("{\"\xff\": {}}"), {"ill-formed UTF-8", "last read: '\"\\xff'"});
  check_rejected(st_bytes("[1, 2]"),
                 {"header must be a JSON object starting with '{', got '[1, 2]'"});
  check_rejected(st_bytes("\xef\xbb\xbf{}"), {"starting with '{', got '\\xef\\xbb\\xbf{}'"});
  check_rejected(st_bytes(" {}"), {"starting with '{'"});
  check_rejected(st_bytes("{\"a\": " + std::string(40, '[') + std::string(40, ']') + "}"),
                 {"nests deeper than 32 levels"});
  check_rejected(st_bytes("{\"w\": 7}"), {"tensor 'w': entry must be an object", "got number 7"});
  check_rejected(st_bytes("{\"w\": [\"F32\"]}"), {"tensor 'w': entry must be an object"});
  check_rejected(st_bytes("{\"w\": {\"shape\": [6], \"data_offsets\": [0, 24]}}", kSix),
                 {"tensor 'w': missing field 'dtype'"});
  check_rejected(st_bytes("{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 24]}}", kSix),
                 {"tensor 'w': missing field 'shape'"});
  check_rejected(st_bytes("{\"w\": {\"dtype\": \"F32\", \"shape\": [6]}}", kSix),
                 {"tensor 'w': missing field 'data_offsets'"});
  check_rejected(st_bytes("{\"w\": {\"dtype\": 4, \"shape\": [6], \"data_offsets\": [0, 24]}}"),
                 {"tensor 'w': 'dtype' must be a string, got number 4"});
  check_rejected(st_bytes("{\"w\": {\"dtype\": \"F32\", \"shape\": 6, \"data_offsets\": [0, 24]}}"),
                 {"tensor 'w': 'shape' must be an array of integers, got number 6"});
  check_rejected(
      st_bytes("{\"w\": {\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": \"0-24\"}}"),
      {"tensor 'w': 'data_offsets' must be an array [begin, end], got string \"0-24\""});
  // Fields the format does not define are ignored, as the reference reader ignores them.
  CHECK(parse(st_bytes("{\"w\": {\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": [0, 24], "
                       "\"extra\": 1}}",
                       kSix))
            .contains("w"));
  // Keys with control characters are escaped in messages.
  check_rejected(st_bytes("{\"a\\u0007b\": 1}"), {"tensor 'a\\x07b': entry must be an object"});
}

TEST_CASE("safetensors: unknown dtypes are rejected; integer dtypes open but do not convert") {
  check_rejected(st_bytes("{\"w\": " + entry("F17", "[6]", 0, 24) + "}", kSix),
                 {"tensor 'w': unknown dtype 'F17'", "known: BOOL, U8"});
  check_rejected(st_bytes("{\"w\": " + entry("f32", "[6]", 0, 24) + "}", kSix),
                 {"unknown dtype 'f32'"});
  check_rejected(st_bytes("{\"w\": " + entry("F4", "[6]", 0, 3) + "}", kSix),
                 {"tensor 'w': dtype 'F4' packs elements into sub-byte fields"});
  const std::string header = "{\"i\": " + entry("I64", "[3]", 0, 24) +
                             ", \"u\": " + entry("U8", "[2, 2]", 0, 4) +
                             ", \"e\": " + entry("I32", "[0]", 24, 24) + "}";
  // 'u' lies inside 'i': overlap, so give each its own bytes.
  const std::string separate = "{\"i\": " + entry("I64", "[2]", 0, 16) +
                               ", \"u\": " + entry("U8", "[2, 2]", 16, 20) +
                               ", \"e\": " + entry("I32", "[0]", 24, 24) + "}";
  check_rejected(st_bytes(header, kSix), {"overlap"});
  const io::Safetensors st = parse(st_bytes(separate, kSix));
  CHECK(st.info("i").dtype == "I64");
  CHECK(contains(error_of([&] { st.data("i"); }),
                 "tensor 'i': dtype I64 cannot be read as float32 (supported: F32, F64, F16, "
                 "BF16)"));
  CHECK(contains(error_of([&] { st.tensor("u"); }), "dtype U8 cannot be read as float32"));
  CHECK(contains(error_of([&] { st.data("e"); }), "dtype I32 cannot be read"));
}

TEST_CASE("safetensors: shapes must be non-negative integers whose product fits") {
  const auto with_shape = [](const std::string& shape, std::uint64_t end = 24) {
    return st_bytes("{\"w\": " + entry("F32", shape, 0, end) + "}", kSix);
  };
  check_rejected(with_shape("[-6]"), {"tensor 'w': shape entry 0 of [-6] is negative (-6)"});
  check_rejected(with_shape("[2, -3]"), {"shape entry 1 of [2,-3] is negative (-3)"});
  check_rejected(with_shape("[6.0]"),
                 {"shape entry 0 of [6.0] must be a non-negative integer", "got number 6.0"});
  check_rejected(with_shape("[\"6\"]"), {"got string \"6\""});
  check_rejected(with_shape("[null]"), {"got null"});
  CHECK(parse(with_shape("[-0, 5]", 0)).info("w").shape == std::vector<std::int64_t>{0, 5});
  check_rejected(with_shape("[[6]]"), {"got array [6]"});
  check_rejected(with_shape("[9223372036854775808]"),
                 {"shape entry 0 of [9223372036854775808] is 9223372036854775808, more than the "
                  "limit 9223372036854775807"});
  check_rejected(with_shape("[18446744073709551616]"),  // parses as a double
                 {"must be a non-negative integer"});
  check_rejected(with_shape("[4294967296, 4294967296]"),
                 {"tensor 'w': the product of the dimensions of shape [4294967296, 4294967296] "
                  "overflows 64 bits"});
  // An empty tensor is no excuse: downstream code multiplies the dimensions in any order.
  check_rejected(with_shape("[4294967296, 4294967296, 0]", 0), {"overflows 64 bits"});
  // The product fits in 63 bits, the byte count in 64 only for 1-byte types.
  check_rejected(st_bytes("{\"w\": " + entry("F64", "[1152921504606846976, 2]", 0, 0) + "}"),
                 {"needs more bytes than 64 bits can count"});
  CHECK(parse(with_shape("[0, 9223372036854775807]", 0)).info("w").numel == 0);
}

TEST_CASE("safetensors: data_offsets must be [begin, end] inside the buffer, sized by shape") {
  const auto with_offsets = [](const std::string& offsets) {
    return st_bytes(
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": " + offsets + "}}", kSix);
  };
  CHECK(parse(with_offsets("[0, 24]")).data("w") == std::vector<float>{1, 2, 3, 4, 5, 6});
  check_rejected(with_offsets("[0]"),
                 {"'data_offsets' must be an array [begin, end], got array [0]"});
  check_rejected(with_offsets("[0, 12, 24]"), {"got array [0,12,24]"});
  check_rejected(with_offsets("{\"begin\": 0}"), {"got object"});
  check_rejected(with_offsets("[-4, 20]"), {"tensor 'w': data_offsets begin is negative (-4)"});
  check_rejected(with_offsets("[0, 24.5]"), {"data_offsets end must be a non-negative integer"});
  check_rejected(with_offsets("[24, 0]"), {"tensor 'w': data_offsets [24, 0] has begin > end"});
  check_rejected(with_offsets("[4, 28]"),
                 {"tensor 'w': data_offsets [4, 28] extends beyond the data buffer, which is 24 "
                  "bytes"});
  check_rejected(with_offsets("[18446744073709551615, 18446744073709551615]"),
                 {"extends beyond the data buffer"});
  check_rejected(with_offsets("[0, 20]"),
                 {"tensor 'w': data_offsets [0, 20] holds 20 bytes, but shape [6] of F32 needs "
                  "24 (6 x 4)"});
  check_rejected(with_offsets("[0, 0]"), {"holds 0 bytes, but shape [6] of F32 needs 24"});
}

TEST_CASE("safetensors: overlapping tensors are rejected; holes and empty tensors are not") {
  const auto two = [](std::uint64_t a0, std::uint64_t a1, std::uint64_t b0, std::uint64_t b1) {
    return st_bytes(
        "{\"a\": " + entry("F32", "[" + std::to_string((a1 - a0) / 4) + "]", a0, a1) +
            ", \"b\": " + entry("F32", "[" + std::to_string((b1 - b0) / 4) + "]", b0, b1) + "}",
        kSix);
  };
  check_rejected(two(0, 16, 8, 24),
                 {"tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [8, 24]) overlap"});
  check_rejected(two(8, 24, 0, 12), {"tensors 'b' (data_offsets [0, 12]) and 'a'"});
  check_rejected(two(0, 24, 4, 8), {"overlap"});  // one inside the other
  check_rejected(two(4, 8, 4, 8), {"overlap"});   // the same bytes twice
  // Adjacent, with holes before, between and after: the format allows holes.
  const io::Safetensors holes = parse(two(4, 8, 12, 20));
  CHECK(holes.data("a") == std::vector<float>{2});
  CHECK(holes.data("b") == std::vector<float>{4, 5});
  CHECK(parse(two(0, 12, 12, 24)).data("b") == std::vector<float>{4, 5, 6});
  // Empty tensors occupy no bytes, wherever their offsets point.
  CHECK(parse(two(0, 24, 8, 8)).data("b").empty());
  CHECK(parse(two(24, 24, 0, 24)).data("a").empty());
  // Three tensors where only the first and last overlap once sorted.
  check_rejected(
      st_bytes("{\"a\": " + entry("F32", "[1]", 0, 4) + ", \"b\": " + entry("F32", "[2]", 4, 12) +
                   ", \"c\": " + entry("F32", "[2]", 8, 16) + "}",
               kSix),
      {"tensors 'b' (data_offsets [4, 12]) and 'c' (data_offsets [8, 16]) overlap"});
}

TEST_CASE("safetensors: duplicate keys are rejected wherever they are") {
  const std::string a = entry("F32", "[1]", 0, 4);
  const std::string b = entry("F32", "[1]", 4, 8);
  check_rejected(st_bytes("{\"a\": " + a + ", \"a\": " + b + "}", kSix),
                 {"duplicate key 'a' in the header"});
  check_rejected(st_bytes("{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F16\", \"shape\": [1], "
                          "\"data_offsets\": [0, 4]}}",
                          kSix),
                 {"tensor 'a': duplicate field 'dtype'"});
  check_rejected(st_bytes("{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}"),
                 {"__metadata__ has a duplicate key 'k'"});
  check_rejected(st_bytes("{\"__metadata__\": {}, \"__metadata__\": {}}"),
                 {"duplicate key '__metadata__' in the header"});
  check_rejected(st_bytes("{\"a\": {\"x\": {\"y\": 1, \"y\": 2}}}"),
                 {"duplicate key 'y' inside the entry 'a'"});
  // The same key in different objects is no duplicate.
  CHECK(parse(st_bytes("{\"a\": " + a + ", \"b\": " + b + ", \"__metadata__\": {\"a\": \"x\"}}",
                       kSix))
            .metadata()
            .at("a") == "x");
}

TEST_CASE("safetensors: metadata must map strings to strings") {
  CHECK(parse(st_bytes("{\"__metadata__\": {}}")).metadata().empty());
  check_rejected(st_bytes("{\"__metadata__\": [\"a\"]}"),
                 {"__metadata__ must be an object of strings, got array"});
  check_rejected(st_bytes("{\"__metadata__\": {\"epoch\": 3}}"),
                 {"__metadata__ key 'epoch': value must be a string, got number 3"});
  check_rejected(st_bytes("{\"__metadata__\": {\"cfg\": {\"lr\": \"1\"}}}"),
                 {"__metadata__ key 'cfg': value must be a string, got object"});
  check_rejected(st_bytes("{\"__metadata__\": {\"x\": null}}"), {"got null"});
}

TEST_CASE("safetensors: file errors name the path") {
  TempDir dir;
  const std::string missing = dir.file("missing.safetensors");
  CHECK(contains(error_of([&] { io::Safetensors::open(missing); }),
                 "safetensors file '" + missing + "': cannot open: No such file or directory"));
  fs::create_directories(dir.file("a_dir.safetensors"));
  CHECK(contains(error_of([&] { io::Safetensors::open(dir.file("a_dir.safetensors")); }),
                 dir.file("a_dir.safetensors")));
  write_bytes(dir.file("empty.safetensors"), "");
  CHECK(contains(error_of([&] { io::Safetensors::open(dir.file("empty.safetensors")); }),
                 "0 bytes is too short"));
  const std::string good = st_bytes("{\"a\": " + entry("F32", "[6]", 0, 24) + "}", kSix);
  write_bytes(dir.file("short.safetensors"), good.substr(0, good.size() - 4));
  std::string message = error_of([&] { io::Safetensors::open(dir.file("short.safetensors")); });
  CHECK(contains(message, "safetensors file '" + dir.file("short.safetensors") +
                              "': tensor 'a': data_offsets [0, 24] extends beyond the data "
                              "buffer, which is 20 bytes"));
  write_bytes(dir.file("len.safetensors"), le64(4096) + "{}");
  message = error_of([&] { io::Safetensors::open(dir.file("len.safetensors")); });
  CHECK(contains(message, "header length 4096 extends beyond the end of the file"));
  write_bytes(dir.file("json.safetensors"), st_bytes("{\"a\" 1}"));
  CHECK(contains(error_of([&] { io::Safetensors::open(dir.file("json.safetensors")); }),
                 "header is not valid JSON"));
  write_bytes(dir.file("ok.safetensors"), good);
  CHECK(io::Safetensors::open(dir.file("ok.safetensors")).data("a").size() == 6);
}

namespace {

// One random edit of a valid header's JSON: the fields a hostile or buggy writer gets wrong.
void mutate_json(Json& header, std::mt19937_64& rng) {
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::vector<Json> numbers = {0,
                                     1,
                                     2,
                                     3,
                                     4,
                                     7,
                                     8,
                                     24,
                                     -1,
                                     -8,
                                     255,
                                     65536,
                                     4294967296LL,
                                     std::numeric_limits<std::int64_t>::max(),
                                     std::numeric_limits<std::int64_t>::min(),
                                     std::numeric_limits<std::uint64_t>::max(),
                                     std::uint64_t{1} << 63,
                                     std::uint64_t{1} << 62,
                                     0.5,
                                     1e300,
                                     "4",
                                     nullptr,
                                     true,
                                     Json::array(),
                                     Json::object()};
  const auto number = [&]() -> Json {
    // Small values near real sizes are where off-by-one bugs live.
    if (rng() % 2 == 0) return static_cast<std::int64_t>(rng() % 600) - 8;
    return numbers[pick(numbers.size())];
  };
  const std::vector<std::string> dtypes = {"F32",     "F16", "BF16", "F64", "I64", "U8",   "BOOL",
                                           "F8_E4M3", "C64", "F4",   "f32", "",    "F32 ", "I128"};
  if (!header.is_object() || header.empty()) {
    header = Json::parse("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}");
    return;
  }
  auto it = header.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(pick(header.size())));
  Json& e = it.value();
  if (it.key() == "__metadata__" || !e.is_object()) {
    switch (rng() % 3) {
      case 0:
        e = number();
        break;
      case 1:
        e = Json::object({{"k", number()}});
        break;
      default:
        header.erase(it);
        break;
    }
    return;
  }
  switch (rng() % 12) {
    case 0:
    case 1:
      if (e["data_offsets"].is_array() && e["data_offsets"].size() == 2) {
        e["data_offsets"][pick(2)] = number();
      }
      break;
    case 2:
      e["data_offsets"] = Json::array({number(), number()});
      break;
    case 3:
      if (e["data_offsets"].is_array()) e["data_offsets"].push_back(number());
      break;
    case 4:
    case 5:
      if (e["shape"].is_array() && !e["shape"].empty()) {
        e["shape"][pick(e["shape"].size())] = number();
      } else {
        e["shape"] = Json::array({number()});
      }
      break;
    case 6:
      if (e["shape"].is_array()) {
        if (rng() % 2 == 0 || e["shape"].empty()) {
          e["shape"].push_back(number());
        } else {
          e["shape"].erase(e["shape"].size() - 1);
        }
      }
      break;
    case 7:
      e["dtype"] = rng() % 8 == 0 ? number() : Json(dtypes[pick(dtypes.size())]);
      break;
    case 8: {
      static const char* const kFields[] = {"dtype", "shape", "data_offsets"};
      e.erase(kFields[pick(3)]);
      break;
    }
    case 9:
      e = number();
      break;
    case 10:
      // Another tensor over this one's bytes, or a copy of it under a new name.
      header["copy" + std::to_string(rng() % 4)] = e;
      break;
    default:
      header["__metadata__"] = Json::object({{"k", rng() % 2 == 0 ? Json("v") : number()}});
      break;
  }
}

// A file from a header, optionally re-padded, with a header length that may lie.
std::string assemble(const std::string& text, const std::string& buffer, std::mt19937_64& rng) {
  std::string file = st_bytes(text, buffer);
  if (rng() % 8 == 0) {
    const std::uint64_t n = text.size();
    const std::uint64_t lies[] = {n + 1, n - 1, n + buffer.size(), n + buffer.size() + 1,
                                  static_cast<std::uint64_t>(rng())};
    const std::string len = le64(lies[rng() % 5]);
    file.replace(0, 8, len);
  }
  return file;
}

}  // namespace

TEST_CASE("safetensors: 20000 corrupted files throw convbank::Error or load, never crash") {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(20240611);
  // Seeds: the Python fixtures (every dtype, holes, empty tensors, metadata) and a file of our
  // own writer.
  std::vector<std::string> seeds;
  for (const char* f : {"f32_ranks", "f16", "bf16", "f64", "holes", "empty", "state_dict"}) {
    seeds.push_back(read_bytes(std::string(kFixtures) + "/" + f + ".safetensors"));
    REQUIRE(seeds.back().size() > 8);
  }
  {
    TempDir dir;
    Tensor t = Tensor::zeros(Shape{2, 3, 4});
    Tensor u = Tensor::unbatched(1, 3);
    for (int i = 0; i < 3; ++i) u.data()[i] = static_cast<float>(i);
    io::write_safetensors(dir.file("s.safetensors"), {{"t", &t}, {"u", &u}}, {{"m", "v"}});
    seeds.push_back(read_bytes(dir.file("s.safetensors")));
  }
  static const char kInteresting[] = "{}[],:\"-0123456789.eE \\u_FBIU\0\xff\x80";
  const std::string interesting(kInteresting, sizeof kInteresting - 1);
  int loaded = 0, rejected = 0, tensors_read = 0;
  constexpr int kCases = 20000;
  for (int iteration = 0; iteration < kCases; ++iteration) {
    const std::string& seed = seeds[static_cast<std::size_t>(iteration) % seeds.size()];
    std::uint64_t n = 0;
    std::memcpy(&n, seed.data(), 8);
    const std::string text = seed.substr(8, n);
    const std::string buffer = seed.substr(8 + n);
    std::string bytes;
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 5) {
      // Structured: still valid JSON, wrong in its meaning.
      Json header = Json::parse(text);
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < edits; ++i) mutate_json(header, rng);
      std::string new_text = header.dump();
      if (rng() % 2 == 0) new_text.resize((new_text.size() + 7) / 8 * 8, ' ');
      std::string new_buffer = buffer;
      if (rng() % 4 == 0) new_buffer.resize(rng() % (buffer.size() + 9));
      bytes = assemble(new_text, new_buffer, rng);
    } else if (kind < 7) {
      // Textual: a duplicated key, a cut or a stray byte in the JSON text.
      std::string new_text = text;
      const std::size_t at = rng() % new_text.size();
      switch (rng() % 4) {
        case 0: {
          // The first entry (`"key": {...}`; entries hold no nested objects) once more.
          const std::size_t close = new_text.find('}');
          if (close != std::string::npos && close > 1) {
            new_text.insert(1, new_text.substr(1, close) + ", ");
          }
          break;
        }
        case 1:
          new_text.resize(at);
          break;
        case 2:
          new_text[at] = interesting[rng() % interesting.size()];
          break;
        default:
          new_text.insert(at, 1, interesting[rng() % interesting.size()]);
          break;
      }
      bytes = assemble(new_text, buffer, rng);
    } else {
      // Raw bytes: flips anywhere, truncation, header-length edits.
      bytes = seed;
      const int mutations = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < mutations && !bytes.empty(); ++m) {
        const std::size_t at = rng() % bytes.size();
        switch (rng() % 5) {
          case 0:
            bytes.resize(at);
            break;
          case 1:
            bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
            break;
          case 2:
            bytes[at] = static_cast<char>(rng());
            break;
          case 3:
            if (bytes.size() >= 8) bytes[rng() % 8] = static_cast<char>(rng());
            break;
          default:
            if (bytes.size() >= 8) {
              std::uint64_t len = 0;
              std::memcpy(&len, bytes.data(), 8);
              len += static_cast<std::uint64_t>(static_cast<std::int64_t>(rng() % 17) - 8);
              bytes.replace(0, 8, le64(len));
            }
            break;
        }
      }
    }

    // An exactly-sized heap copy, so a sanitizer build sees any read past the end.
    const std::vector<unsigned char> file(bytes.begin(), bytes.end());
    try {
      const io::Safetensors st = io::Safetensors::parse(file.data(), file.size(), "fuzz");
      for (const std::string& key : st.keys()) {
        const io::SafetensorsInfo& info = st.info(key);
        std::uint64_t numel = 1;
        for (std::int64_t d : info.shape) {
          if (d < 0) FAIL("negative dimension accepted in " << key);
          numel *= static_cast<std::uint64_t>(d);
        }
        if (numel != static_cast<std::uint64_t>(info.numel) || info.data_begin > info.data_end) {
          FAIL("inconsistent info for " << key);
        }
        try {
          if (st.data(key).size() != numel) FAIL("data() size differs from numel for " << key);
          const Tensor t = st.tensor(key);
          if (static_cast<std::uint64_t>(t.numel()) != numel) FAIL("tensor() size for " << key);
          ++tensors_read;
        } catch (const Error&) {
          // An integer dtype or a rank tensor() does not take: refused by name, fine.
        }
      }
      ++loaded;
    } catch (const Error& e) {
      if (!contains(e.what(), "safetensors file 'fuzz': ")) FAIL("unnamed error: " << e.what());
      ++rejected;
    } catch (const std::exception& e) {
      FAIL("case " << iteration << " threw a non-convbank exception: " << e.what());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("corrupted safetensors files: " << kCases << " cases, " << loaded << " loaded, "
                                          << rejected << " rejected, " << tensors_read
                                          << " tensors read, " << seconds << " s");
  CHECK(loaded + rejected == kCases);
  CHECK(rejected > kCases / 2);
  CHECK(loaded > kCases / 20);
}
