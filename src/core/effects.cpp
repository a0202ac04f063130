// Per-band effects between a filter bank's analysis and synthesis (filterbank.hpp): fixed gains
// per band, and a spectral-gate denoiser.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "convbank/filterbank.hpp"
#include "core/spec.hpp"

namespace convbank {

namespace {

// The rows of the bank that hold band k: one row, or the real and imaginary rows of a pair.
struct BandRows {
  std::int64_t bands = 0;
  bool pairs = false;
  explicit BandRows(const FilterBank& bank)
      : bands(bank.bands()), pairs(bank.layout() == BandLayout::kComplexPairs) {}
  std::int64_t re(std::int64_t k) const { return k; }
  std::int64_t im(std::int64_t k) const { return k + bands; }
};

class GainEffect final : public BandProcessor {
 public:
  GainEffect(const FilterBank& bank, std::vector<float> band_gain, std::string text)
      : rows_(bank), band_gain_(std::move(band_gain)), text_(std::move(text)) {}

  void prepare(std::int64_t, std::int64_t n_filters, std::int64_t) override {
    row_gain_.assign(static_cast<std::size_t>(n_filters), 1.0f);
    for (std::int64_t k = 0; k < rows_.bands; ++k) {
      row_gain_[static_cast<std::size_t>(rows_.re(k))] = band_gain_[static_cast<std::size_t>(k)];
      if (rows_.pairs) {
        row_gain_[static_cast<std::size_t>(rows_.im(k))] = band_gain_[static_cast<std::size_t>(k)];
      }
    }
  }
  void process(TensorView<float> bands) noexcept override {
    for (std::int64_t b = 0; b < bands.batch(); ++b) {
      for (std::int64_t f = 0; f < bands.channels(); ++f) {
        const float g = row_gain_[static_cast<std::size_t>(f)];
        if (g == 1.0f) continue;
        float* row = bands.channel(b, f);
        for (std::int64_t t = 0; t < bands.frames(); ++t) row[t] *= g;
      }
    }
  }
  void reset() noexcept override {}
  std::string describe() const override { return text_; }

 private:
  BandRows rows_;
  std::vector<float> band_gain_;
  std::vector<float> row_gain_;
  std::string text_;
};

// Spectral gate. Per band: the power (|re + i im|^2 for a pair, x^2 for a real band) smoothed
// over `smoothing` seconds; a noise floor that is the minimum of that power over the last
// `window` seconds (minimum statistics, Martin 2001: kSubwindows running minima, so speech, which
// never fills a whole window in every band, does not raise it, and a floor that was too low
// recovers after one window), times `oversubtract` for the minimum's bias; a gain that opens at
// once and closes over `release` seconds, to keep the residual noise from flickering ("musical
// noise"; 0 by default, as the decision-directed estimate below already smooths). The gain is
// the Wiener gain of a decision-directed a-priori SNR (Ephraim & Malah 1984), floored at
// -reduction_db. Frames of exactly zero power (digital silence, padding) leave the statistics
// alone. Causal and frame by frame, so streamed and offline processing agree exactly.
class DenoiseEffect final : public BandProcessor {
 public:
  struct Options {
    double reduction_db = 12;
    double oversubtract = 1.5;
    double smoothing = 0.03;
    double release = 0;
    double window = 0.5;
  };
  static constexpr int kSubwindows = 8;
  static constexpr float kDecision = 0.98f;

  DenoiseEffect(const FilterBank& bank, const Options& o, double frame_rate, std::string text)
      : rows_(bank), text_(std::move(text)) {
    floor_ = static_cast<float>(std::pow(10.0, -o.reduction_db / 20.0));
    over_ = static_cast<float>(o.oversubtract);
    smooth_ = static_cast<float>(o.smoothing > 0 ? std::exp(-1.0 / (o.smoothing * frame_rate)) : 0);
    release_ = static_cast<float>(o.release > 0 ? std::exp(-1.0 / (o.release * frame_rate)) : 0);
    sub_frames_ = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::llround(o.window * frame_rate / kSubwindows)));
  }

  void prepare(std::int64_t batch, std::int64_t, std::int64_t) override {
    const std::size_t n = static_cast<std::size_t>(batch * rows_.bands);
    power_.resize(n);
    current_min_.resize(n);
    gain_.resize(n);
    clean_.resize(n);
    sub_min_.resize(n * kSubwindows);
    reset();
  }

