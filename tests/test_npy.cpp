// .npy reading and writing: round trips, NumPy's exact byte layout, every rejected input with
// its message, and a corruption loop that feeds thousands of damaged files to the parser.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convbank/error.hpp"
#include "convbank/io/npy.hpp"
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
namespace io = convbank::io;

std::string dict(const std::string& descr, const std::string& shape,
                 const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

// An .npy file: magic, version, header length, the header padded as NumPy pads it, data.
std::string npy_bytes(std::string header, const std::string& data = {}, int major = 1) {
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble = 8 + length_bytes;
  const std::size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.resize(total - preamble - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i) {
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return out + header + data;
}

template <class T>
std::string raw(const std::vector<T>& values) {
  static_assert(std::endian::native == std::endian::little, "the fixtures are little-endian");
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string parse_error(const std::string& bytes) {
  return error_of([&] { io::parse_npy(bytes.data(), bytes.size(), "bad.npy"); });
}

// Checks that parsing `bytes` fails naming the file and every fragment in `parts`.
void check_rejected(const std::string& bytes, std::initializer_list<const char*> parts) {
  const std::string message = parse_error(bytes);
  INFO("message: " << message);
  CHECK(contains(message, "NPY file 'bad.npy': "));
  for (const char* part : parts) CHECK(contains(message, part));
}

}  // namespace

TEST_CASE("npy: rank-3 tensor round trip, with NumPy's header and 64-byte alignment") {
  TempDir dir;
  Tensor t(Shape{2, 3, 5});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = 0.25f * static_cast<float>(i) - 3.0f;
  const std::string path = dir.file("t.npy");
  io::write_npy(path, t);

  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() == 128 + 30 * 4);
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len = static_cast<unsigned char>(bytes[8]) |
                                 static_cast<std::size_t>(static_cast<unsigned char>(bytes[9]))
                                     << 8;
  CHECK((10 + header_len) % 64 == 0);
  CHECK(bytes[10 + header_len - 1] == '\n');
  CHECK(contains(bytes.substr(10, header_len),
                 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5), }"));

  const Tensor r = io::read_npy(path);
  CHECK(r.rank() == 3);
  CHECK(r.shape() == Shape{2, 3, 5});
  CHECK(std::memcmp(r.data(), t.data(), 30 * sizeof(float)) == 0);
  CHECK(io::read_npy_shape(path) == std::vector<std::int64_t>{2, 3, 5});
}

TEST_CASE("npy: writes the bytes NumPy writes") {
  // np.save(f, np.array([[0, 1.5, -2], [3, 4, 5e-3]], dtype='<f4'))
  const std::string numpy_file =
      std::string("\x93NUMPY\x01\x00v\x00", 10) +
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') + "\n" +
      std::string(
          "\x00\x00\x00\x00\x00\x00\xc0\x3f\x00\x00\x00\xc0\x00\x00\x40\x40\x00\x00\x80"
          "\x40\x0a\xd7\xa3\x3b",
          24);
  REQUIRE(numpy_file.size() == 152);
  TempDir dir;
  const Tensor t = [] {
    Tensor x = Tensor::unbatched(2, 3);
    const float v[] = {0.0f, 1.5f, -2.0f, 3.0f, 4.0f, 5e-3f};
    std::memcpy(x.data(), v, sizeof(v));
    return x;
  }();
  io::write_npy(dir.file("a.npy"), t);
  CHECK(read_bytes(dir.file("a.npy")) == numpy_file);
  const io::NpyArray a = io::parse_npy(numpy_file.data(), numpy_file.size(), "numpy.npy");
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(a.data == std::vector<float>{0.0f, 1.5f, -2.0f, 3.0f, 4.0f, 5e-3f});
}

TEST_CASE("npy: rank-2 round trip gives an unbatched tensor") {
  TempDir dir;
  Tensor t = Tensor::unbatched(3, 7);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(i * i) / 7.0f;
  io::write_npy(dir.file("u.npy"), t);
  const Tensor r = io::read_npy(dir.file("u.npy"));
  CHECK(r.rank() == 2);
  CHECK(r.shape() == Shape{1, 3, 7});
  CHECK(r.shape_string() == "(3, 7)");
  CHECK(std::memcmp(r.data(), t.data(), 21 * sizeof(float)) == 0);
  CHECK(io::read_npy_array(dir.file("u.npy")).shape == std::vector<std::int64_t>{3, 7});
}

TEST_CASE("npy: rank 1 is written as a 1-tuple and read as (1, 1, T)") {
  TempDir dir;
  const std::vector<float> v = {1.0f, -2.0f, 3.5f, 0.0f, 1e-30f};
  io::write_npy(dir.file("v.npy"), {5}, v.data());
  CHECK(contains(read_bytes(dir.file("v.npy")), "'shape': (5,), }"));
  const Tensor r = io::read_npy(dir.file("v.npy"));
  CHECK(r.rank() == 3);
  CHECK(r.shape() == Shape{1, 1, 5});
  CHECK(std::vector<float>(r.data(), r.data() + 5) == v);
  const io::NpyArray a = io::read_npy_array(dir.file("v.npy"));
  CHECK(a.shape == std::vector<std::int64_t>{5});
  CHECK(a.data == v);
}

TEST_CASE("npy: rank 0 and rank 4 parse as arrays, read_npy rejects them") {
  TempDir dir;
  const float scalar = 2.5f;
  io::write_npy(dir.file("s.npy"), {}, &scalar);
  CHECK(contains(read_bytes(dir.file("s.npy")), "'shape': (), }"));
  const io::NpyArray s = io::read_npy_array(dir.file("s.npy"));
  CHECK(s.shape.empty());
  CHECK(s.data == std::vector<float>{2.5f});

  const std::vector<float> four(24, 1.0f);
  io::write_npy(dir.file("r4.npy"), {1, 2, 3, 4}, four.data());
  CHECK(io::read_npy_array(dir.file("r4.npy")).shape == std::vector<std::int64_t>{1, 2, 3, 4});
  for (const char* name : {"s.npy", "r4.npy"}) {
    const std::string message = error_of([&] { io::read_npy(dir.file(name)); });
    INFO(message);
    CHECK(contains(message, dir.file(name)));
    CHECK(contains(message, std::string(name) == "s.npy" ? "rank 0" : "rank 4"));
    CHECK(contains(message, "rank 1 (frames), 2 (channels, frames) or 3"));
  }
}

TEST_CASE("npy: empty arrays round trip") {
  TempDir dir;
  Tensor t(Shape{2, 0, 4});
  io::write_npy(dir.file("e.npy"), t);
  const Tensor r = io::read_npy(dir.file("e.npy"));
  CHECK(r.shape() == Shape{2, 0, 4});
  CHECK(r.empty());
}

TEST_CASE("npy: float64 is converted to float32, as numpy's astype rounds") {
  const std::vector<double> values = {0.1, -0.5, 1e40, -1e40, 1.0 / 3.0, 1e-50};
  const std::string bytes = npy_bytes(dict("<f8", "(2, 3)"), raw(values));
  const io::NpyArray a = io::parse_npy(bytes.data(), bytes.size(), "f8.npy");
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  REQUIRE(a.data.size() == 6);
  CHECK(a.data[0] == 0.1f);
  CHECK(a.data[1] == -0.5f);
  CHECK(a.data[2] == std::numeric_limits<float>::infinity());
  CHECK(a.data[3] == -std::numeric_limits<float>::infinity());
  CHECK(a.data[4] == static_cast<float>(1.0 / 3.0));
  CHECK(a.data[5] == 0.0f);

  // The file path goes through the chunked conversion, which must agree with the buffer path.
  TempDir dir;
  std::vector<double> many(200000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = std::sin(0.001 * static_cast<double>(i));
  write_bytes(dir.file("many.npy"), npy_bytes(dict("<f8", "(2, 100000)"), raw(many)));
  const Tensor t = io::read_npy(dir.file("many.npy"));
  CHECK(t.rank() == 2);
  CHECK(t.shape() == Shape{1, 2, 100000});
  bool all_equal = true;
  for (std::size_t i = 0; i < many.size(); ++i)
    all_equal &= t.data()[i] == static_cast<float>(many[i]);
  CHECK(all_equal);
}

TEST_CASE("npy: version 2.0 and 3.0 headers, native byte order, Python 2 longs") {
  const std::vector<float> v = {1.0f, 2.0f, 3.0f, 4.0f};
  for (int major : {2, 3}) {
    const std::string bytes = npy_bytes(dict("<f4", "(2, 2)"), raw(v), major);
    const io::NpyArray a = io::parse_npy(bytes.data(), bytes.size(), "v2.npy");
    CHECK(a.shape == std::vector<std::int64_t>{2, 2});
    CHECK(a.data == v);
  }
  const std::string native = npy_bytes(dict("=f4", "(4,)"), raw(v));
  CHECK(io::parse_npy(native.data(), native.size(), "n.npy").data == v);
  const std::string longs =
      npy_bytes("{'descr':'<f4','fortran_order':False,'shape':(2L,2L)}", raw(v));
  CHECK(io::parse_npy(longs.data(), longs.size(), "l.npy").shape ==
        std::vector<std::int64_t>{2, 2});
  const std::string keys_reordered =
      npy_bytes("{\"shape\": (1, 4), \"fortran_order\": False, \"descr\": \"<f4\"}", raw(v));
  CHECK(io::parse_npy(keys_reordered.data(), keys_reordered.size(), "k.npy").data == v);

  TempDir dir;
  write_bytes(dir.file("v3.npy"), npy_bytes(dict("<f4", "(1, 2, 2)"), raw(v), 3));
  CHECK(io::read_npy(dir.file("v3.npy")).shape() == Shape{1, 2, 2});
}

TEST_CASE("npy: bad magic, version and header length are rejected") {
  const std::string good = npy_bytes(dict("<f4", "(2,)"), raw(std::vector<float>{1, 2}));
  std::string bad = good;
  bad[5] = 'X';
  check_rejected(bad, {"bad magic"});
  check_rejected("PK\x03\x04 a zip file", {"bad magic"});
  check_rejected("", {"0 bytes is too short"});
  check_rejected(std::string("\x93NUMPY\x01", 7), {"too short"});
  check_rejected(std::string("\x93NUMPY\x02\x00\x10", 9), {"too short"});

  bad = good;
  bad[6] = 4;
  check_rejected(bad, {"unsupported NPY format version 4.0", "1.0, 2.0, 3.0"});
  bad = good;
  bad[7] = 1;
  check_rejected(bad, {"unsupported NPY format version 1.1"});

  bad = good;
  bad[8] = static_cast<char>(0xe8);  // 1000
  bad[9] = 0x03;
  check_rejected(bad, {"header length 1000 extends beyond the end of the file", "136 bytes"});
  // Version 2.0: a 4-byte length that is nowhere near the file's size.
  const std::string big = std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12) + "{}";
  check_rejected(big, {"header length 2147483647 extends beyond"});
}

TEST_CASE("npy: malformed header dicts are rejected") {
  const std::string data = raw(std::vector<float>{1, 2, 3, 4, 5, 6});
  check_rejected(npy_bytes("{'descr': '<f4', 'fortran_order': False}", data),
                 {"malformed header dict", "missing key 'shape'"});
  check_rejected(npy_bytes("{'fortran_order': False, 'shape': (6,)}", data),
                 {"missing key 'descr'"});
  check_rejected(npy_bytes("{'descr': '<f4', 'shape': (6,)}", data),
                 {"missing key 'fortran_order'"});
  check_rejected(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data),
                 {"unexpected key 'x'"});
  check_rejected(npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False}", data),
                 {"duplicate key 'descr'"});
  check_rejected(npy_bytes("'descr': '<f4'", data), {"does not start with '{'"});
  check_rejected(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} junk", data),
                 {"unexpected text after the closing '}'"});
  check_rejected(npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}", data),
                 {"malformed header dict"});
  check_rejected(npy_bytes("{'descr': '<f4", data), {"unterminated string"});
  check_rejected(npy_bytes("{'descr': <f4, 'fortran_order': False, 'shape': (6,)}", data),
                 {"'descr' to be a string"});
  check_rejected(npy_bytes(dict("<f4", "(6,)", "0"), data), {"must be True or False"});
  check_rejected(npy_bytes("{'descr': '<f4' 'fortran_order': False}", data),
                 {"expected ',' or '}'"});
  check_rejected(npy_bytes("{descr: '<f4'}", data), {"expected a quoted key"});
  check_rejected(npy_bytes("{'descr' '<f4'}", data), {"expected ':' after key 'descr'"});
}

