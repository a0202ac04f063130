// Filter banks: an analysis Conv1d and a synthesis ConvTranspose1d that share the number of
// filters, the kernel size and the stride, with computed (presets.hpp) or trained weights; a
// per-band effect between them; and a stream of the whole thing.
//
//   auto bank = std::make_shared<convbank::FilterBank>(
//       convbank::FilterBank::from_spec("stft:n_fft=512,hop=128", {.sample_rate = 16000}));
//   convbank::Tensor features = bank->encode(audio);        // (channels, 514, frames)
//   convbank::Tensor back = bank->decode(features, 2);      // (1, 2, samples)
//
//   convbank::FilterBankStream stream(bank, convbank::make_effect("denoise", *bank));
//   stream.prepare(/*max_frames=*/4096, /*channels=*/2);
//   stream.process(chunk, out, &produced);                  // noexcept, no allocation
//
// Multi-channel audio: a bank whose analysis has one input channel applies the same filters to
// every audio channel (the channels are folded into the batch, as asteroid-filterbanks does):
// every computed preset works this way. A bank whose analysis has as many input channels as the
// audio (trained multi-channel weights) is a true multi-channel bank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/tensor.hpp"

namespace convbank {

// How the analysis outputs group into bands, for the effects.
enum class BandLayout {
  kReal,          // each filter is one band
  kComplexPairs,  // filters [0, n/2) are real parts and [n/2, n) the imaginary parts of the same
                  // n/2 bands (stft, analytic pairs, param_sinc's cosine/sine filters)
};

enum class ChannelMode {
  kShared,        // analysis in_channels == 1: the same filters for every audio channel
  kMultichannel,  // analysis in_channels == audio channels
};

// What from_spec needs besides the spec itself.
struct FilterBankSource {
  double sample_rate = 0;  // of the audio; computed presets default to it, models are checked
  std::string weights;     // a .safetensors file, a directory of KEY.npy files, or empty
};

class FilterBank {
 public:
  // Throws Error unless analysis.out_channels == synthesis.in_channels (n_filters), the kernel
  // sizes and strides are equal, groups are 1, and the synthesis has as many output channels as
  // the analysis has input channels.
  FilterBank(std::shared_ptr<const Conv1d> analysis,
             std::shared_ptr<const ConvTranspose1d> synthesis,
             BandLayout layout = BandLayout::kReal, std::string description = "",
             double sample_rate = 0);

  // A bank from a SPEC (docs/usage.md has every preset and key):
  //   stft:n_fft=512,hop=128,window=hann[,center=true][,pad_mode=constant][,synthesis=pinv]
  //   mel:n_filters=40,n_fft=512,hop=128[,f_min=0,f_max=8000,sample_rate=16000]
  //   param_sinc:n_filters=64,kernel_size=251,stride=80[,min_low_hz=50,min_band_hz=50]
  //   gammatone:n_filters=32,kernel_size=512,stride=128[,f_min=50,f_max=...]
  //   analytic:analysis=KEY,stride=8          (KEY's filters and their Hilbert transforms)
  //   free:analysis=KEY,synthesis=KEY,stride=8[,padding=0][,analysis_bias=KEY,...]
  // Computed presets run at source.sample_rate unless the spec sets sample_rate, which must then
  // equal the audio's. Synthesis is the preset's own (stft: the window-sum-normalized inverse)
  // or synthesis=pinv, the pseudo-inverse of the analysis. Throws Error naming the preset, the
  // key, the value and the rule.
  static FilterBank from_spec(std::string_view spec, const FilterBankSource& source = {});

  const Conv1d& analysis() const { return *analysis_; }
  const ConvTranspose1d& synthesis() const { return *synthesis_; }
  const std::shared_ptr<const Conv1d>& analysis_ptr() const { return analysis_; }
  const std::shared_ptr<const ConvTranspose1d>& synthesis_ptr() const { return synthesis_; }

