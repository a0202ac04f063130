#include "convbank/presets.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <sstream>
#include <string>
#include <utility>

#include "convbank/error.hpp"
#include "cpu/linalg.hpp"

namespace convbank::presets {
namespace {

constexpr double kPi = std::numbers::pi;

// Shortest text that reads back as the same double, so a message shows the value the caller
// passed (7999.999 stays 7999.999, 16000.0 prints as 16000).
std::string num(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(out.str());
}

bool valid_window(Window w) {
  switch (w) {
    case Window::kHann:
    case Window::kSqrtHann:
    case Window::kHamming:
    case Window::kBlackman:
    case Window::kRectangular:
      return true;
  }
  return false;
}

void check_sample_rate(const char* who, double sample_rate) {
  if (!(std::isfinite(sample_rate) && sample_rate > 0)) {
    fail(who, ": sample_rate must be a finite number > 0, got ", num(sample_rate));
  }
}

// cos and sin of 2*pi*m/n for 0 <= m < n, indexed by m. The quarter points are set exactly so
// that the Nyquist and DC imaginary rows are exact zeros: a 1e-16 residue there would give the
// analysis matrix a spurious tiny singular value that pinv would then have to judge.
struct UnitCircle {
  std::vector<double> cos, sin;
  explicit UnitCircle(std::int64_t n) : cos(static_cast<std::size_t>(n)), sin(cos.size()) {
    for (std::int64_t m = 0; m < n; ++m) {
      double c, s;
      if (m == 0) {
        c = 1, s = 0;
      } else if (2 * m == n) {
        c = -1, s = 0;
      } else if (4 * m == n) {
        c = 0, s = 1;
      } else if (4 * m == 3 * n) {
        c = 0, s = -1;
      } else {
        // Angles in (-pi, pi] keep the argument small, where std::cos/sin are most accurate.
        const double angle = 2 * kPi * static_cast<double>(2 * m > n ? m - n : m) / n;
        c = std::cos(angle), s = std::sin(angle);
      }
      cos[static_cast<std::size_t>(m)] = c;
      sin[static_cast<std::size_t>(m)] = s;
    }
  }
};

Tensor to_tensor(const std::vector<double>& values, std::int64_t rows, std::int64_t channels,
                 std::int64_t kernel) {
  Tensor out(Shape{rows, channels, kernel});
  std::transform(values.begin(), values.end(), out.data(),
                 [](double v) { return static_cast<float>(v); });
  return out;
}

void check_stft(const Stft& o) {
  if (o.n_fft < 2) fail("stft: n_fft must be >= 2, got ", o.n_fft);
  if (o.hop < 1 || o.hop > o.n_fft) {
    fail("stft: hop must be in [1, n_fft=", o.n_fft, "], got ", o.hop);
  }
  if (!valid_window(o.window)) {
    fail("stft: window must be one of hann, sqrt_hann, hamming, blackman, rect, got enum value ",
         static_cast<int>(o.window));
  }
}

// The window-square sum an overlap-add of frames `hop` apart sees, once every output position
// is covered by all the frames it will ever get (periodic in hop). istft divides by the exact
// envelope instead; the two agree everywhere except the first and last n_fft samples.
std::vector<double> steady_window_square_sum(const std::vector<double>& w, std::int64_t hop) {
  std::vector<double> sum(static_cast<std::size_t>(hop), 0.0);
  for (std::size_t n = 0; n < w.size(); ++n) sum[n % static_cast<std::size_t>(hop)] += w[n] * w[n];
  return sum;
}

struct MelRange {
  double f_min, f_max;
};

MelRange check_mel(const Mel& o) {
  if (o.n_filters < 1) fail("mel: n_filters must be >= 1, got ", o.n_filters);
  if (o.n_fft < 2) fail("mel: n_fft must be >= 2, got ", o.n_fft);
  if (o.hop < 1 || o.hop > o.n_fft) {
    fail("mel: hop must be in [1, n_fft=", o.n_fft, "], got ", o.hop);
  }
  check_sample_rate("mel", o.sample_rate);
  const double nyquist = o.sample_rate / 2;
  if (!(std::isfinite(o.f_min) && o.f_min >= 0)) {
    fail("mel: f_min must be >= 0, got ", num(o.f_min));
  }
  if (!(std::isfinite(o.f_max) && o.f_max >= 0 && o.f_max <= nyquist)) {
    fail("mel: f_max must be in [0, sample_rate/2=", num(nyquist),
         "] (0 means sample_rate/2), got ", num(o.f_max));
  }
  const double top = o.f_max == 0 ? nyquist : o.f_max;
  if (o.f_min >= top) fail("mel: f_min must be < f_max=", num(top), ", got ", num(o.f_min));
  return {o.f_min, top};
}

// torch.linspace / numpy.linspace: both ends exact.
double linspace(double start, double stop, std::int64_t count, std::int64_t i) {
  if (count == 1) return start;
  if (i == count - 1) return stop;
  return start + (stop - start) * static_cast<double>(i) / static_cast<double>(count - 1);
}

double hz_to_mel(double hz) {
  return 2595.0 * std::log10(1.0 + hz / 700.0);
}
double mel_to_hz(double mel) {
  return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
}

double erb_rate(double hz) {
  return 21.4 * std::log10(1.0 + 0.00437 * hz);
}
double erb_rate_to_hz(double erb) {
  return (std::pow(10.0, erb / 21.4) - 1.0) / 0.00437;
}

double gammatone_f_max(const Gammatone& o) {
  return o.f_max == 0 ? 0.9 * o.sample_rate / 2 : o.f_max;
}

void check_gammatone(const Gammatone& o) {
  if (o.n_filters < 1) fail("gammatone: n_filters must be >= 1, got ", o.n_filters);
  if (o.kernel_size < 1) fail("gammatone: kernel_size must be >= 1, got ", o.kernel_size);
  if (o.stride < 1) fail("gammatone: stride must be >= 1, got ", o.stride);
  check_sample_rate("gammatone", o.sample_rate);
  const double nyquist = o.sample_rate / 2;
  // scipy.signal.gammatone rejects a centre frequency outside the open interval (0, fs/2).
  if (!(std::isfinite(o.f_min) && o.f_min > 0 && o.f_min < nyquist)) {
    fail("gammatone: f_min must be in (0, sample_rate/2=", num(nyquist),
         ") as scipy.signal.gammatone requires, got ", num(o.f_min));
  }
  if (!(std::isfinite(o.f_max) && o.f_max >= 0 && o.f_max < nyquist)) {
    fail("gammatone: f_max must be in (0, sample_rate/2=", num(nyquist),
         ") as scipy.signal.gammatone requires (0 means 0.9 * sample_rate/2), got ", num(o.f_max));
  }
  const double top = gammatone_f_max(o);
  if (o.f_min >= top) {
    fail("gammatone: f_min must be < f_max=", num(top), ", got ", num(o.f_min));
  }
}

void check_filters_on_cpu(const char* who, const char* name, const Tensor& t) {
  if (t.empty()) fail(who, ": ", name, " must not be empty, got shape ", t.shape_string());
  if (t.device() != Device::kCpu) {
    fail(who, ": ", name, " must be on the cpu, got ", convbank::to_string(t.device()));
  }
}

}  // namespace

Window parse_window(std::string_view text, std::string_view what) {
  for (Window w : {Window::kHann, Window::kSqrtHann, Window::kHamming, Window::kBlackman,
                   Window::kRectangular}) {
    if (text == to_string(w)) return w;
  }
  fail(what, ": must be one of hann, sqrt_hann, hamming, blackman, rect, got '", text, "'");
}

const char* to_string(Window window) {
  switch (window) {
    case Window::kHann:
      return "hann";
    case Window::kSqrtHann:
      return "sqrt_hann";
    case Window::kHamming:
      return "hamming";
    case Window::kBlackman:
      return "blackman";
    case Window::kRectangular:
      return "rect";
  }
  return "unknown";
}

std::vector<double> window(Window window, std::int64_t length) {
  if (length < 1) fail("window: length must be >= 1, got ", length);
  if (!valid_window(window)) fail("window: unknown window enum value ", static_cast<int>(window));
  // torch's *_window(1) is [1] whatever the window.
  if (length == 1) return {1.0};
  const UnitCircle circle(length);
  std::vector<double> w(static_cast<std::size_t>(length));
  for (std::int64_t n = 0; n < length; ++n) {
    const double c1 = circle.cos[static_cast<std::size_t>(n)];
    const double c2 = circle.cos[static_cast<std::size_t>((2 * n) % length)];
    double v = 1.0;
    switch (window) {
      case Window::kHann:
        v = 0.5 - 0.5 * c1;
        break;
      case Window::kSqrtHann:
        v = std::sqrt(0.5 - 0.5 * c1);
        break;
      case Window::kHamming:
        v = 0.54 - 0.46 * c1;
        break;
      case Window::kBlackman:
        // 0.42 - 0.5 + 0.08 leaves a -1e-17 residue at n = 0; the window is 0 there.
        v = n == 0 ? 0.0 : 0.42 - 0.5 * c1 + 0.08 * c2;
        break;
      case Window::kRectangular:
        v = 1.0;
        break;
    }
    w[static_cast<std::size_t>(n)] = v;
  }
  return w;
}

std::int64_t stft_padding(const Stft& options) {
  check_stft(options);
  return options.center ? options.n_fft / 2 : 0;
}

Tensor stft_analysis(const Stft& options) {
  check_stft(options);
  const std::int64_t n_fft = options.n_fft;
  const std::int64_t bins = n_fft / 2 + 1;
  const std::vector<double> w = window(options.window, n_fft);
  const UnitCircle circle(n_fft);
  std::vector<double> out(static_cast<std::size_t>(2 * bins * n_fft));
  // Conv1d correlates, so row k tap n multiplies x[t*hop + n]: exactly torch.stft's
  // sum_n w[n] x[t*hop + n] exp(-2*pi*i*k*n/n_fft), real part then imaginary part.
  for (std::int64_t k = 0; k < bins; ++k) {
    double* re = out.data() + k * n_fft;
    double* im = out.data() + (bins + k) * n_fft;
    for (std::int64_t n = 0; n < n_fft; ++n) {
      const auto m = static_cast<std::size_t>((k * n) % n_fft);
      re[n] = w[static_cast<std::size_t>(n)] * circle.cos[m];
      im[n] = -w[static_cast<std::size_t>(n)] * circle.sin[m];
    }
  }
  return to_tensor(out, 2 * bins, 1, n_fft);
}

Tensor stft_synthesis(const Stft& options) {
  check_stft(options);
  const std::int64_t n_fft = options.n_fft;
  const std::int64_t hop = options.hop;
  const std::int64_t bins = n_fft / 2 + 1;
  const std::vector<double> w = window(options.window, n_fft);
  const std::vector<double> envelope = steady_window_square_sum(w, hop);
  for (std::int64_t r = 0; r < hop; ++r) {
    // torch.istft's NOLA threshold: below it the division amplifies rounding without bound.
    if (envelope[static_cast<std::size_t>(r)] < 1e-11) {
      fail("stft: the ", to_string(options.window), " window's square summed over frames hop=", hop,
           " apart is ", num(envelope[static_cast<std::size_t>(r)]), " at phase ", r,
           " (n_fft=", n_fft,
           "); it must be >= 1e-11 everywhere (torch.istft's NOLA condition) for synthesis to "
           "invert analysis: use a smaller hop or a window without zeros");
    }
  }
  const UnitCircle circle(n_fft);
  std::vector<double> out(static_cast<std::size_t>(2 * bins * n_fft));
  // The inverse real DFT (irfft: every bin but DC and an even n_fft's Nyquist stands for its
  // mirror image too, hence weight 2; irfft ignores their imaginary parts, and so do we, their
  // sin rows being exact zeros), then the synthesis window w / envelope that makes the
  // overlap-add of w * w / envelope equal 1.
  for (std::int64_t k = 0; k < bins; ++k) {
    const double weight = (k == 0 || 2 * k == n_fft) ? 1.0 : 2.0;
    double* re = out.data() + k * n_fft;
    double* im = out.data() + (bins + k) * n_fft;
    for (std::int64_t n = 0; n < n_fft; ++n) {
      const auto m = static_cast<std::size_t>((k * n) % n_fft);
      const double scale = weight / static_cast<double>(n_fft) * w[static_cast<std::size_t>(n)] /
                           envelope[static_cast<std::size_t>(n % hop)];
      re[n] = scale * circle.cos[m];
      im[n] = -scale * circle.sin[m];
    }
  }
  return to_tensor(out, 2 * bins, 1, n_fft);
}

std::vector<double> mel_fbanks(const Mel& options) {
  const MelRange range = check_mel(options);
  const std::int64_t n_freqs = options.n_fft / 2 + 1;
  const std::int64_t n_mels = options.n_filters;
  // torchaudio spaces the bins from 0 to sample_rate // 2 (floor division), not at the DFT
  // frequencies k * sample_rate / n_fft: they differ for odd n_fft or an odd sample rate, and
  // the filters follow torchaudio, which is what a mel front end trained with it expects.
  const double top_bin = std::floor(options.sample_rate / 2);
  const double m_min = hz_to_mel(range.f_min);
  const double m_max = hz_to_mel(range.f_max);
  std::vector<double> f_pts(static_cast<std::size_t>(n_mels + 2));
  for (std::int64_t i = 0; i < n_mels + 2; ++i) {
    f_pts[static_cast<std::size_t>(i)] = mel_to_hz(linspace(m_min, m_max, n_mels + 2, i));
  }
  std::vector<double> fb(static_cast<std::size_t>(n_freqs * n_mels));
  for (std::int64_t k = 0; k < n_freqs; ++k) {
    const double f = linspace(0.0, top_bin, n_freqs, k);
    for (std::int64_t m = 0; m < n_mels; ++m) {
      const auto i = static_cast<std::size_t>(m);
      const double down = (f - f_pts[i]) / (f_pts[i + 1] - f_pts[i]);
      const double up = (f_pts[i + 2] - f) / (f_pts[i + 2] - f_pts[i + 1]);
      fb[static_cast<std::size_t>(k * n_mels + m)] = std::max(0.0, std::min(down, up));
    }
  }
  return fb;
}

Tensor mel_analysis(const Mel& options) {
  const std::vector<double> fb = mel_fbanks(options);
  const std::int64_t n_fft = options.n_fft;
  const std::int64_t n_freqs = n_fft / 2 + 1;
  const std::int64_t n_mels = options.n_filters;
  // The zero-phase filter with real response fb[:, m] (an inverse real DFT), delayed by n_fft/2
  // samples so it is causal and symmetric: the delay is a pure phase, the magnitude at every
  // bin stays exactly fb[k][m].
  const std::int64_t delay = n_fft / 2;
  const UnitCircle circle(n_fft);
  std::vector<double> out(static_cast<std::size_t>(n_mels * n_fft), 0.0);
  for (std::int64_t m = 0; m < n_mels; ++m) {
    double* h = out.data() + m * n_fft;
    for (std::int64_t k = 0; k < n_freqs; ++k) {
      const double gain = fb[static_cast<std::size_t>(k * n_mels + m)];
      if (gain == 0) continue;
      const double weight = (k == 0 || 2 * k == n_fft) ? 1.0 : 2.0;
      const double a = weight * gain / static_cast<double>(n_fft);
      for (std::int64_t n = 0; n < n_fft; ++n) {
        const std::int64_t phase = ((k * (n - delay)) % n_fft + n_fft) % n_fft;
        h[n] += a * circle.cos[static_cast<std::size_t>(phase)];
      }
    }
  }
  return to_tensor(out, n_mels, 1, n_fft);
}

Tensor param_sinc_analysis(const ParamSinc& o) {
  if (o.n_filters < 2 || o.n_filters % 2 != 0) {
    fail("param_sinc: n_filters must be even and >= 2 (half cosine, half sine filters), got ",
         o.n_filters);
  }
  if (o.kernel_size < 1) fail("param_sinc: kernel_size must be >= 1, got ", o.kernel_size);
  if (o.stride < 1) fail("param_sinc: stride must be >= 1, got ", o.stride);
  check_sample_rate("param_sinc", o.sample_rate);
  if (!(std::isfinite(o.min_low_hz) && o.min_low_hz >= 0)) {
    fail("param_sinc: min_low_hz must be >= 0, got ", num(o.min_low_hz));
  }
  if (!(std::isfinite(o.min_band_hz) && o.min_band_hz > 0)) {
    fail("param_sinc: min_band_hz must be > 0, got ", num(o.min_band_hz));
  }
  // asteroid spaces the initial cut-offs on the mel scale from 30 Hz up to this frequency.
  constexpr double kLowHz = 30;
  const double high_hz = o.sample_rate / 2 - (o.min_low_hz + o.min_band_hz);
  if (!(high_hz > kLowHz)) {
    fail("param_sinc: min_low_hz + min_band_hz must be < sample_rate/2 - 30 = ",
         num(o.sample_rate / 2 - kLowHz), " (the initial cut-offs span 30 Hz to sample_rate/2 - ",
         "min_low_hz - min_band_hz), got ", num(o.min_low_hz + o.min_band_hz));
  }

  // asteroid makes filters odd so they have a centre tap.
  const std::int64_t kernel = o.kernel_size % 2 == 0 ? o.kernel_size + 1 : o.kernel_size;
  const std::int64_t half = kernel / 2;
  const std::int64_t bands = o.n_filters / 2;

  std::vector<double> hz(static_cast<std::size_t>(bands + 1));
  for (std::int64_t i = 0; i <= bands; ++i) {
    hz[static_cast<std::size_t>(i)] =
        mel_to_hz(linspace(hz_to_mel(kLowHz), hz_to_mel(high_hz), bands + 1, i));
  }
  // np.hamming(kernel)[:half]: the symmetric Hamming window's left half.
  std::vector<double> win(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    win[static_cast<std::size_t>(i)] =
        0.54 - 0.46 * std::cos(2 * kPi * static_cast<double>(i) / static_cast<double>(kernel - 1));
  }

  std::vector<double> out(static_cast<std::size_t>(o.n_filters * kernel));
  for (std::int64_t b = 0; b < bands; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const double low = o.min_low_hz + std::abs(hz[i]);
    const double high = std::clamp(low + o.min_band_hz + std::abs(hz[i + 1] - hz[i]), o.min_low_hz,
                                   o.sample_rate / 2);
    const double band = high - low;
    double* cos_f = out.data() + b * kernel;
    double* sin_f = out.data() + (bands + b) * kernel;
    for (std::int64_t j = 0; j < half; ++j) {
      // Negative times: the left half; the right half mirrors it (even for the cosine filter,
      // odd for the sine filter).
      const double t = 2 * kPi * static_cast<double>(j - half) / o.sample_rate;
      const double w = win[static_cast<std::size_t>(j)];
      const double c = (std::sin(high * t) - std::sin(low * t)) / (t / 2) * w / (2 * band);
      const double s = (std::cos(low * t) - std::cos(high * t)) / (t / 2) * w / (2 * band);
      cos_f[j] = c;
      cos_f[kernel - 1 - j] = c;
      sin_f[j] = s;
      sin_f[kernel - 1 - j] = -s;
    }
    cos_f[half] = 1.0;  // 2 * band / (2 * band)
    sin_f[half] = 0.0;
  }
  return to_tensor(out, o.n_filters, 1, kernel);
}

std::vector<double> gammatone_center_frequencies(const Gammatone& options) {
  check_gammatone(options);
  const double e_min = erb_rate(options.f_min);
  const double e_max = erb_rate(gammatone_f_max(options));
  std::vector<double> centres(static_cast<std::size_t>(options.n_filters));
  for (std::int64_t i = 0; i < options.n_filters; ++i) {
    centres[static_cast<std::size_t>(i)] =
        erb_rate_to_hz(linspace(e_min, e_max, options.n_filters, i));
  }
  return centres;
}

Tensor gammatone_analysis(const Gammatone& options) {
  const std::vector<double> centres = gammatone_center_frequencies(options);
  const double fs = options.sample_rate;
  const std::int64_t taps = options.kernel_size;
  std::vector<double> out(static_cast<std::size_t>(options.n_filters * taps));
  for (std::size_t i = 0; i < centres.size(); ++i) {
    const double f = centres[i];
    // scipy.signal.gammatone, order 4: bandwidth 1.019 ERB (Glasberg & Moore's ERB with
    // EarQ 9.26449, minBW 24.7), gain normalised to 1 at the centre frequency.
    const double bw = 1.019 * (f / 9.26449 + 24.7);
    const double scale = 2 * std::pow(2 * kPi * bw, 4) / 6.0 / fs;
    double* b = out.data() + static_cast<std::int64_t>(i) * taps;
    for (std::int64_t n = 0; n < taps; ++n) {
      const double t = static_cast<double>(n) / fs;
      b[n] = t * t * t * std::exp(-2 * kPi * bw * t) * std::cos(2 * kPi * f * t) * scale;
    }
  }
  return to_tensor(out, options.n_filters, 1, taps);
}

Tensor analytic_pair(const Tensor& filters) {
  check_filters_on_cpu("analytic_pair", "filters", filters);
  const Shape shape = filters.shape();
  const std::int64_t k = shape.frames;
  const std::int64_t rows = shape.batch * shape.channels;
  // The Hilbert transform is a circular convolution with the inverse DFT of -i*sign(freq)
  // (zero at DC and Nyquist): h[d] = (2/K) * sum over positive bins j of sin(2*pi*j*d/K).
  const UnitCircle circle(k);
  std::vector<double> h(static_cast<std::size_t>(k), 0.0);
  for (std::int64_t d = 0; d < k; ++d) {
    for (std::int64_t j = 1; 2 * j < k; ++j) {
      h[static_cast<std::size_t>(d)] += circle.sin[static_cast<std::size_t>((j * d) % k)];
    }
    h[static_cast<std::size_t>(d)] *= 2.0 / static_cast<double>(k);
  }
  Tensor out(Shape{2 * shape.batch, shape.channels, k});
  std::copy(filters.data(), filters.data() + filters.numel(), out.data());
  std::vector<double> x(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = filters.data() + r * k;
    std::copy(in, in + k, x.begin());
    float* dst = out.data() + filters.numel() + r * k;
    for (std::int64_t n = 0; n < k; ++n) {
      double acc = 0;
      for (std::int64_t m = 0; m < k; ++m) {
        acc += h[static_cast<std::size_t>((n - m + k) % k)] * x[static_cast<std::size_t>(m)];
      }
      dst[n] = static_cast<float>(acc);
    }
  }
  return out;
}

Tensor pinv_synthesis(const Tensor& analysis, std::int64_t stride) {
  check_filters_on_cpu("pinv_synthesis", "analysis", analysis);
  const Shape shape = analysis.shape();
  if (analysis.rank() != 3 || shape.channels != 1) {
    fail("pinv_synthesis: analysis must have shape (n_filters, 1, kernel_size), got ",
         analysis.shape_string());
  }
  const std::int64_t rows = shape.batch;
  const std::int64_t k = shape.frames;
  if (stride < 1 || stride > k) {
    fail("pinv_synthesis: stride must be in [1, kernel_size=", k, "], got ", stride);
  }
  std::vector<double> a(analysis.data(), analysis.data() + analysis.numel());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) {
      fail("pinv_synthesis: analysis must be finite, got ", num(a[i]), " at filter ",
           static_cast<std::int64_t>(i) / k, " tap ", static_cast<std::int64_t>(i) % k);
    }
  }
  // pinv is (K x n_filters); its transpose puts filter f's synthesis kernel in row f, the
  // ConvTranspose1d layout. Each output sample is rebuilt by K / stride overlapping frames.
  const std::vector<double> p = cpu::pinv(a, rows, k);
  const double scale = static_cast<double>(stride) / static_cast<double>(k);
  std::vector<double> out(static_cast<std::size_t>(rows * k));
  for (std::int64_t f = 0; f < rows; ++f) {
    for (std::int64_t n = 0; n < k; ++n) {
      out[static_cast<std::size_t>(f * k + n)] = p[static_cast<std::size_t>(n * rows + f)] * scale;
    }
  }
  return to_tensor(out, rows, 1, k);
}

}  // namespace convbank::presets
