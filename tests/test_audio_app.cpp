// convbank process / stream / analyze on the bundled recordings: the main job improves the SNR,
// --effect none reconstructs, streaming equals offline, and every failure prints one
// "convbank: error:" line, exits 1 and leaves no output or temporary file.
#include <doctest/doctest.h>

#if defined(CONVBANK_WITH_SNDFILE)

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "app_helpers.hpp"
#include "convbank/filterbank.hpp"
#include "convbank/io/audio_file.hpp"
#include "convbank/io/npy.hpp"

namespace {

namespace fs = std::filesystem;
using app_test::Run;
using app_test::run_app;
using app_test::TempDir;
using convbank::Shape;
using convbank::Tensor;

const std::string kAudio = std::string(CONVBANK_DATA_DIR) + "/audio/";
const std::string kModel = std::string(CONVBANK_DATA_DIR) + "/model/tasnet_small.safetensors";

bool have_app() {
  return !std::string(CONVBANK_APP_PATH).empty();
}

Tensor read_audio(const std::string& path) {
  convbank::io::AudioReader r(path);
  Tensor t(Shape{1, r.info().channels, r.info().frames});
  REQUIRE(r.read(t.view()) == r.info().frames);
  return t;
}

double snr_db(const Tensor& ref, const Tensor& test, std::int64_t skip = 0) {
  REQUIRE(ref.shape() == test.shape());
  double s = 0, e = 0;
  for (std::int64_t c = 0; c < ref.shape().channels; ++c) {
    for (std::int64_t t = skip; t < ref.shape().frames - skip; ++t) {
      const double a = ref(0, c, t), b = test(0, c, t);
      s += a * a;
      e += (a - b) * (a - b);
    }
  }
  return e == 0 ? 400.0 : 10.0 * std::log10(s / e);
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void check_failure(const TempDir& dir, const std::vector<std::string>& args,
                   const std::string& part) {
  CAPTURE(args);
  const std::vector<std::string> before = listing(dir.path());
  const Run run = run_app(args);
  CHECK(run.exit_code != 0);
  CHECK_MESSAGE(run.err.rfind("convbank: error: ", 0) == 0, run.err);
  CHECK_MESSAGE(run.err.find(part) != std::string::npos, run.err);
  CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
  CHECK(listing(dir.path()) == before);  // no output, no temporary file
}

}  // namespace

TEST_CASE("audio app: the main job denoises the bundled examples by at least 3 dB") {
  if (!have_app()) return;
  TempDir dir("audio-app");
  for (const std::string name : {"speech_16k_mono", "speech_48k_stereo"}) {
    CAPTURE(name);
    const std::string out = dir.file(name + "_denoised.wav");
    const Run run = run_app({"process", kAudio + name + "_noisy.wav", out, "--quiet"});
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const Tensor clean = read_audio(kAudio + name + "_clean.wav");
    const Tensor noisy = read_audio(kAudio + name + "_noisy.wav");
    const Tensor denoised = read_audio(out);
    convbank::io::AudioReader info(out);
    CHECK(info.info().subtype == "pcm_16");
    const double before = snr_db(clean, noisy), after = snr_db(clean, denoised);
    MESSAGE(name, ": SNR ", before, " dB -> ", after, " dB");
    CHECK(after - before >= 3.0);
  }
}

TEST_CASE("audio app: --effect none reconstructs the whole file, edges included") {
  if (!have_app()) return;
  TempDir dir("audio-app");
  const std::string in = kAudio + "speech_16k_stereo_noisy.flac";
  const Tensor x = read_audio(in);
  for (const std::string preset :
       {"stft:n_fft=512,hop=128", "stft:n_fft=400,hop=100,window=hamming"}) {
    const std::string out = dir.file("none.wav");
    const Run run = run_app({"process", in, out, "--preset", preset, "--effect", "none",
                             "--subtype", "float", "--chunk", "1000"});
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(run.out.find("convbank process: ") != std::string::npos);
    CHECK(run.out.find("device cpu") != std::string::npos);
    CHECK(snr_db(x, read_audio(out)) >= 100.0);
  }
  // The trained model: its decoder inverts its encoder.
  const std::string out = dir.file("model.flac");
  const Run run =
      run_app({"process", in, out, "--weights", kModel, "--preset",
               "free:analysis=encoder.weight,synthesis=decoder.weight,stride=8", "--quiet"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  convbank::io::AudioReader r(out);
  CHECK(r.info().container == "flac");
  CHECK(snr_db(x, read_audio(out)) >= 60.0);  // 16-bit output: quantization bounds it
}

TEST_CASE("audio app: stream reports its timing and equals process and offline") {
  if (!have_app()) return;
  TempDir dir("audio-app");
  const std::string in = kAudio + "speech_16k_mono_noisy.wav";
  const Run streamed =
      run_app({"stream", in, dir.file("s.wav"), "--chunk", "160", "--check", "--subtype", "float"});
  REQUIRE_MESSAGE(streamed.exit_code == 0, streamed.err);
  for (const char* part : {"latency: 255 frames", "p50", "p99", "missed", "real-time factor",
                           "check: max |streamed - offline|"}) {
    CHECK_MESSAGE(streamed.out.find(part) != std::string::npos, streamed.out);
  }
  const Run processed = run_app(
      {"process", in, dir.file("p.wav"), "--chunk", "4096", "--quiet", "--subtype", "float"});
  REQUIRE_MESSAGE(processed.exit_code == 0, processed.err);
  const Tensor a = read_audio(dir.file("s.wav")), b = read_audio(dir.file("p.wav"));
  CHECK(snr_db(a, b) >= 100.0);
}

TEST_CASE("audio app: analyze writes (channels, n_filters, frames) features") {
  if (!have_app()) return;
  TempDir dir("audio-app");
  const Run run =
      run_app({"analyze", kAudio + "speech_16k_stereo_clean.wav", "-o", dir.file("f.npy"),
               "--preset", "gammatone:n_filters=24,kernel_size=256,stride=64"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const Tensor f = convbank::io::read_npy(dir.file("f.npy"));
  CHECK(f.shape() == Shape{2, 24, (48000 - 256) / 64 + 1});
  const Tensor x = read_audio(kAudio + "speech_16k_stereo_clean.wav");
  const convbank::FilterBank bank = convbank::FilterBank::from_spec(
      "gammatone:n_filters=24,kernel_size=256,stride=64", {16000, ""});
  const Tensor want = bank.encode(x);
  for (std::int64_t i = 0; i < want.numel(); i += 97) CHECK(f.data()[i] == want.data()[i]);
}

TEST_CASE("audio app: failures print one error line and leave no file behind") {
  if (!have_app()) return;
  TempDir dir("audio-app");
  const std::string in = kAudio + "speech_16k_mono_noisy.wav";
  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "not audio\n";
  const std::string out = dir.file("out.wav");
  check_failure(dir, {"process", text, out}, "notes.txt");
  check_failure(dir, {"process", in, out, "--preset", "stft:n_fft=512,hopp=128"},
                "unknown key 'hopp'");
  check_failure(dir, {"process", in, out, "--preset", "wavelet"}, "unknown preset 'wavelet'");
  check_failure(dir, {"process", in, out, "--effect", "denoise:strength=3"}, "unknown key");
  check_failure(
      dir,
      {"process", in, out, "--weights", kModel, "--preset", "free:analysis=encoder.w,stride=8"},
      "encoder.w");
  check_failure(dir,
                {"process", in, out, "--preset",
                 "param_sinc:n_filters=16,kernel_size=65,stride=16,sample_rate=8000"},
                "16000 Hz");
  check_failure(dir,
                {"process", kAudio + "speech_48k_mono_noisy.wav", out, "--weights", kModel,
                 "--preset", "free:analysis=encoder.weight,stride=8"},
                "is made for 16000 Hz");
  check_failure(dir, {"process", in, dir.file("missing/out.wav")}, "does not exist");
  check_failure(dir, {"process", in, dir.file("out.xyz")}, "unknown audio file extension");
  check_failure(dir, {"process", in, out, "--chunk", "0"}, "--chunk must be >= 1");
  check_failure(dir, {"stream", in, out}, "--chunk");
  // Never overwrites its input, even through another path to it.
  const std::string copy = dir.file("copy.wav");
  fs::copy_file(in, copy);
  const auto size = fs::file_size(copy);
  const Run run = run_app({"process", copy, dir.path().string() + "/./copy.wav"});
  CHECK(run.exit_code != 0);
  CHECK(run.err.find("refusing to overwrite an input") != std::string::npos);
  CHECK(fs::file_size(copy) == size);
}

TEST_CASE("audio app: every audio subcommand has --help") {
  if (!have_app()) return;
  for (const char* sub : {"process", "stream", "analyze", "snr"}) {
    const Run run = run_app({sub, "--help"});
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("--") != std::string::npos);
  }
}

#endif  // CONVBANK_WITH_SNDFILE

#if defined(CONVBANK_WITH_SNDFILE) && !defined(__SANITIZE_ADDRESS__)
#include <sys/resource.h>

// An input far larger than the chunk: `process` must hold chunks, never the file. 20 minutes of
// 16 kHz stereo is 154 MB as float32; the process' peak resident size must stay well below it.
TEST_CASE("audio app: process keeps memory bounded by the chunk, not the file") {
  if (!have_app()) return;
  TempDir dir("audio-app-long");
  const std::string in = dir.file("long.wav");
  const std::int64_t frames = 20 * 60 * 16000;
  {
    convbank::io::AudioWriter w(in, {16000, 2, "wav", "pcm_16"});
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 0.1f);
    Tensor chunk(Shape{1, 2, 1 << 16});
    for (std::int64_t at = 0; at < frames; at += chunk.shape().frames) {
      const std::int64_t n = std::min(chunk.shape().frames, frames - at);
      for (std::int64_t i = 0; i < chunk.numel(); ++i) chunk.data()[i] = d(rng);
      w.write(chunk.view().slice_frames(0, n));
    }
    w.close();
  }
  const std::string out = dir.file("long_out.wav");
  std::vector<std::string> argv_strings = {CONVBANK_APP_PATH, "process", in, out, "--quiet"};
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, CONVBANK_APP_PATH, nullptr, nullptr, argv.data(), environ) == 0);
  int status = 0;
  rusage usage{};
  REQUIRE(wait4(pid, &status, 0, &usage) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const double peak_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
  MESSAGE("peak resident size of process on 20 min of stereo audio: ", peak_mb, " MiB");
  CHECK(peak_mb < 60.0);
  convbank::io::AudioReader r(out);
  CHECK(r.info().frames == frames);
}
#endif
