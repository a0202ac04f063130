// FilterBank: validation, SPEC parsing (presets and trained weights), encode/decode with the
// channel arrangement; FilterBankStream: analysis stream -> effect -> synthesis stream.
#include "convbank/filterbank.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "convbank/io/npy.hpp"
#include "convbank/io/safetensors.hpp"
#include "convbank/presets.hpp"
#include "convbank/stream.hpp"
#include "core/spec.hpp"

namespace convbank {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

std::string str(double v) {
  return detail::format_number(v);
}

// Tensors by key from --weights: a .safetensors file, a directory of KEY.npy files, or (no
// --weights) keys that are .npy paths themselves.
class WeightSource {
 public:
  explicit WeightSource(const std::string& path) : path_(path) {
    if (path.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      directory_ = true;
    } else {
      file_ = std::make_unique<io::Safetensors>(io::Safetensors::open(path));
    }
  }

  Tensor get(const std::string& key) const {
    if (file_) return file_->tensor(key);
    if (directory_) {
      const std::string p = (std::filesystem::path(path_) / (key + ".npy")).string();
      if (!std::filesystem::exists(p)) {
        throw Error("weights '" + path_ + "': no tensor '" + key + "' (looked for " + p + ")");
      }
      return io::read_npy(p);
    }
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) return io::read_npy(key);
    throw Error("weights: tensor '" + key +
                "' needs --weights (a .safetensors file or a directory of .npy files), or give "
                "a .npy path as the key");
  }

  // The model's sample rate from the safetensors metadata ("sample_rate"), 0 when absent.
  double sample_rate() const {
    if (!file_) return 0;
    const auto it = file_->metadata().find("sample_rate");
    if (it == file_->metadata().end()) return 0;
    try {
      return std::stod(it->second);
    } catch (const std::exception&) {
      throw Error("weights '" + path_ + "': metadata sample_rate '" + it->second +
                  "' is not a number");
    }
  }

 private:
  std::string path_;
  bool directory_ = false;
  std::unique_ptr<io::Safetensors> file_;
};

// A rank-3 weight as (N, C, K); rank-2 (N, K) tensors (e.g. saved squeezed) count as C = 1.
Tensor as_bank(Tensor t, const std::string& key) {
  if (t.rank() == 2) {
    Tensor r(Shape{t.shape().channels, 1, t.shape().frames});
    std::copy(t.data(), t.data() + t.numel(), r.data());
    return r;
  }
  if (t.rank() != 3) {
    throw Error("weights: tensor '" + key + "' must have rank 3 (n_filters, channels, " +
                "kernel_size), got shape " + t.shape_string());
  }
  return t;
}

std::shared_ptr<Conv1d> make_analysis(const Tensor& w, std::int64_t stride, std::int64_t padding,
                                      const Tensor* bias, PaddingMode mode = PaddingMode::kZeros) {
  auto layer = std::make_shared<Conv1d>(Conv1dOptions{.in_channels = w.shape().channels,
                                                      .out_channels = w.shape().batch,
                                                      .kernel_size = w.shape().frames,
                                                      .stride = stride,
                                                      .padding = padding,
                                                      .bias = bias != nullptr,
                                                      .padding_mode = mode});
  layer->set_weight(w.view());
  if (bias != nullptr) layer->set_bias(bias->view());
  return layer;
}

std::shared_ptr<ConvTranspose1d> make_synthesis(const Tensor& w, std::int64_t stride,
                                                std::int64_t padding, const Tensor* bias) {
  auto layer =
      std::make_shared<ConvTranspose1d>(ConvTranspose1dOptions{.in_channels = w.shape().batch,
                                                               .out_channels = w.shape().channels,
                                                               .kernel_size = w.shape().frames,
                                                               .stride = stride,
                                                               .padding = padding,
                                                               .bias = bias != nullptr});
  layer->set_weight(w.view());
  if (bias != nullptr) layer->set_bias(bias->view());
  return layer;
}

