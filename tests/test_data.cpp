// The committed example data (data/audio, data/model, made by data/make_recordings.sh and
// data/make_model.py) is what its README promises, and `convbank snr` agrees with the library
// about it: examples and docs quote these numbers, so a regenerated file that drifts fails here.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "app_helpers.hpp"
#include "convbank/conv.hpp"
#include "convbank/io/npy.hpp"
#include "convbank/tensor.hpp"

#if defined(CONVBANK_WITH_SNDFILE)
#include "convbank/io/audio_file.hpp"
#endif
#if __has_include("convbank/io/safetensors.hpp")
#include "convbank/io/safetensors.hpp"
#define CONVBANK_TEST_DATA_SAFETENSORS 1
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;
using convbank::Shape;
using convbank::Tensor;
namespace io = convbank::io;

const std::string kData = CONVBANK_DATA_DIR;

// The level data/audio/README.md documents for every noisy/clean pair.
constexpr double kNoisySnrDb = 5.0;

double snr_db(const std::vector<float>& ref, const std::vector<float>& test) {
  REQUIRE(ref.size() == test.size());
  double signal = 0, noise = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(test[i]) - ref[i];
    signal += static_cast<double>(ref[i]) * ref[i];
    noise += d * d;
  }
  return 10.0 * std::log10(signal / noise);
}

TEST_CASE("data: tasnet_small decoder inverts its encoder (.npy weights, stride 8)") {
  const Tensor enc_w = io::read_npy(kData + "/model/encoder.weight.npy");
  const Tensor dec_w = io::read_npy(kData + "/model/decoder.weight.npy");
  REQUIRE(enc_w.shape() == Shape{64, 1, 16});
  REQUIRE(dec_w.shape() == Shape{64, 1, 16});
  convbank::Conv1d enc(
      {.in_channels = 1, .out_channels = 64, .kernel_size = 16, .stride = 8, .bias = false});
  convbank::ConvTranspose1d dec(
      {.in_channels = 64, .out_channels = 1, .kernel_size = 16, .stride = 8, .bias = false});
  enc.set_weight(enc_w.view());
  dec.set_weight(dec_w.view());

  constexpr std::int64_t kFrames = 16000;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor x(Shape{1, 1, kFrames});
  for (std::int64_t i = 0; i < kFrames; ++i) x.data()[i] = dist(rng);
  const Tensor y = dec.forward(enc.forward(x));
  REQUIRE(y.shape() == x.shape());
  // Only the first and last K - stride frames lie in a single frame: not reconstructed by
  // design, as make_model.py documents.
  constexpr std::int64_t kEdge = 16 - 8;
  const std::vector<float> ref(x.data() + kEdge, x.data() + kFrames - kEdge);
  const std::vector<float> got(y.data() + kEdge, y.data() + kFrames - kEdge);
  const double snr = snr_db(ref, got);
  MESSAGE("encode -> decode SNR away from the edges: " << snr << " dB");
  CHECK(snr >= 100.0);
}

#if defined(CONVBANK_TEST_DATA_SAFETENSORS)
TEST_CASE("data: tasnet_small.safetensors holds the .npy tensors, bit for bit") {
  const auto st = io::Safetensors::open(kData + "/model/tasnet_small.safetensors");
  CHECK(st.keys() == std::vector<std::string>{"decoder.weight", "encoder.weight"});
  for (const std::string key : {"encoder.weight", "decoder.weight"}) {
    CAPTURE(key);
    CHECK(st.info(key).dtype == "F32");
    CHECK(st.info(key).shape == std::vector<std::int64_t>{64, 1, 16});
    CHECK(st.data(key) == io::read_npy_array(kData + "/model/" + key + ".npy").data);
  }
}
#endif

#if defined(CONVBANK_WITH_SNDFILE)

struct Recording {
  const char* name;
  int sample_rate;
  int channels;
  const char* container;
};

// 3.0 s each (data/audio/README.md).
constexpr double kSeconds = 3.0;
const Recording kRecordings[] = {
    {"speech_16k_mono_clean.wav", 16000, 1, "wav"},
    {"speech_16k_mono_noisy.wav", 16000, 1, "wav"},
    {"speech_16k_stereo_clean.wav", 16000, 2, "wav"},
    {"speech_16k_stereo_noisy.wav", 16000, 2, "wav"},
    {"speech_16k_stereo_noisy.flac", 16000, 2, "flac"},
    {"speech_48k_mono_clean.wav", 48000, 1, "wav"},
    {"speech_48k_mono_noisy.wav", 48000, 1, "wav"},
    {"speech_48k_stereo_clean.wav", 48000, 2, "wav"},
    {"speech_48k_stereo_noisy.wav", 48000, 2, "wav"},
};