TEST_CASE("npy: bad shape tuples are rejected") {
  const std::string data = raw(std::vector<float>{1, 2, 3, 4, 5, 6});
  check_rejected(npy_bytes(dict("<f4", "[2, 3]"), data), {"'shape' must be a tuple"});
  check_rejected(npy_bytes(dict("<f4", "(6)"), data), {"'shape' (6) is an integer, not a tuple"});
  check_rejected(npy_bytes(dict("<f4", "(2, x)"), data), {"expected a dimension"});
  check_rejected(npy_bytes(dict("<f4", "(2,,3)"), data), {"expected a dimension"});
  check_rejected(npy_bytes(dict("<f4", "(2 3)"), data), {"expected ',' or ')' in 'shape'"});
  check_rejected(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", data),
                 {"malformed header dict"});
  check_rejected(npy_bytes(dict("<f4", "(2, -3)"), data), {"negative dimension -3"});
  check_rejected(npy_bytes(dict("<f4", "(99999999999999999999,)"), data),
                 {"does not fit in 64 bits"});
  check_rejected(npy_bytes(dict("<f4", "(4294967296, 4294967296, 2)"), data),
                 {"product of the dimensions of shape (4294967296, 4294967296, 2) overflows"});
  check_rejected(npy_bytes(dict("<f4", "(4611686018427387904,)"), data),
                 {"needs more bytes than 64 bits can count"});
  std::string many = "(";
  for (int i = 0; i < 65; ++i) many += "1, ";
  check_rejected(npy_bytes(dict("<f4", many + ")"), data), {"more than 64 dimensions"});
}

