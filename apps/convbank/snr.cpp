// `convbank snr`: signal-to-noise ratio of processed audio files against a reference, the
// figure of merit for denoising and for encode -> decode round trips.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "convbank/convbank.hpp"

namespace convbank::app {

namespace {

// Bounds memory whatever the file length, and is large enough that libsndfile's per-call cost
// does not show.
constexpr std::int64_t kChunkFrames = 16384;

struct SnrResult {
  std::string path;
  double snr_db = 0;
  std::int64_t frames = 0;  // frames per channel that were compared
};

// Samples are compared by position, so a file of another rate or channel layout would give a
// meaningless number rather than a low one: refuse it up front, before any output is printed.
void check_compatible(const io::AudioInfo& ref, const std::string& ref_path,
                      const io::AudioInfo& test, const std::string& test_path) {
  if (test.channels != ref.channels) {
    throw Error("snr: '" + test_path + "' has " + std::to_string(test.channels) +
                " channel(s) but the reference '" + ref_path + "' has " +
                std::to_string(ref.channels) + "; both files must have the same channel count");
  }
  if (test.sample_rate != ref.sample_rate) {
    throw Error("snr: '" + test_path + "' has sample rate " + std::to_string(test.sample_rate) +
                " Hz but the reference '" + ref_path + "' has " + std::to_string(ref.sample_rate) +
                " Hz; both files must have the same rate");
  }
}

SnrResult measure(const std::string& ref_path, const std::string& test_path, double skip_seconds) {
  io::AudioReader ref(ref_path);
  io::AudioReader test(test_path);
  check_compatible(ref.info(), ref_path, test.info(), test_path);
  const std::int64_t channels = ref.info().channels;
  const std::int64_t common = std::min(ref.info().frames, test.info().frames);
  const auto skip = static_cast<std::int64_t>(std::llround(skip_seconds * ref.info().sample_rate));
  if (common <= 2 * skip) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", skip_seconds);
    throw Error("snr: --skip " + std::string(seconds) + " s (" + std::to_string(skip) +
                " frames at each end) leaves nothing of the " + std::to_string(common) +
                " frames that '" + test_path + "' and the reference '" + ref_path +
                "' have in common; --skip must be less than half their common length");
  }
  const std::int64_t end = common - skip;

  Tensor ref_chunk(Shape{1, channels, kChunkFrames});
  Tensor test_chunk(Shape{1, channels, kChunkFrames});
  // Double accumulators: a float sum over hours of audio loses the small error terms.
  double signal = 0, noise = 0;
  std::int64_t position = 0;
  while (position < end) {
    const std::int64_t want = std::min(kChunkFrames, end - position);
    const std::int64_t got_ref = ref.read(ref_chunk.view().slice_frames(0, want));
    const std::int64_t got_test = test.read(test_chunk.view().slice_frames(0, want));
    // A header may promise more frames than the file holds (a truncated recording): compare
    // what both really have.
    const std::int64_t n = std::min(got_ref, got_test);
    const std::int64_t first = std::clamp<std::int64_t>(skip - position, 0, n);
    for (std::int64_t c = 0; c < channels; ++c) {
      const float* r = ref_chunk.view().channel(0, c);
      const float* t = test_chunk.view().channel(0, c);
      for (std::int64_t i = first; i < n; ++i) {
        const double d = static_cast<double>(t[i]) - r[i];
        signal += static_cast<double>(r[i]) * r[i];
        noise += d * d;
      }
    }
    position += n;
    if (n < want) break;
  }
  SnrResult result;
  result.path = test_path;
  result.frames = std::max<std::int64_t>(0, std::min(position, end) - skip);
  if (noise == 0) {
    result.snr_db = std::numeric_limits<double>::infinity();
  } else if (signal == 0) {
    result.snr_db = -std::numeric_limits<double>::infinity();
  } else {
    result.snr_db = 10.0 * std::log10(signal / noise);
  }
  return result;
}

}  // namespace

void add_snr(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands) {
  struct Options {
    std::string reference;
    std::vector<std::string> tests;
    double skip_seconds = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "snr",
      "SNR in dB of each TEST audio file against REFERENCE: 10*log10(sum ref^2 / sum "
      "(test-ref)^2) over all channels and the frames both files have");
  sub->add_option("reference", opt->reference, "Reference audio file (e.g. the clean signal)")
      ->required();
  sub->add_option("tests", opt->tests,
                  "Audio files to measure; same sample rate and channel count as the reference")
      ->required();
  sub->add_option("--skip", opt->skip_seconds,
                  "Seconds left out at the start and at the end of the common length (edges "
                  "where a filter bank is not expected to reconstruct)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--json", opt->json,
                "Print one JSON object; snr_db is null where the SNR is infinite (identical "
                "files or a silent reference)");
  commands.emplace_back(sub, [opt]() {
    const io::AudioInfo ref_info = io::AudioReader(opt->reference).info();
    for (const std::string& path : opt->tests) {
      check_compatible(ref_info, opt->reference, io::AudioReader(path).info(), path);
    }
    std::vector<SnrResult> results;
    for (const std::string& path : opt->tests) {
      results.push_back(measure(opt->reference, path, opt->skip_seconds));
      if (!opt->json) {
        const SnrResult& r = results.back();
        std::printf("%s: %.3f dB (%lld frames x %d channels)\n", r.path.c_str(), r.snr_db,
                    static_cast<long long>(r.frames), ref_info.channels);
      }
    }
    if (opt->json) {
      // JSON has no infinities: identical files (SNR +inf) and a silent reference (-inf) give
      // null, which is what nlohmann::json writes for them.
      nlohmann::json j = {{"reference", opt->reference},
                          {"sample_rate", ref_info.sample_rate},
                          {"channels", ref_info.channels},
                          {"skip_seconds", opt->skip_seconds},
                          {"results", nlohmann::json::array()}};
      for (const SnrResult& r : results) {
        j["results"].push_back({{"file", r.path}, {"snr_db", r.snr_db}, {"frames", r.frames}});
      }
      std::printf("%s\n", j.dump().c_str());
    }
    return 0;
  });
}

}  // namespace convbank::app