// {reference, noisy} pairs the README's SNR applies to.
const std::pair<const char*, const char*> kPairs[] = {
    {"speech_16k_mono_clean.wav", "speech_16k_mono_noisy.wav"},
    {"speech_16k_stereo_clean.wav", "speech_16k_stereo_noisy.wav"},
    {"speech_16k_stereo_clean.wav", "speech_16k_stereo_noisy.flac"},
    {"speech_48k_mono_clean.wav", "speech_48k_mono_noisy.wav"},
    {"speech_48k_stereo_clean.wav", "speech_48k_stereo_noisy.wav"},
};

std::string audio(const std::string& name) {
  return kData + "/audio/" + name;
}

// The whole file, interleaved-free: channel-major, read in odd-sized chunks the way an app
// would (the files are small; the app itself never holds a whole file).
std::vector<float> read_all(const std::string& path, int* channels = nullptr) {
  io::AudioReader in(path);
  const std::int64_t c = in.info().channels;
  if (channels) *channels = static_cast<int>(c);
  std::vector<std::vector<float>> per_channel(static_cast<std::size_t>(c));
  Tensor chunk(Shape{1, c, 1000});
  while (const std::int64_t n = in.read(chunk.view())) {
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const float* p = chunk.view().channel(0, ch);
      per_channel[static_cast<std::size_t>(ch)].insert(
          per_channel[static_cast<std::size_t>(ch)].end(), p, p + n);
    }
  }
  std::vector<float> all;
  for (const auto& v : per_channel) all.insert(all.end(), v.begin(), v.end());
  return all;
}

using app_test::read_text;
using app_test::Run;
using app_test::run_app;

// Each test's own directory.
class TempDir : public app_test::TempDir {
 public:
  TempDir() : app_test::TempDir("test-data") {}
};

bool have_app() {
  if (std::string(CONVBANK_APP_PATH).empty()) {
    MESSAGE("the convbank app is not built (CONVBANK_BUILD_APPS=OFF): skipping");
    return false;
  }
  return true;
}

TEST_CASE("data: every recording opens with its documented rate, channels and length") {
  for (const Recording& r : kRecordings) {
    const std::string name = r.name;
    CAPTURE(name);
    io::AudioReader in(audio(r.name));
    CHECK(in.info().sample_rate == r.sample_rate);
    CHECK(in.info().channels == r.channels);
    CHECK(in.info().frames == static_cast<std::int64_t>(kSeconds * r.sample_rate));
    CHECK(in.info().container == r.container);
    CHECK(in.info().subtype == "pcm_16");
    int channels = 0;
    // The header's frame count is what the file really holds (not a truncated write).
    CHECK(read_all(audio(r.name), &channels).size() ==
          static_cast<std::size_t>(kSeconds * r.sample_rate) * r.channels);
  }
}

TEST_CASE("data: the FLAC copy holds the same samples as its WAV") {
  CHECK(read_all(audio("speech_16k_stereo_noisy.flac")) ==
        read_all(audio("speech_16k_stereo_noisy.wav")));
}

TEST_CASE("data: each noisy recording is at the documented SNR against its clean pair") {
  for (const auto& [clean_name, noisy_name] : kPairs) {
    const std::string clean = clean_name, noisy = noisy_name;
    CAPTURE(noisy);
    const double snr = snr_db(read_all(audio(clean)), read_all(audio(noisy)));
    MESSAGE(noisy << ": " << snr << " dB against " << clean);
    CHECK(std::fabs(snr - kNoisySnrDb) <= 1.0);
  }
  // The stereo channels carry different speech: a test that swaps them must notice.
  const std::vector<float> stereo = read_all(audio("speech_16k_stereo_clean.wav"));
  const std::size_t half = stereo.size() / 2;
  const std::vector<float> left(stereo.begin(), stereo.begin() + half);
  const std::vector<float> right(stereo.begin() + half, stereo.end());
  CHECK(snr_db(left, right) < 3.0);
}

