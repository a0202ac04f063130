// AudioReader / AudioWriter on libsndfile: the only translation unit that includes <sndfile.h>.
// Both convert through a fixed-size interleaved buffer so memory does not grow with the
// caller's chunk size, let alone the file length.
#include "convbank/io/audio_file.hpp"

#include <sndfile.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <vector>

#include "convbank/error.hpp"

namespace convbank::io {

namespace {

// Frames converted per libsndfile call.
constexpr std::int64_t kBlockFrames = 4096;

struct Name {
  const char* name;
  int code;
};

constexpr Name kContainers[] = {
    {"wav", SF_FORMAT_WAV},   {"flac", SF_FORMAT_FLAC}, {"ogg", SF_FORMAT_OGG},
    {"aiff", SF_FORMAT_AIFF}, {"au", SF_FORMAT_AU},     {"caf", SF_FORMAT_CAF},
    {"w64", SF_FORMAT_W64},   {"rf64", SF_FORMAT_RF64},
};

constexpr Name kSubtypes[] = {
    {"pcm_s8", SF_FORMAT_PCM_S8}, {"pcm_u8", SF_FORMAT_PCM_U8}, {"pcm_16", SF_FORMAT_PCM_16},
    {"pcm_24", SF_FORMAT_PCM_24}, {"pcm_32", SF_FORMAT_PCM_32}, {"float", SF_FORMAT_FLOAT},
    {"double", SF_FORMAT_DOUBLE}, {"ulaw", SF_FORMAT_ULAW},     {"alaw", SF_FORMAT_ALAW},
    {"vorbis", SF_FORMAT_VORBIS}, {"opus", SF_FORMAT_OPUS},
};

struct Extension {
  const char* extension;
  const char* container;
};

constexpr Extension kExtensions[] = {
    {".wav", "wav"},  {".wave", "wav"},  {".flac", "flac"}, {".ogg", "ogg"},   {".oga", "ogg"},
    {".opus", "ogg"}, {".aiff", "aiff"}, {".aif", "aiff"},  {".aifc", "aiff"}, {".au", "au"},
    {".snd", "au"},   {".caf", "caf"},   {".w64", "w64"},   {".rf64", "rf64"},
};

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw Error("audio file '" + path + "': " + message);
}

std::string hex(int code) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%04x", static_cast<unsigned>(code));
  return buffer;
}

template <std::size_t N>
std::string name_of(const Name (&table)[N], int code) {
  for (const Name& n : table) {
    if (n.code == code) return n.name;
  }
  return hex(code);
}

template <std::size_t N>
std::string names(const Name (&table)[N]) {
  std::string s;
  for (const Name& n : table) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

template <std::size_t N>
int code_of(const Name (&table)[N], const std::string& name, const std::string& path,
            const char* what) {
  for (const Name& n : table) {
    if (name == n.name) return n.code;
  }
  fail(path, std::string("unknown ") + what + " '" + name + "' (known: " + names(table) + ")");
}

std::string format_name(int code) {
  SF_FORMAT_INFO info{};
  info.format = code;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof(info)) != 0 || info.name == nullptr) {
    return hex(code);
  }
  return info.name;
}

// libsndfile's own default per container, where it has one; pcm_16 is what other tools write.
std::string default_subtype(const std::string& container, const std::string& path) {
  if (container == "ogg") {
    return std::filesystem::path(path).extension() == ".opus" ? "opus" : "vorbis";
  }
  return "pcm_16";
}

std::string container_from_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (const Extension& e : kExtensions) {
    if (ext == e.extension) return e.container;
  }
  std::string known;
  for (const Extension& e : kExtensions)
    known += (known.empty() ? "" : " ") + std::string(e.extension);
  fail(path, "cannot tell the container from the extension '" + ext +
                 "'; name one in AudioFormat::container or use one of: " + known);
}