// The sample rate a computed preset runs at: the spec's, which must match the audio's, or the
// audio's.
double preset_rate(const detail::Spec& spec, const FilterBankSource& source) {
  const double rate = spec.number("sample_rate", source.sample_rate);
  if (rate <= 0) {
    throw Error("preset '" + spec.name() +
                "': sample_rate must be > 0 (give sample_rate=, or audio with a rate)");
  }
  if (source.sample_rate > 0 && spec.has("sample_rate") && rate != source.sample_rate) {
    throw Error("preset '" + spec.name() + "': sample_rate=" + str(rate) + " but the audio is at " +
                str(source.sample_rate) + " Hz (the filters are made for one rate)");
  }
  return rate;
}

// The synthesis weights: the preset's own, or the pseudo-inverse of the analysis.
Tensor synthesis_for(const detail::Spec& spec, const Tensor& analysis, std::int64_t stride,
                     Tensor own) {
  const std::string s = spec.text("synthesis", own.empty() ? "pinv" : "own");
  if (s == "pinv") return presets::pinv_synthesis(analysis, stride);
  if (s == "own" && !own.empty()) return own;
  throw Error("preset '" + spec.name() + "': synthesis must be " +
              std::string(own.empty() ? "pinv" : "own or pinv") + ", got '" + s + "'");
}

}  // namespace

FilterBank::FilterBank(std::shared_ptr<const Conv1d> analysis,
                       std::shared_ptr<const ConvTranspose1d> synthesis, BandLayout layout,
                       std::string description, double sample_rate)
    : analysis_(std::move(analysis)),
      synthesis_(std::move(synthesis)),
      layout_(layout),
      description_(std::move(description)),
      sample_rate_(sample_rate) {
  if (!analysis_ || !synthesis_) throw Error("FilterBank: analysis and synthesis must be set");
  const Conv1dOptions& a = analysis_->options();
  const ConvTranspose1dOptions& s = synthesis_->options();
  auto fail = [](const std::string& rule) { throw Error("FilterBank: " + rule); };
  if (a.out_channels != s.in_channels) {
    fail("analysis has " + str(a.out_channels) + " filters (out_channels) but synthesis takes " +
         str(s.in_channels) + " (in_channels); they must be equal");
  }
  if (a.kernel_size != s.kernel_size) {
    fail("analysis kernel_size " + str(a.kernel_size) + " differs from synthesis kernel_size " +
         str(s.kernel_size));
  }
  if (a.stride != s.stride) {
    fail("analysis stride " + str(a.stride) + " differs from synthesis stride " + str(s.stride));
  }
  if (a.groups != 1 || s.groups != 1) fail("groups must be 1 in both layers");
  if (a.in_channels != s.out_channels) {
    fail("analysis takes " + str(a.in_channels) + " audio channels but synthesis makes " +
         str(s.out_channels) + "; they must be equal");
  }
  if (layout_ == BandLayout::kComplexPairs && a.out_channels % 2 != 0) {
    fail("a complex-pair bank needs an even number of filters, got " + str(a.out_channels));
  }
}

std::int64_t FilterBank::n_filters() const {
  return analysis_->options().out_channels;
}
std::int64_t FilterBank::kernel_size() const {
  return analysis_->options().kernel_size;
}
std::int64_t FilterBank::stride() const {
  return analysis_->options().stride;
}
std::int64_t FilterBank::bands() const {
  return layout_ == BandLayout::kComplexPairs ? n_filters() / 2 : n_filters();
}
ChannelMode FilterBank::channel_mode() const {
  return analysis_->options().in_channels == 1 ? ChannelMode::kShared : ChannelMode::kMultichannel;
}
std::int64_t FilterBank::audio_channels() const {
  return channel_mode() == ChannelMode::kShared ? 0 : analysis_->options().in_channels;
}