TEST_CASE("data: convbank snr prints the SNR the library measures") {
  if (!have_app()) return;
  const std::string clean = audio("speech_16k_stereo_clean.wav");
  const std::vector<std::string> tests = {audio("speech_16k_stereo_noisy.wav"),
                                          audio("speech_16k_stereo_noisy.flac"), clean};
  const std::vector<float> ref = read_all(clean);
  const double expected = snr_db(ref, read_all(tests[0]));

  SUBCASE("text") {
    const Run run = run_app({"snr", clean, tests[0], tests[1]});
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    char number[32];
    std::snprintf(number, sizeof number, "%.3f dB", expected);
    CHECK(run.out.find(tests[0] + ": " + number) != std::string::npos);
    CHECK(run.out.find(tests[1] + ": " + number) != std::string::npos);
  }
  SUBCASE("json, identical files give null") {
    const Run run = run_app({"snr", "--json", clean, tests[0], tests[1], tests[2]});
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const nlohmann::json j = nlohmann::json::parse(run.out);
    CHECK(j["sample_rate"] == 16000);
    CHECK(j["channels"] == 2);
    REQUIRE(j["results"].size() == 3);
    CHECK(j["results"][0]["file"] == tests[0]);
    CHECK(j["results"][0]["frames"] == 48000);
    CHECK(j["results"][0]["snr_db"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
    CHECK(j["results"][1]["snr_db"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
    CHECK(j["results"][2]["snr_db"].is_null());
  }
  SUBCASE("--skip leaves out both edges") {
    const Run run = run_app({"snr", "--json", "--skip", "0.5", clean, tests[0]});
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    const nlohmann::json j = nlohmann::json::parse(run.out);
    CHECK(j["results"][0]["frames"] == 48000 - 2 * 8000);
    // The same sum over the middle of each channel, computed here.
    const std::vector<float> noisy = read_all(tests[0]);
    std::vector<float> ref_mid, noisy_mid;
    for (std::size_t c = 0; c < 2; ++c) {
      const std::size_t first = c * 48000 + 8000, last = c * 48000 + 40000;
      ref_mid.insert(ref_mid.end(), ref.begin() + first, ref.begin() + last);
      noisy_mid.insert(noisy_mid.end(), noisy.begin() + first, noisy.begin() + last);
    }
    CHECK(j["results"][0]["snr_db"].get<double>() ==
          doctest::Approx(snr_db(ref_mid, noisy_mid)).epsilon(1e-6));
  }
}

TEST_CASE("data: convbank snr fails with one error line naming the file") {
  if (!have_app()) return;
  const std::string clean = audio("speech_16k_stereo_clean.wav");

  SUBCASE("missing test file") {
    TempDir dir;
    const std::string missing = dir.file("no_such_file.wav");
    const Run run = run_app({"snr", clean, missing});
    CHECK(run.exit_code == 1);
    CHECK(run.out.empty());
    CHECK(run.err.rfind("convbank: error: ", 0) == 0);
    CHECK(run.err.find(missing) != std::string::npos);
  }
  SUBCASE("missing reference") {
    TempDir dir;
    const std::string missing = dir.file("no_such_reference.wav");
    const Run run = run_app({"snr", missing, clean});
    CHECK(run.exit_code == 1);
    CHECK(run.err.rfind("convbank: error: ", 0) == 0);
    CHECK(run.err.find(missing) != std::string::npos);
  }
  SUBCASE("channel-count mismatch, even after a good file") {
    const std::string mono = audio("speech_16k_mono_noisy.wav");
    const Run run = run_app({"snr", clean, audio("speech_16k_stereo_noisy.wav"), mono});
    CHECK(run.exit_code == 1);
    // Checked before any result is printed, so stdout never holds a partial report.
    CHECK(run.out.empty());
    CHECK(run.err.rfind("convbank: error: ", 0) == 0);
    CHECK(run.err.find(mono) != std::string::npos);
    CHECK(run.err.find("channel") != std::string::npos);
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
  }
  SUBCASE("sample-rate mismatch") {
    const std::string other = audio("speech_48k_stereo_noisy.wav");
    const Run run = run_app({"snr", clean, other});
    CHECK(run.exit_code == 1);
    CHECK(run.err.rfind("convbank: error: ", 0) == 0);
    CHECK(run.err.find(other) != std::string::npos);
    CHECK(run.err.find("48000") != std::string::npos);
  }
}

#endif  // CONVBANK_WITH_SNDFILE

}  // namespace