  std::int64_t n_filters() const;
  std::int64_t kernel_size() const;
  std::int64_t stride() const;
  BandLayout layout() const { return layout_; }
  std::int64_t bands() const;  // n_filters, or n_filters / 2 for complex pairs
  ChannelMode channel_mode() const;
  // Audio channels the bank takes: 0 (any) for a shared bank.
  std::int64_t audio_channels() const;
  // Sample rate the weights were made for (0: any). Throws Error naming `what` (a file) when
  // `rate` differs.
  double sample_rate() const { return sample_rate_; }
  void check_sample_rate(double rate, std::string_view what) const;
  const std::string& description() const { return description_; }

  // audio (batch, channels, samples) -> features: (batch * channels, n_filters, frames) for a
  // shared bank, (batch, n_filters, frames) for a multi-channel one. Same device as the input.
  Tensor encode(const Tensor& audio) const;
  // The inverse arrangement: features -> (batch, channels, samples'), `channels` being the
  // audio's channel count (features.batch() / channels for a shared bank).
  Tensor decode(const Tensor& features, std::int64_t channels) const;

 private:
  std::shared_ptr<const Conv1d> analysis_;
  std::shared_ptr<const ConvTranspose1d> synthesis_;
  BandLayout layout_;
  std::string description_;
  double sample_rate_;
};

// Per-band processing between analysis and synthesis, frame by frame. process() is called from
// the real-time path: noexcept, no allocation, no lock. Frames arrive in order; processing a
// block of frames in one call equals processing them one call at a time.
class BandProcessor {
 public:
  virtual ~BandProcessor() = default;
  // Sizes the state for `batch` independent signals of `n_filters` filters and chunks of up to
  // `max_frames` frames; resets. May allocate.
  virtual void prepare(std::int64_t batch, std::int64_t n_filters, std::int64_t max_frames) = 0;
  // bands: (batch, n_filters, n) host, modified in place.
  virtual void process(TensorView<float> bands) noexcept = 0;
  virtual void reset() noexcept = 0;
  virtual std::string describe() const = 0;
};

// An effect by name, for `bank`:
//   none                         analysis -> synthesis only (nullptr)
//   gain:BAND=DB[,BAND=DB...]    BAND a band index or range "a-b" (for complex-pair banks a
//                                band is the pair), DB the gain in dB, e.g. gain:0-7=-60
//   denoise[:reduction_db=12,oversubtract=1.5,window=0.5,...]
//                                spectral gate: a minimum-tracking noise floor per band and a
//                                smoothed gain (docs/usage.md)
// Time constants are in seconds at `sample_rate` (the audio's; 0: the bank's, else 16 kHz).
// Throws Error naming the effect, the key and the rule.
std::unique_ptr<BandProcessor> make_effect(std::string_view spec, const FilterBank& bank,
                                           double sample_rate = 0);

// Analysis -> effect -> synthesis, chunk by chunk, with the overlaps carried as in the layer
// streams (stream.hpp): the concatenation of everything process() and flush() return equals
// decode(effect(encode(audio))) of the whole signal.
class FilterBankStream {
 public:
  explicit FilterBankStream(std::shared_ptr<const FilterBank> bank,
                            std::unique_ptr<BandProcessor> effect = nullptr);
  ~FilterBankStream();
  FilterBankStream(FilterBankStream&&) noexcept;
  FilterBankStream& operator=(FilterBankStream&&) noexcept;

  // Audio of `channels` channels (and `batch` independent signals) in chunks of 1..max_frames
  // frames. Device::kCuda runs both layers on the GPU (the effect stays on the host). Throws
  // Error when a multi-channel bank does not match `channels`.
  void prepare(std::int64_t max_frames, std::int64_t channels, std::int64_t batch = 1,
               Device device = Device::kCpu);
  bool prepared() const noexcept;
  const FilterBank& bank() const noexcept;

  std::int64_t max_output_frames(std::int64_t input_frames) const noexcept;
  std::int64_t max_flush_frames() const noexcept;
  // Output frame t is emitted by the call that delivers input frame t + latency_frames() (or an
  // earlier one).
  std::int64_t latency_frames() const noexcept;

  // in: (batch, channels, n) host; out: (batch, channels, >= max_output_frames(n)) host.
  Status process(TensorView<const float> in, TensorView<float> out,
                 std::int64_t* frames_out) noexcept;
  Status flush(TensorView<float> out, std::int64_t* frames_out) noexcept;
  void reset() noexcept;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace convbank