void FilterBank::check_sample_rate(double rate, std::string_view what) const {
  if (sample_rate_ > 0 && rate != sample_rate_) {
    throw Error(std::string(what) + ": sample rate " + str(rate) + " Hz, but the filter bank (" +
                description_ + ") is made for " + str(sample_rate_) + " Hz");
  }
}

FilterBank FilterBank::from_spec(std::string_view text, const FilterBankSource& source) {
  const detail::Spec spec(text, "filter bank");
  const std::string& name = spec.name();
  std::string desc(text);
  if (name == "stft") {
    spec.only({"n_fft", "hop", "window", "center", "pad_mode", "synthesis"});
    presets::Stft o;
    o.n_fft = spec.integer("n_fft", o.n_fft, 2);
    o.hop = spec.integer("hop", o.n_fft / 4, 1);
    o.window = presets::parse_window(spec.text("window", "hann"), "stft window");
    o.center = spec.flag("center", true);
    // How center pads the signal, by torch.stft's names: constant (zeros, convbank's default),
    // or reflect (torch.stft's default) and replicate.
    const std::string pad_mode = spec.text("pad_mode", "constant");
    const PaddingMode mode = pad_mode == "constant"
                                 ? PaddingMode::kZeros
                                 : parse_padding_mode(pad_mode, "preset 'stft': pad_mode");
    if (mode == PaddingMode::kCircular) {
      throw Error(
          "preset 'stft': pad_mode 'circular' cannot stream (a bank streams); use "
          "constant, reflect or replicate");
    }
    const Tensor a = presets::stft_analysis(o);
    const std::int64_t pad = presets::stft_padding(o);
    const Tensor s = synthesis_for(spec, a, o.hop, presets::stft_synthesis(o));
    return FilterBank(make_analysis(a, o.hop, pad, nullptr, mode),
                      make_synthesis(s, o.hop, pad, nullptr), BandLayout::kComplexPairs, desc);
  }
  if (name == "mel") {
    spec.only(
        {"n_filters", "n_fft", "hop", "sample_rate", "f_min", "f_max", "padding", "synthesis"});
    presets::Mel o;
    o.n_filters = spec.integer("n_filters", o.n_filters, 1);
    o.n_fft = spec.integer("n_fft", o.n_fft, 2);
    o.hop = spec.integer("hop", o.n_fft / 4, 1);
    o.sample_rate = preset_rate(spec, source);
    o.f_min = spec.number("f_min", o.f_min);
    o.f_max = spec.number("f_max", 0);
    const std::int64_t pad = spec.integer("padding", 0, 0);
    const Tensor a = presets::mel_analysis(o);
    const Tensor s = synthesis_for(spec, a, o.hop, Tensor());
    return FilterBank(make_analysis(a, o.hop, pad, nullptr), make_synthesis(s, o.hop, pad, nullptr),
                      BandLayout::kReal, desc, o.sample_rate);
  }
  if (name == "param_sinc") {
    spec.only({"n_filters", "kernel_size", "stride", "sample_rate", "min_low_hz", "min_band_hz",
               "padding", "synthesis"});
    presets::ParamSinc o;
    o.n_filters = spec.integer("n_filters", o.n_filters, 2);
    o.kernel_size = spec.integer("kernel_size", o.kernel_size, 1);
    o.stride = spec.integer("stride", o.stride, 1);
    o.sample_rate = preset_rate(spec, source);
    o.min_low_hz = spec.number("min_low_hz", o.min_low_hz);
    o.min_band_hz = spec.number("min_band_hz", o.min_band_hz);
    const std::int64_t pad = spec.integer("padding", 0, 0);
    const Tensor a = presets::param_sinc_analysis(o);
    const Tensor s = synthesis_for(spec, a, o.stride, Tensor());
    return FilterBank(make_analysis(a, o.stride, pad, nullptr),
                      make_synthesis(s, o.stride, pad, nullptr), BandLayout::kComplexPairs, desc,
                      o.sample_rate);
  }
  if (name == "gammatone") {
    spec.only({"n_filters", "kernel_size", "stride", "sample_rate", "f_min", "f_max", "padding",
               "synthesis"});
    presets::Gammatone o;
    o.n_filters = spec.integer("n_filters", o.n_filters, 1);
    o.kernel_size = spec.integer("kernel_size", o.kernel_size, 1);
    o.stride = spec.integer("stride", o.kernel_size / 4 > 0 ? o.kernel_size / 4 : 1, 1);
    o.sample_rate = preset_rate(spec, source);
    o.f_min = spec.number("f_min", o.f_min);
    o.f_max = spec.number("f_max", 0);
    const std::int64_t pad = spec.integer("padding", 0, 0);
    const Tensor a = presets::gammatone_analysis(o);
    const Tensor s = synthesis_for(spec, a, o.stride, Tensor());
    return FilterBank(make_analysis(a, o.stride, pad, nullptr),
                      make_synthesis(s, o.stride, pad, nullptr), BandLayout::kReal, desc,
                      o.sample_rate);
  }
  if (name == "analytic" || name == "free") {
    const bool analytic = name == "analytic";
    if (analytic) {
      spec.only({"analysis", "stride", "padding", "sample_rate", "synthesis"});
    } else {
      spec.only({"analysis", "synthesis", "stride", "padding", "analysis_bias", "synthesis_bias",
                 "sample_rate"});
    }
    if (!spec.has("analysis")) {
      throw Error("preset '" + name + "': analysis=KEY is required (the analysis weights' key)");
    }
    if (!spec.has("stride")) {
      throw Error("preset '" + name +
                  "': stride=N is required (the layers' stride is not stored with the weights)");
    }
    const WeightSource weights(source.weights);
    const std::string akey = spec.text("analysis", "");
    Tensor a = as_bank(weights.get(akey), akey);
    if (analytic) a = presets::analytic_pair(a);
    const std::int64_t stride = spec.integer("stride", 1, 1);
    const std::int64_t pad = spec.integer("padding", 0, 0);
    const std::string skey = spec.text("synthesis", "pinv");
    Tensor s;
    if (skey == "pinv") {
      if (a.shape().channels != 1) {
        throw Error("preset '" + name + "': synthesis=pinv needs a one-channel analysis bank, '" +
                    akey + "' has " + str(a.shape().channels) + " input channels");
      }
      s = presets::pinv_synthesis(a, stride);
    } else if (analytic) {
      throw Error("preset 'analytic': synthesis must be pinv, got '" + skey + "'");
    } else {
      s = as_bank(weights.get(skey), skey);
    }
    Tensor abias, sbias;
    if (spec.has("analysis_bias")) abias = weights.get(spec.text("analysis_bias", ""));
    if (spec.has("synthesis_bias")) sbias = weights.get(spec.text("synthesis_bias", ""));
    double rate = spec.number("sample_rate", weights.sample_rate());
    if (rate < 0) throw Error("preset '" + name + "': sample_rate must be >= 0");
    return FilterBank(make_analysis(a, stride, pad, abias.empty() ? nullptr : &abias),
                      make_synthesis(s, stride, pad, sbias.empty() ? nullptr : &sbias),
                      analytic ? BandLayout::kComplexPairs : BandLayout::kReal, desc, rate);
  }
  throw Error("filter bank: unknown preset '" + name +
              "' (known: stft, mel, param_sinc, gammatone, analytic, free)");
}