TEST_CASE("npy: unsupported dtypes and Fortran order are rejected by name") {
  const std::string data = raw(std::vector<float>{1, 2, 3, 4, 5, 6});
  check_rejected(npy_bytes(dict("<f4", "(2, 3)", "True"), data),
                 {"fortran_order is True", "only C-order"});
  check_rejected(npy_bytes(dict(">f4", "(2, 3)"), data), {"big-endian dtype '>f4'"});
  check_rejected(npy_bytes(dict(">f8", "(3,)"), data), {"big-endian dtype '>f8'"});
  for (const char* dtype : {"<i4", "|u1", "<f2", "<c8", "|f4", "<U3", "|b1", ""}) {
    check_rejected(npy_bytes(dict(dtype, "(6,)"), data),
                   {("unsupported dtype '" + std::string(dtype) + "'").c_str(),
                    "only float32 ('<f4') and float64 ('<f8')"});
  }
}

TEST_CASE("npy: data size must match the shape exactly") {
  const std::string data = raw(std::vector<float>{1, 2, 3, 4, 5, 6});
  check_rejected(npy_bytes(dict("<f4", "(2, 3)"), data.substr(0, 20)),
                 {"data is truncated", "(2, 3) of float32 needs 24 bytes of data, got 20"});
  check_rejected(npy_bytes(dict("<f8", "(2, 3)"), data),
                 {"(2, 3) of float64 needs 48 bytes of data, got 24"});
  check_rejected(npy_bytes(dict("<f4", "(2, 3)"), data + "abcd"),
                 {"file has 4 bytes after the data"});
  check_rejected(npy_bytes(dict("<f4", "(5,)"), data), {"file has 4 bytes after the data"});
  check_rejected(npy_bytes(dict("<f4", "(2, 3)")), {"needs 24 bytes of data, got 0"});
}