void check_view(const std::string& path, const char* what, const Shape& shape, Device device,
                int channels) {
  if (device != Device::kCpu) {
    fail(path, std::string(what) + " needs a host (cpu) tensor, got one on " + to_string(device));
  }
  if (shape.batch != 1 || shape.channels != channels || shape.frames < 0) {
    fail(path, std::string(what) + " needs shape (1, " + std::to_string(channels) +
                   ", frames) for this " + std::to_string(channels) + "-channel file, got " +
                   to_string(shape));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// AudioReader

struct AudioReader::Impl {
  std::string path;
  SNDFILE* file = nullptr;
  AudioInfo info;
  std::vector<float> interleaved;

  ~Impl() {
    if (file != nullptr) sf_close(file);
  }
};

AudioReader::AudioReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  SF_INFO sf{};
  impl_->file = sf_open(path.c_str(), SFM_READ, &sf);
  if (impl_->file == nullptr) fail(path, std::string("cannot open: ") + sf_strerror(nullptr));
  AudioInfo& info = impl_->info;
  info.sample_rate = sf.samplerate;
  info.channels = sf.channels;
  info.frames = sf.frames;
  info.container = name_of(kContainers, sf.format & SF_FORMAT_TYPEMASK);
  info.subtype = name_of(kSubtypes, sf.format & SF_FORMAT_SUBMASK);
  info.description = format_name(sf.format & SF_FORMAT_TYPEMASK) + ", " +
                     format_name(sf.format & SF_FORMAT_SUBMASK);
  if (sf.channels < 1) fail(path, "file reports " + std::to_string(sf.channels) + " channels");
  impl_->interleaved.resize(static_cast<std::size_t>(kBlockFrames * sf.channels));
}

AudioReader::~AudioReader() = default;
AudioReader::AudioReader(AudioReader&&) noexcept = default;
AudioReader& AudioReader::operator=(AudioReader&&) noexcept = default;

const AudioInfo& AudioReader::info() const {
  return impl_->info;
}
const std::string& AudioReader::path() const {
  return impl_->path;
}

std::int64_t AudioReader::read(TensorView<float> out) {
  Impl& m = *impl_;
  const int channels = m.info.channels;
  check_view(m.path, "AudioReader::read", out.shape(), out.device(), channels);
  std::int64_t done = 0;
  while (done < out.frames()) {
    const std::int64_t want = std::min(kBlockFrames, out.frames() - done);
    const sf_count_t got = sf_readf_float(m.file, m.interleaved.data(), want);
    if (got < 0 || (got < want && sf_error(m.file) != SF_ERR_NO_ERROR)) {
      fail(m.path, std::string("read failed: ") + sf_strerror(m.file));
    }
    for (int c = 0; c < channels; ++c) {
      float* dst = out.channel(0, c) + done;
      const float* src = m.interleaved.data() + c;
      for (sf_count_t t = 0; t < got; ++t) dst[t] = src[t * channels];
    }
    done += got;
    if (got < want) break;  // end of file
  }
  return done;
}

// ---------------------------------------------------------------------------------------------
// AudioWriter

struct AudioWriter::Impl {
  std::string path;
  SNDFILE* file = nullptr;
  AudioFormat format;
  std::int64_t frames = 0;
  std::vector<float> interleaved;

  ~Impl() {
    if (file != nullptr) sf_close(file);
  }
};

AudioWriter::AudioWriter(const std::string& path, const AudioFormat& format)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  m.format = format;
  if (m.format.container.empty()) m.format.container = container_from_extension(path);
  if (m.format.subtype.empty()) m.format.subtype = default_subtype(m.format.container, path);
  if (format.sample_rate < 1) {
    fail(path, "sample_rate must be >= 1, got " + std::to_string(format.sample_rate));
  }
  // libsndfile's SF_MAX_CHANNELS.
  if (format.channels < 1 || format.channels > 1024) {
    fail(path, "channels must be in [1, 1024], got " + std::to_string(format.channels));
  }
  SF_INFO sf{};
  sf.samplerate = format.sample_rate;
  sf.channels = format.channels;
  sf.format = code_of(kContainers, m.format.container, path, "container") |
              code_of(kSubtypes, m.format.subtype, path, "subtype");
  if (sf_format_check(&sf) == SF_FALSE) {
    fail(path, "container '" + m.format.container + "' cannot hold subtype '" + m.format.subtype +
                   "' with " + std::to_string(sf.channels) + " channels at " +
                   std::to_string(sf.samplerate) + " Hz");
  }
  m.file = sf_open(path.c_str(), SFM_WRITE, &sf);
  if (m.file == nullptr) fail(path, std::string("cannot create: ") + sf_strerror(nullptr));
  // Without clipping, libsndfile wraps out-of-range floats around when it converts to integer
  // PCM: a loud filter output would turn into full-scale clicks.
  sf_command(m.file, SFC_SET_CLIPPING, nullptr, SF_TRUE);
  m.interleaved.resize(static_cast<std::size_t>(kBlockFrames * format.channels));
}

AudioWriter::~AudioWriter() = default;
AudioWriter::AudioWriter(AudioWriter&&) noexcept = default;
AudioWriter& AudioWriter::operator=(AudioWriter&&) noexcept = default;

const AudioFormat& AudioWriter::format() const {
  return impl_->format;
}
std::int64_t AudioWriter::frames_written() const {
  return impl_->frames;
}

void AudioWriter::write(TensorView<const float> in) {
  Impl& m = *impl_;
  if (m.file == nullptr) fail(m.path, "write after close()");
  const int channels = m.format.channels;
  check_view(m.path, "AudioWriter::write", in.shape(), in.device(), channels);
  for (std::int64_t done = 0; done < in.frames();) {
    const std::int64_t n = std::min(kBlockFrames, in.frames() - done);
    for (int c = 0; c < channels; ++c) {
      const float* src = in.channel(0, c) + done;
      float* dst = m.interleaved.data() + c;
      for (std::int64_t t = 0; t < n; ++t) dst[t * channels] = src[t];
    }
    const sf_count_t written = sf_writef_float(m.file, m.interleaved.data(), n);
    if (written != n) fail(m.path, std::string("write failed: ") + sf_strerror(m.file));
    done += n;
    m.frames += n;
  }
}

void AudioWriter::close() {
  Impl& m = *impl_;
  if (m.file == nullptr) return;
  const int rc = sf_close(m.file);
  m.file = nullptr;
  if (rc != 0) fail(m.path, std::string("close failed: ") + sf_error_number(rc));
}

}  // namespace convbank::io
