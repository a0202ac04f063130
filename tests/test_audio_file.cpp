// AudioReader / AudioWriter: chunked writes and odd-sized chunked reads give back the samples
// (exactly for float WAV, within one 16-bit step for FLAC), and errors name the file.
#include <doctest/doctest.h>

#if defined(CONVBANK_WITH_SNDFILE)

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "convbank/error.hpp"
#include "convbank/io/audio_file.hpp"
#include "convbank/tensor.hpp"
#include "test_files.hpp"

namespace {

using test_files::error_of;
using test_files::TempDir;

namespace fs = std::filesystem;
using convbank::Shape;
using convbank::Tensor;
using convbank::TensorView;
namespace io = convbank::io;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Two channels that differ (so a channel swap shows), within [-0.9, 0.9].
Tensor test_signal(std::int64_t frames) {
  Tensor t(Shape{1, 2, frames});
  for (std::int64_t i = 0; i < frames; ++i) {
    const double s = static_cast<double>(i);
    t(0, 0, i) = static_cast<float>(0.9 * std::sin(0.01 * s));
    t(0, 1, i) = static_cast<float>(0.5 * std::cos(0.0371 * s) - 0.3 * std::sin(0.2 * s));
  }
  return t;
}

void write_in_chunks(io::AudioWriter& writer, const Tensor& signal, std::int64_t chunk) {
  for (std::int64_t t = 0; t < signal.shape().frames; t += chunk) {
    const std::int64_t n = std::min(chunk, signal.shape().frames - t);
    writer.write(signal.view().slice_frames(t, n));
  }
  writer.close();
}

// Reads the whole file in chunks of `chunk` frames into a (1, channels, frames) tensor.
Tensor read_in_chunks(io::AudioReader& reader, std::int64_t chunk) {
  const io::AudioInfo& info = reader.info();
  Tensor all(Shape{1, info.channels, info.frames});
  Tensor buffer(Shape{1, info.channels, chunk});
  std::int64_t done = 0;
  for (;;) {
    const std::int64_t n = reader.read(buffer);
    if (n == 0) break;
    REQUIRE(done + n <= info.frames);
    for (int c = 0; c < info.channels; ++c) {
      for (std::int64_t t = 0; t < n; ++t) all(0, c, done + t) = buffer(0, c, t);
    }
    done += n;
  }
  CHECK(done == info.frames);
  return all;
}

}  // namespace

TEST_CASE("audio: float WAV round trip is exact, in chunks") {
  TempDir dir;
  const std::string path = dir.file("a.wav");
  const Tensor signal = test_signal(4801);
  {
    io::AudioWriter writer(path, io::AudioFormat{48000, 2, "", "float"});
    CHECK(writer.format().container == "wav");
    write_in_chunks(writer, signal, 1000);
    CHECK(writer.frames_written() == 4801);
    writer.close();  // idempotent
    CHECK(contains(error_of([&] { writer.write(signal.view()); }), "write after close()"));
  }
  io::AudioReader reader(path);
  const io::AudioInfo& info = reader.info();
  CHECK(info.sample_rate == 48000);
  CHECK(info.channels == 2);
  CHECK(info.frames == 4801);
  CHECK(info.container == "wav");
  CHECK(info.subtype == "float");
  CHECK(contains(info.description, "WAV"));
  const Tensor back = read_in_chunks(reader, 777);
  std::int64_t mismatches = 0;
  for (std::int64_t i = 0; i < signal.numel(); ++i)
    mismatches += back.data()[i] != signal.data()[i];
  CHECK(mismatches == 0);
}