TEST_CASE("npy: file errors name the path") {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  std::string message = error_of([&] { io::read_npy(missing); });
  CHECK(contains(message, "NPY file '" + missing + "': cannot open: No such file or directory"));

  fs::create_directories(dir.file("a_dir.npy"));
  message = error_of([&] { io::read_npy_array(dir.file("a_dir.npy")); });
  CHECK(contains(message, dir.file("a_dir.npy")));

  const std::string data = raw(std::vector<float>{1, 2, 3, 4, 5, 6});
  write_bytes(dir.file("short.npy"), npy_bytes(dict("<f4", "(2, 3)"), data.substr(0, 10)));
  message = error_of([&] { io::read_npy(dir.file("short.npy")); });
  INFO(message);
  CHECK(contains(message, "NPY file '" + dir.file("short.npy") + "': data is truncated"));
  CHECK(contains(message, "needs 24 bytes of data, got 10"));
  message = error_of([&] { io::read_npy_shape(dir.file("short.npy")); });
  CHECK(contains(message, "data is truncated"));

  write_bytes(dir.file("empty.npy"), "");
  CHECK(contains(error_of([&] { io::read_npy(dir.file("empty.npy")); }), "too short"));
  write_bytes(dir.file("f.npy"), npy_bytes(dict("<f4", "(2, 3)", "True"), data));
  CHECK(contains(error_of([&] { io::read_npy(dir.file("f.npy")); }), "fortran_order is True"));
}

