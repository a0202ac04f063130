// Computed filter-bank weights: STFT, mel, SincNet band-pass, gammatone, analytic pairs, and
// the pseudo-inverse synthesis bank of any analysis bank.
//
//   convbank::presets::Stft stft{.n_fft = 512, .hop = 128};
//   convbank::Tensor a = convbank::presets::stft_analysis(stft);   // (514, 1, 512)
//   convbank::Tensor s = convbank::presets::stft_synthesis(stft);  // (514, 1, 512)
//
// Every function returns weights in PyTorch's layouts, ready for Conv1d::set_weight (analysis,
// (n_filters, 1, kernel_size)) or ConvTranspose1d::set_weight (synthesis, (n_filters, 1,
// kernel_size)). Each is checked against an independent implementation (torch.stft/istft,
// torchaudio's melscale_fbanks, scipy.signal.gammatone, the SincNet / asteroid-filterbanks
// formulas): tests/test_presets.cpp. Invalid options throw Error naming the option, the value
// and the rule.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "convbank/tensor.hpp"

namespace convbank::presets {

enum class Window { kHann, kSqrtHann, kHamming, kBlackman, kRectangular };

// "hann" | "sqrt_hann" | "hamming" | "blackman" | "rect"; throws Error naming `what` otherwise.
Window parse_window(std::string_view text, std::string_view what = "window");
const char* to_string(Window window);
// The periodic window of `length` samples (torch.hann_window(length) etc., periodic=True).
std::vector<double> window(Window window, std::int64_t length);

// Short-time Fourier transform. Analysis filters: n_fft/2+1 real parts (rows 0..n_fft/2) then
// n_fft/2+1 imaginary parts, windowed: Conv1d with stride hop and padding n_fft/2 when center
// equals torch.stft(x, n_fft, hop, window=window, center=center, pad_mode="constant",
// return_complex=True) (real rows = .real, imaginary rows = .imag). Requires n_fft >= 2, 1 <=
// hop <= n_fft.
struct Stft {
  std::int64_t n_fft = 512;
  std::int64_t hop = 128;
  Window window = Window::kHann;
  bool center = true;
};
std::int64_t stft_padding(const Stft& options);  // n_fft/2 when center, else 0
Tensor stft_analysis(const Stft& options);       // (2 * (n_fft/2 + 1), 1, n_fft)
// Inverse DFT rows times the window, divided by the steady-state window-square sum (periodic in
// hop), so that analysis -> synthesis (ConvTranspose1d, same stride and padding) reconstructs the
// input away from the edges, as torch.istft does (istft divides by the exact envelope, so the
// two differ within n_fft of either end). Throws Error when the window-square sum is < 1e-11
// somewhere (torch.istft's NOLA rule), e.g. hann, sqrt_hann or blackman with hop == n_fft.
Tensor stft_synthesis(const Stft& options);

// Mel-spaced band-pass filters: filter m is the linear-phase FIR of n_fft taps whose magnitude
// response at the n_fft/2+1 DFT bins equals column m of torchaudio.functional.melscale_fbanks(
// n_fft/2+1, f_min, f_max, n_filters, sample_rate, norm=None, mel_scale="htk"); its centre tap
// is n_fft/2 (zero-phase response delayed by n_fft/2). torchaudio places the bins at
// linspace(0, sample_rate // 2, n_fft/2+1), the true DFT frequencies only for even n_fft and an
// even sample rate; the filters follow torchaudio. f_max = 0 means sample_rate / 2. Requires
// n_filters >= 1, n_fft >= 2, 1 <= hop <= n_fft, sample_rate > 0, 0 <= f_min < f_max <=
// sample_rate / 2.
struct Mel {
  std::int64_t n_filters = 40;
  std::int64_t n_fft = 512;
  std::int64_t hop = 128;
  double sample_rate = 16000;
  double f_min = 0;
  double f_max = 0;
};
Tensor mel_analysis(const Mel& options);  // (n_filters, 1, n_fft)
// The magnitude responses the filters are built from, (n_fft/2+1) x n_filters, row-major.
std::vector<double> mel_fbanks(const Mel& options);

// SincNet band-pass filters (Ravanelli & Bengio 2018) as asteroid-filterbanks' ParamSincFB
// initializes them: n_filters/2 cosine (band-pass) filters then n_filters/2 sine (their
// quadrature) filters, mel-spaced cut-offs, Hamming window. n_filters must be even; an even
// kernel_size is increased by one, as asteroid does (use the returned tensor's size). Requires
// kernel_size, stride >= 1, sample_rate > 0, min_low_hz >= 0, min_band_hz > 0 and
// min_low_hz + min_band_hz < sample_rate/2 - 30 (asteroid's initial cut-offs start at 30 Hz).
struct ParamSinc {
  std::int64_t n_filters = 64;
  std::int64_t kernel_size = 251;
  std::int64_t stride = 80;
  double sample_rate = 16000;
  double min_low_hz = 50;
  double min_band_hz = 50;
};
Tensor param_sinc_analysis(const ParamSinc& options);  // (n_filters, 1, kernel_size | 1)

// 4th-order gammatone FIR filters with centre frequencies equally spaced on the ERB-rate scale
// (Glasberg & Moore) from f_min to f_max; filter i is scipy.signal.gammatone(f_i, "fir",
// numtaps=kernel_size, fs=sample_rate)'s numerator. f_max = 0 means 0.9 * sample_rate / 2.
// Requires 0 < f_min < f_max < sample_rate / 2 (scipy rejects centres outside (0, fs/2)),
// n_filters, kernel_size, stride >= 1, sample_rate > 0.
struct Gammatone {
  std::int64_t n_filters = 32;
  std::int64_t kernel_size = 512;
  std::int64_t stride = 128;
  double sample_rate = 16000;
  double f_min = 50;
  double f_max = 0;
};
std::vector<double> gammatone_center_frequencies(const Gammatone& options);
Tensor gammatone_analysis(const Gammatone& options);  // (n_filters, 1, kernel_size)

// The filters, then their Hilbert transforms: (N, C, K) -> (2N, C, K) with rows
// [filters; hilbert(filters)], an analytic pair as in asteroid-filterbanks' AnalyticFreeFB.
// The Hilbert transform is circular over the K taps, scipy.signal.hilbert(filters).imag: the
// K-point DFT times -i for positive frequencies and +i for negative ones, DC and (even K)
// Nyquist zeroed. (AnalyticFreeFB zero-pads to 2K first, which differs by the wrap-around.)
// Requires a non-empty CPU tensor.
Tensor analytic_pair(const Tensor& filters);

// The synthesis bank that inverts `analysis` (n_filters, 1, K) by least squares: the
// pseudo-inverse of the (n_filters x K) analysis matrix, transposed, times stride / K, as
// asteroid-filterbanks' pinv decoder scales it to compensate the overlap-add. Reconstructs
// exactly when the analysis matrix has full column rank and stride divides K (a window with
// a zero tap, e.g. a periodic Hann STFT, is rank-deficient). Returned in ConvTranspose1d layout
// (n_filters, 1, K). Computed in float64 through an SVD, singular values <= 1e-15 * the largest
// treated as 0 (numpy.linalg.pinv's rule). Requires a finite CPU tensor (N, 1, K), 1 <= stride
// <= K.
Tensor pinv_synthesis(const Tensor& analysis, std::int64_t stride);

}  // namespace convbank::presets