Tensor FilterBank::encode(const Tensor& audio) const {
  const Shape in = audio.shape();
  if (channel_mode() == ChannelMode::kMultichannel) {
    if (in.channels != audio_channels()) {
      throw Error("FilterBank::encode: audio has " + str(in.channels) +
                  " channels but the bank takes " + str(audio_channels()));
    }
    return analysis_->forward(audio);
  }
  // Channels folded into the batch: a dense (B, C, T) tensor is (B * C, 1, T) in place.
  const TensorView<const float> folded(audio.data(), Shape{in.batch * in.channels, 1, in.frames},
                                       audio.device());
  Tensor out(analysis_->output_shape(folded.shape()), audio.device());
  // On CUDA this queues on the default stream, which later copies to the host wait for.
  analysis_->forward(folded, out.view());
  return out;
}

Tensor FilterBank::decode(const Tensor& features, std::int64_t channels) const {
  const Shape f = features.shape();
  if (channel_mode() == ChannelMode::kMultichannel) {
    if (channels != audio_channels()) {
      throw Error("FilterBank::decode: channels " + str(channels) + " but the bank makes " +
                  str(audio_channels()));
    }
    return synthesis_->forward(features);
  }
  if (channels < 1 || f.batch % channels != 0) {
    throw Error("FilterBank::decode: features batch " + str(f.batch) +
                " is not a multiple of channels " + str(channels));
  }
  // The (B * C, 1, T') output written straight into a dense (B, C, T') tensor: the same memory.
  const Shape folded = synthesis_->output_shape(f);
  Tensor r(Shape{f.batch / channels, channels, folded.frames}, features.device());
  synthesis_->forward(features.view(), TensorView<float>(r.data(), folded, features.device()));
  return r;
}