  void process(TensorView<float> bands) noexcept override {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    for (std::int64_t b = 0; b < bands.batch(); ++b) {
      for (std::int64_t k = 0; k < rows_.bands; ++k) {
        const std::size_t s = static_cast<std::size_t>(b * rows_.bands + k);
        float* re = bands.channel(b, rows_.re(k));
        float* im = rows_.pairs ? bands.channel(b, rows_.im(k)) : nullptr;
        float* sub = &sub_min_[s * kSubwindows];
        float* clean = clean_.data();
        float power = power_[s], cur = current_min_[s], gain = gain_[s];
        std::int64_t frame = frames_;
        for (std::int64_t t = 0; t < bands.frames(); ++t, ++frame) {
          const float p = re[t] * re[t] + (im != nullptr ? im[t] * im[t] : 0.0f);
          if (p > 0.0f) {
            power = power == 0.0f ? p : smooth_ * power + (1.0f - smooth_) * p;
            cur = std::min(cur, power);
          }
          if ((frame + 1) % sub_frames_ == 0) {  // a subwindow ends: keep its minimum
            sub[(frame / sub_frames_) % kSubwindows] = cur;
            cur = kInf;
          }
          float noise = cur;
          for (int i = 0; i < kSubwindows; ++i) noise = std::min(noise, sub[i]);
          float target = 1.0f;
          if (p > 0.0f && noise < kInf && noise > 0.0f) {
            // Decision-directed a-priori SNR (Ephraim & Malah 1984) and the Wiener gain.
            const float n = over_ * noise;
            const float xi =
                kDecision * clean[s] / n + (1.0f - kDecision) * std::max(p / n - 1.0f, 0.0f);
            target = std::max(floor_, xi / (1.0f + xi));
          }
          gain = target > gain ? target : release_ * gain + (1.0f - release_) * target;
          clean[s] = gain * gain * p;
          re[t] *= gain;
          if (im != nullptr) im[t] *= gain;
        }
        power_[s] = power;
        current_min_[s] = cur;
        gain_[s] = gain;
      }
    }
    frames_ += bands.frames();
  }

  void reset() noexcept override {
    std::fill(power_.begin(), power_.end(), 0.0f);
    std::fill(current_min_.begin(), current_min_.end(), std::numeric_limits<float>::infinity());
    std::fill(sub_min_.begin(), sub_min_.end(), std::numeric_limits<float>::infinity());
    std::fill(gain_.begin(), gain_.end(), 1.0f);
    std::fill(clean_.begin(), clean_.end(), 0.0f);
    frames_ = 0;
  }
  std::string describe() const override { return text_; }

 private:
  BandRows rows_;
  std::string text_;
  float floor_ = 0, over_ = 0, smooth_ = 0, release_ = 0;
  std::int64_t sub_frames_ = 1;
  std::int64_t frames_ = 0;  // frames processed since reset (shared by the batch)
  std::vector<float> power_, current_min_, gain_, clean_;  // per (batch, band)
  std::vector<float> sub_min_;                             // kSubwindows per (batch, band)
};

// "a" or "a-b" band indices within [0, bands).
std::pair<std::int64_t, std::int64_t> band_range(const std::string& text, std::int64_t bands) {
  const auto bad = [&](const std::string& why) {
    return Error("effect 'gain': band '" + text + "' " + why);
  };
  const std::size_t dash = text.find('-');
  auto parse = [&](const std::string& s) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size() || v < 0) throw bad("is not an index or a range a-b");
    return static_cast<std::int64_t>(v);
  };
  const std::int64_t lo = parse(text.substr(0, dash));
  const std::int64_t hi = dash == std::string::npos ? lo : parse(text.substr(dash + 1));
  if (lo > hi) throw bad("is an empty range");
  if (hi >= bands) {
    throw bad("is out of range: the bank has " + std::to_string(bands) + " bands (0-" +
              std::to_string(bands - 1) + ")");
  }
  return {lo, hi};
}

}  // namespace

std::unique_ptr<BandProcessor> make_effect(std::string_view text, const FilterBank& bank,
                                           double sample_rate) {
  const detail::Spec spec(text, "effect");
  if (spec.name() == "none") {
    spec.only({});
    return nullptr;
  }
  if (spec.name() == "gain") {
    if (spec.keys().empty()) {
      throw Error("effect 'gain': give at least one BAND=DB, e.g. gain:0-7=-60");
    }
    std::vector<float> gain(static_cast<std::size_t>(bank.bands()), 1.0f);
    for (const std::string& key : spec.keys()) {
      const auto [lo, hi] = band_range(key, bank.bands());
      const double db = spec.number(key, 0);
      for (std::int64_t k = lo; k <= hi; ++k) {
        gain[static_cast<std::size_t>(k)] = static_cast<float>(std::pow(10.0, db / 20.0));
      }
    }
    return std::make_unique<GainEffect>(bank, std::move(gain), std::string(text));
  }
  if (spec.name() == "denoise") {
    spec.only({"reduction_db", "oversubtract", "smoothing", "release", "window"});
    DenoiseEffect::Options o;
    o.reduction_db = spec.number("reduction_db", o.reduction_db);
    o.oversubtract = spec.number("oversubtract", o.oversubtract);
    o.smoothing = spec.number("smoothing", o.smoothing);
    o.release = spec.number("release", o.release);
    o.window = spec.number("window", o.window);
    if (o.reduction_db < 0 || o.oversubtract <= 0 || o.smoothing < 0 || o.release < 0 ||
        o.window <= 0) {
      throw Error(
          "effect 'denoise': reduction_db, smoothing and release must be >= 0 and oversubtract "
          "and window > 0, got " +
          std::string(text));
    }
    double rate = sample_rate > 0 ? sample_rate : bank.sample_rate();
    if (rate <= 0) rate = 16000;
    return std::make_unique<DenoiseEffect>(bank, o, rate / static_cast<double>(bank.stride()),
                                           std::string(text));
  }
  throw Error("effect: unknown effect '" + spec.name() + "' (known: none, gain, denoise)");
}

}  // namespace convbank