TEST_CASE("npy: write errors name the path") {
  TempDir dir;
  const std::vector<float> v(4, 1.0f);
  const std::string nowhere = dir.file("no/such/dir/x.npy");
  std::string message = error_of([&] { io::write_npy(nowhere, {4}, v.data()); });
  CHECK(contains(message, "NPY file '" + nowhere + "': cannot open for writing"));
  CHECK(contains(error_of([&] {
                   io::write_npy(dir.file("n.npy"), {2, -1}, v.data());
                 }),
                 "negative dimension"));
  CHECK(contains(error_of([&] { io::write_npy(dir.file("n.npy"), {4}, nullptr); }),
                 "null data pointer"));
  CHECK_FALSE(fs::exists(dir.file("n.npy")));
  if (fs::exists("/dev/full")) {
    // Buffered writes fail on flush/close: that is a short write too and must be reported.
    const std::vector<float> big(1 << 16, 1.0f);
    message = error_of([&] { io::write_npy("/dev/full", {1 << 16}, big.data()); });
    CHECK(contains(message, "NPY file '/dev/full': write failed"));
    CHECK(fs::exists("/dev/full"));
  }
}

TEST_CASE("npy: 2000 corrupted files throw convbank::Error or parse, never crash") {
  std::mt19937_64 rng(20240611);
  std::vector<float> values(12);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 5.5f;
  const std::vector<std::string> seeds = {
      npy_bytes(dict("<f4", "(3, 4)"), raw(values)),
      npy_bytes(dict("<f8", "(2, 1, 3)"), raw(std::vector<double>(6, 0.5))),
      npy_bytes(dict("<f4", "(12,)"), raw(values), 2),
  };
  // Bytes that move the header parser down its less travelled paths.
  const std::string interesting = "(){}[],:'\"-0123456789 LTFTrueFalse<>=|f48\n\x93\x00\xff";
  int parsed = 0, rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string bytes = seeds[static_cast<std::size_t>(iteration) % seeds.size()];
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !bytes.empty(); ++m) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 5) {
        case 0:
          bytes.resize(at);  // truncate
          break;
        case 1:
          bytes[at] = static_cast<char>(rng());
          break;
        case 2:
          bytes[at] = interesting[rng() % interesting.size()];
          break;
        case 3:
          bytes.insert(at, 1, interesting[rng() % interesting.size()]);
          break;
        case 4:
          bytes.erase(at, 1 + rng() % 8);
          break;
      }
    }
    // An exactly-sized heap copy, so a sanitizer build sees any read past the end.
    std::vector<unsigned char> buffer(bytes.begin(), bytes.end());
    try {
      const io::NpyArray a = io::parse_npy(buffer.data(), buffer.size(), "fuzz.npy");
      std::uint64_t numel = 1;
      for (std::int64_t d : a.shape) {
        REQUIRE(d >= 0);
        numel *= static_cast<std::uint64_t>(d);
      }
      REQUIRE(numel == a.data.size());
      ++parsed;
    } catch (const Error& e) {
      REQUIRE(contains(e.what(), "NPY file 'fuzz.npy': "));
      ++rejected;
    }
  }
  MESSAGE("corrupted files parsed: " << parsed << ", rejected: " << rejected);
  CHECK(rejected > 1000);
}