// ---------------------------------------------------------------------------------------------
// FilterBankStream

struct FilterBankStream::State {
  std::shared_ptr<const FilterBank> bank;
  std::unique_ptr<BandProcessor> effect;
  std::unique_ptr<Conv1dStream> analysis;
  std::unique_ptr<ConvTranspose1dStream> synthesis;
  Tensor bands;  // (stream batch, n_filters, analysis outputs per call)
  std::int64_t channels = 0, batch = 0, max_frames = 0;
  bool finished = false;

  bool shared() const { return bank->channel_mode() == ChannelMode::kShared; }
  // (batch, channels, n) audio as the layers' (stream batch, layer channels, n).
  template <class T>
  TensorView<T> fold(TensorView<T> v) const {
    if (!shared()) return v;
    return TensorView<T>(v.data(), Shape{v.batch() * v.channels(), 1, v.frames()},
                         v.channel_stride(), v.channel_stride(), v.device());
  }
  template <class T>
  bool foldable(TensorView<T> v) const {
    return !shared() || v.batch() == 1 || v.batch_stride() == v.channels() * v.channel_stride();
  }
  // Effect then synthesis on `m` fresh analysis frames; appends to out from `at`.
  Status synthesize(std::int64_t m, TensorView<float> out, std::int64_t at,
                    std::int64_t* produced) noexcept {
    *produced = 0;
    if (m == 0) return Status::kOk;
    const TensorView<float> b = bands.view().slice_frames(0, m);
    if (effect) effect->process(b);
    const TensorView<float> dst = fold(out).slice_frames(at, out.frames() - at);
    return synthesis->process(b, dst, produced);
  }
};

FilterBankStream::FilterBankStream(std::shared_ptr<const FilterBank> bank,
                                   std::unique_ptr<BandProcessor> effect)
    : s_(std::make_unique<State>()) {
  if (!bank) throw Error("FilterBankStream: bank is null");
  s_->bank = std::move(bank);
  s_->effect = std::move(effect);
  s_->analysis = std::make_unique<Conv1dStream>(s_->bank->analysis_ptr());
  s_->synthesis = std::make_unique<ConvTranspose1dStream>(s_->bank->synthesis_ptr());
}

FilterBankStream::~FilterBankStream() = default;
FilterBankStream::FilterBankStream(FilterBankStream&&) noexcept = default;
FilterBankStream& FilterBankStream::operator=(FilterBankStream&&) noexcept = default;

