// Audio files (WAV, FLAC, Ogg, AIFF, ...) read and written in chunks through libsndfile.
//
//   convbank::io::AudioReader in("in.flac");
//   convbank::Tensor chunk(convbank::Shape{1, in.info().channels, 4096});
//   convbank::io::AudioWriter out("out.wav", in.info().format());  // same rate, channels, type
//   while (std::int64_t n = in.read(chunk)) out.write(chunk.view().slice_frames(0, n));
//   out.close();
//
// Samples are float32 in [-1, 1) whatever the stored type (libsndfile normalizes integer PCM);
// writing to an integer subtype clips values outside that range instead of wrapping them.
// Memory stays bounded by the chunk size, whatever the file length. Available when the build
// has libsndfile (CONVBANK_WITH_SNDFILE); this header never includes <sndfile.h>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "convbank/tensor.hpp"

namespace convbank::io {

// What to write. Containers: "wav", "flac", "ogg", "aiff", "au", "caf", "w64", "rf64".
// Subtypes: "pcm_s8", "pcm_u8", "pcm_16", "pcm_24", "pcm_32", "float", "double", "ulaw",
// "alaw", "vorbis", "opus". An empty container is taken from the path's extension; an empty
// subtype is the container's usual one (pcm_16 for wav/flac/aiff/..., vorbis for ogg).
struct AudioFormat {
  int sample_rate = 48000;
  int channels = 1;
  std::string container;
  std::string subtype;
};

struct AudioInfo {
  int sample_rate = 0;
  int channels = 0;
  std::int64_t frames = 0;  // frames per channel, as the file's header states
  std::string container;    // short names as in AudioFormat ("wav", "pcm_16"), or libsndfile's
  std::string subtype;      // code in hex when convbank has no name for it
  std::string description;  // libsndfile's words, e.g. "WAV (Microsoft), Signed 16 bit PCM"

  // The format to write another file of the same kind (e.g. a processed copy).
  AudioFormat format() const { return {sample_rate, channels, container, subtype}; }
};

class AudioReader {
 public:
  // Opens `path`; throws Error naming the path and libsndfile's message.
  explicit AudioReader(const std::string& path);
  ~AudioReader();
  AudioReader(AudioReader&&) noexcept;
  AudioReader& operator=(AudioReader&&) noexcept;

  const AudioInfo& info() const;
  const std::string& path() const;

  // Reads up to out.frames() frames into `out`, a host view of shape (1, channels, n) with any
  // strides, de-interleaving them. Returns the frames read: fewer than n only at the end of
  // the file, 0 once it is reached; frames past the returned count are left untouched.
  std::int64_t read(TensorView<float> out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class AudioWriter {
 public:
  // Creates (or truncates) `path`; throws Error naming the path when the format is unknown,
  // the container cannot hold the subtype, or the file cannot be created.
  AudioWriter(const std::string& path, const AudioFormat& format);
  // Closes the file, ignoring errors: call close() to see them.
  ~AudioWriter();
  AudioWriter(AudioWriter&&) noexcept;
  AudioWriter& operator=(AudioWriter&&) noexcept;

  const AudioFormat& format() const;  // with container and subtype resolved
  std::int64_t frames_written() const;

  // Appends `in`, a host view of shape (1, channels, n), interleaving it.
  void write(TensorView<const float> in);
  // Finishes the file (header sizes, FLAC/Ogg trailers). Idempotent; write() afterwards throws.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convbank::io