TEST_CASE("audio: 16-bit FLAC round trip within one step, into strided views") {
  TempDir dir;
  const std::string path = dir.file("b.flac");
  const Tensor signal = test_signal(10007);
  {
    io::AudioWriter writer(path, io::AudioFormat{48000, 2, "", ""});
    CHECK(writer.format().container == "flac");
    CHECK(writer.format().subtype == "pcm_16");
    write_in_chunks(writer, signal, 4099);
  }
  io::AudioReader reader(path);
  CHECK(reader.info().container == "flac");
  CHECK(reader.info().subtype == "pcm_16");
  CHECK(reader.info().frames == 10007);
  // Read into the middle of a wider buffer: a view whose channel stride is not its length.
  Tensor wide(Shape{1, 2, 1000});
  Tensor back(Shape{1, 2, 10007});
  std::int64_t done = 0;
  for (std::int64_t n; (n = reader.read(wide.view().slice_frames(100, 333))) > 0; done += n) {
    for (int c = 0; c < 2; ++c) {
      for (std::int64_t t = 0; t < n; ++t) back(0, c, done + t) = wide(0, c, 100 + t);
    }
  }
  CHECK(done == 10007);
  float worst = 0.0f;
  for (std::int64_t i = 0; i < signal.numel(); ++i) {
    worst = std::max(worst, std::abs(back.data()[i] - signal.data()[i]));
  }
  CHECK(worst <= 1.0f / 32768.0f);
  CHECK(worst > 0.0f);  // it really was quantized

  // The reader's format makes a writer of the same kind.
  const std::string copy = dir.file("copy.flac");
  {
    io::AudioWriter writer(copy, reader.info().format());
    write_in_chunks(writer, back, 5000);
  }
  io::AudioReader again(copy);
  CHECK(again.info().subtype == "pcm_16");
  CHECK(again.info().sample_rate == 48000);
  CHECK(again.info().frames == 10007);
}

TEST_CASE("audio: writing to integer PCM clips instead of wrapping around") {
  TempDir dir;
  const std::string path = dir.file("loud.wav");
  Tensor loud(Shape{1, 1, 4});
  loud(0, 0, 0) = 1.5f;
  loud(0, 0, 1) = -3.0f;
  loud(0, 0, 2) = 0.5f;
  loud(0, 0, 3) = 1.0f;
  {
    io::AudioWriter writer(path, io::AudioFormat{8000, 1, "wav", "pcm_16"});
    writer.write(loud.view());
    writer.close();
  }
  io::AudioReader reader(path);
  Tensor back(Shape{1, 1, 4});
  CHECK(reader.read(back) == 4);
  CHECK(back(0, 0, 0) > 0.999f);
  CHECK(back(0, 0, 1) == -1.0f);
  CHECK(back(0, 0, 2) == 0.5f);
  CHECK(back(0, 0, 3) > 0.999f);
  CHECK(reader.read(back) == 0);
}

TEST_CASE("audio: errors name the file and the rule") {
  TempDir dir;
  const std::string missing = dir.file("missing.wav");
  std::string message = error_of([&] { io::AudioReader reader(missing); });
  CHECK(contains(message, "audio file '" + missing + "': cannot open"));

  const std::string text = dir.file("notes.wav");
  std::ofstream(text) << "these are not samples, just some text that is long enough\n";
  message = error_of([&] { io::AudioReader reader(text); });
  INFO(message);
  CHECK(contains(message, "audio file '" + text + "': cannot open: "));
  CHECK(message.size() > ("audio file '" + text + "': cannot open: ").size());

  message = error_of([&] { io::AudioWriter writer(dir.file("x.xyz"), io::AudioFormat{}); });
  CHECK(contains(message, "cannot tell the container from the extension '.xyz'"));
  message = error_of([&] {
    io::AudioWriter writer(dir.file("x.flac"), io::AudioFormat{48000, 2, "", "float"});
  });
  CHECK(contains(message, "container 'flac' cannot hold subtype 'float'"));
  message = error_of([&] {
    io::AudioWriter writer(dir.file("x.wav"), io::AudioFormat{48000, 2, "", "pcm_12"});
  });
  CHECK(contains(message, "unknown subtype 'pcm_12'"));
  message = error_of([&] {
    io::AudioWriter writer(dir.file("x.wav"), io::AudioFormat{0, 2, "", ""});
  });
  CHECK(contains(message, "sample_rate must be >= 1, got 0"));
  message = error_of([&] {
    io::AudioWriter writer(dir.file("no/dir/x.wav"), io::AudioFormat{48000, 1, "", ""});
  });
  CHECK(contains(message, "audio file '" + dir.file("no/dir/x.wav") + "': cannot create"));

  io::AudioWriter writer(dir.file("two.wav"), io::AudioFormat{48000, 2, "", ""});
  Tensor mono(Shape{1, 1, 10});
  message = error_of([&] { writer.write(mono.view()); });
  CHECK(contains(message, "needs shape (1, 2, frames) for this 2-channel file, got (1, 1, 10)"));
  writer.close();
  io::AudioReader reader(dir.file("two.wav"));
  message = error_of([&] { reader.read(mono); });
  CHECK(contains(message, "needs shape (1, 2, frames)"));
}

#endif  // CONVBANK_WITH_SNDFILE