void FilterBankStream::prepare(std::int64_t max_frames, std::int64_t channels, std::int64_t batch,
                               Device device) {
  State& s = *s_;
  if (channels < 1 || batch < 1 || max_frames < 1) {
    throw Error("FilterBankStream::prepare: max_frames, channels and batch must be >= 1, got " +
                str(max_frames) + ", " + str(channels) + ", " + str(batch));
  }
  if (!s.shared() && channels != s.bank->audio_channels()) {
    throw Error("FilterBankStream: the bank takes " + str(s.bank->audio_channels()) +
                " audio channels, got " + str(channels));
  }
  const std::int64_t stream_batch = s.shared() ? batch * channels : batch;
  s.analysis->prepare(max_frames, stream_batch, device);
  const std::int64_t bands_frames =
      std::max(s.analysis->max_output_frames(max_frames), s.analysis->max_flush_frames());
  s.synthesis->prepare(std::max<std::int64_t>(1, bands_frames), stream_batch, device);
  s.bands = Tensor::zeros(
      Shape{stream_batch, s.bank->n_filters(), std::max<std::int64_t>(1, bands_frames)});
  if (s.effect) s.effect->prepare(stream_batch, s.bank->n_filters(), bands_frames);
  s.channels = channels;
  s.batch = batch;
  s.max_frames = max_frames;
  s.finished = false;
}

bool FilterBankStream::prepared() const noexcept {
  return s_->analysis->prepared() && s_->synthesis->prepared();
}

const FilterBank& FilterBankStream::bank() const noexcept {
  return *s_->bank;
}

std::int64_t FilterBankStream::max_output_frames(std::int64_t input_frames) const noexcept {
  const std::int64_t m = s_->analysis->max_output_frames(input_frames);
  return m > 0 ? s_->synthesis->max_output_frames(m) : 0;
}

std::int64_t FilterBankStream::max_flush_frames() const noexcept {
  const std::int64_t m = s_->analysis->max_flush_frames();
  return (m > 0 ? s_->synthesis->max_output_frames(m) : 0) + s_->synthesis->max_flush_frames();
}

std::int64_t FilterBankStream::latency_frames() const noexcept {
  return s_->analysis->latency_frames() + s_->synthesis->latency_frames() * s_->bank->stride();
}

Status FilterBankStream::process(TensorView<const float> in, TensorView<float> out,
                                 std::int64_t* frames_out) noexcept {
  State& s = *s_;
  *frames_out = 0;
  if (!prepared() || s.finished || in.device() != Device::kCpu || out.device() != Device::kCpu ||
      in.batch() != s.batch || in.channels() != s.channels || out.batch() != s.batch ||
      out.channels() != s.channels || !s.foldable(in) || !s.foldable(out) || in.frames() < 1 ||
      in.frames() > s.max_frames || out.frames() < max_output_frames(in.frames())) {
    return Status::kInvalidArgument;
  }
  std::int64_t m = 0;
  Status st = s.analysis->process(s.fold(in), s.bands.view(), &m);
  if (st != Status::kOk) return st;
  return s.synthesize(m, out, 0, frames_out);
}

Status FilterBankStream::flush(TensorView<float> out, std::int64_t* frames_out) noexcept {
  State& s = *s_;
  *frames_out = 0;
  if (!prepared() || s.finished || out.device() != Device::kCpu || out.batch() != s.batch ||
      out.channels() != s.channels || !s.foldable(out) || out.frames() < max_flush_frames()) {
    return Status::kInvalidArgument;
  }
  std::int64_t m = 0;
  Status st = s.analysis->flush(s.bands.view(), &m);
  if (st != Status::kOk) return st;
  std::int64_t first = 0;
  st = s.synthesize(m, out, 0, &first);
  if (st != Status::kOk) return st;
  std::int64_t tail = 0;
  st = s.synthesis->flush(s.fold(out).slice_frames(first, out.frames() - first), &tail);
  if (st != Status::kOk) return st;
  s.finished = true;
  *frames_out = first + tail;
  return Status::kOk;
}

void FilterBankStream::reset() noexcept {
  s_->analysis->reset();
  s_->synthesis->reset();
  if (s_->effect) s_->effect->reset();
  s_->finished = false;
}

}  // namespace convbank
