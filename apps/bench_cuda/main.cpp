// convbank-bench-cuda: times convbank's CUDA Conv1d / ConvTranspose1d against cuDNN on the GPU
// workloads of workloads.md, in the same run, on the same buffers.
//
//   convbank-bench-cuda                              # all workloads
//   convbank-bench-cuda --workload seedB --runs 50
//   convbank-bench-cuda --op conv1d --shape 32,64,128,131072,3,1,0,1,1 --json out.json
//
// Per problem: our median time (CUDA events, warm-up, >= 20 timed runs, inputs rotated among
// enough buffers to exceed the L2), GFLOP/s, GB/s, percent of the memory and FFMA floors, the
// kernel the dispatcher chose; cuDNN fp32 (CUDNN_FMA_MATH, best algorithm by
// cudnnFind*AlgorithmEx with workspace): time, ratio cuDNN/ours, max difference vs ours; the
// relative L2 of ours and of cuDNN against a float64 host reference on a slice; and cuDNN TF32
// (tensor-op math) time, marked not fp32-accurate. Each timed call runs alone on an idle stream;
// with --call-times a second table gives, for ours and cuDNN fp32, the median host time of a call
// and the time per call of calls queued back to back (the host's work hidden; the JSON always has
// them).
#include <cuda_runtime.h>
#ifdef CONVBANK_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/runtime.hpp"
#include "convbank/tensor.hpp"
#include "core/workloads.hpp"
#include "cuda/dispatch.hpp"

namespace {

using convbank::Device;
using convbank::Shape;
using convbank::Tensor;

constexpr double kCopyBandwidth = 4.3e12;  // H200 device copy, read + write (workloads.md)
constexpr double kFfmaPeak = 67e12;        // H200 fp32 FFMA datasheet
constexpr double kL2Bytes = 60e6;

#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    const cudaError_t status_ = (call);                                                  \
    if (status_ != cudaSuccess) {                                                        \
      throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(status_)); \
    }                                                                                    \
  } while (0)

#ifdef CONVBANK_HAVE_CUDNN
#define CUDNN_CHECK(call)                                                                 \
  do {                                                                                    \
    const cudnnStatus_t status_ = (call);                                                 \
    if (status_ != CUDNN_STATUS_SUCCESS) {                                                \
      throw std::runtime_error(std::string(#call) + ": " + cudnnGetErrorString(status_)); \
    }                                                                                     \
  } while (0)
#endif

using Problem = convbank::detail::Workload;
using convbank::detail::kWorkloads;

// Shapes outside workloads.md (dilated, strided, grouped, wider kernels, transposed variants),
// reported without tuning for them: a kernel that only wins on the listed shapes is not the
// goal. `--workload offlist` runs them all.
const Problem kOffList[] = {
    {"x_dilated", false, 16, 128, 128, 32768, 3, 1, 4, 4, 1},
    {"x_strided", false, 16, 128, 256, 32768, 4, 2, 1, 1, 1},
    {"x_grouped", false, 16, 256, 256, 16384, 5, 1, 2, 1, 8},
    {"x_k7", false, 8, 256, 256, 32768, 7, 1, 3, 1, 1},
    {"x_up4x", true, 8, 128, 64, 32768, 8, 4, 2, 1, 1},
    {"x_dilated_t", true, 16, 128, 128, 32768, 3, 1, 2, 2, 1},
    {"x_grouped_t", true, 16, 256, 256, 16384, 4, 2, 1, 1, 4},
    {"x_dec4", true, 16, 512, 4, 16383, 16, 8, 0, 1, 1},
    {"x_dec_pow2", true, 16, 512, 1, 16384, 16, 8, 0, 1, 1},
    // Rows of odd length, as after a TasNet encoder: 16383 frames.
    {"x_pw_odd", false, 16, 512, 128, 16383, 1, 1, 0, 1, 1},
    {"x_k3_odd", false, 16, 128, 128, 32767, 3, 1, 1, 1, 1},
    // A WaveNet-like dilation, far above a tile's frames.
    {"x_dil256", false, 16, 128, 128, 32768, 3, 1, 256, 256, 1},
};

std::int64_t out_frames(const Problem& p) {
  if (p.transposed) {
    return (p.frames - 1) * p.stride - 2 * p.padding + p.dilation * (p.k - 1) + 1;
  }
  return (p.frames + 2 * p.padding - p.dilation * (p.k - 1) - 1) / p.stride + 1;
}

// A problem's padding mode: Problem::mode, set by --padding-mode for the --shape Conv1d problems
// (the workloads pad with zeros). cuDNN has zeros padding only: for other modes it times the
// same layer with zeros padding, which PyTorch runs after an F.pad copy of the input.
convbank::PaddingMode mode_of(const Problem& p) {
  return p.transposed ? convbank::PaddingMode::kZeros : p.mode;
}

std::string shape_string(const Problem& p) {
  std::ostringstream s;
  s << p.n << "," << p.cin << "->" << p.cout << "," << p.frames << ",K" << p.k << ",s" << p.stride
    << ",p" << p.padding << ",d" << p.dilation << ",g" << p.groups;
  if (mode_of(p) != convbank::PaddingMode::kZeros) s << "," << convbank::to_string(mode_of(p));
  return s.str();
}

// The input frame Conv1d's padding mode presents at position i of a row of n (-1: a zero).
std::int64_t padded_index(std::int64_t i, std::int64_t n, convbank::PaddingMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case convbank::PaddingMode::kReflect:
      return i < 0 ? -i : 2 * (n - 1) - i;
    case convbank::PaddingMode::kReplicate:
      return i < 0 ? 0 : n - 1;
    case convbank::PaddingMode::kCircular:
      return i < 0 ? i + n : i - n;
    case convbank::PaddingMode::kZeros:
      break;
  }
  return -1;
}

void fill_hash(float* p, std::int64_t n, std::uint64_t seed, float scale = 1.0f) {
  const int threads =
      std::max(1, std::min(16, static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
      for (std::int64_t i = lo; i < hi; ++i) {
        std::uint64_t z =
            (static_cast<std::uint64_t>(i) + seed * 0x9E3779B97F4A7C15ULL) * 0xBF58476D1CE4E5B9ULL;
        z ^= z >> 31;
        z *= 0x94D049BB133111EBULL;
        z ^= z >> 29;
        p[i] = scale * static_cast<float>(static_cast<double>(z >> 40) * (2.0 / 16777216.0) - 1.0);
      }
    });
  }
  for (auto& th : pool) th.join();
}

double ref_at(const Problem& w, const float* x, const float* wt, std::int64_t b, std::int64_t co,
              std::int64_t t) {
  const std::int64_t cg = w.cin / w.groups, og = w.cout / w.groups, g = co / og;
  const convbank::PaddingMode mode = mode_of(w);
  double acc = 0.0;
  for (std::int64_t c = 0; c < cg; ++c) {
    const std::int64_t ci = g * cg + c;
    const float* row = x + (b * w.cin + ci) * w.frames;
    for (std::int64_t k = 0; k < w.k; ++k) {
      if (!w.transposed) {
        const std::int64_t i =
            padded_index(t * w.stride + k * w.dilation - w.padding, w.frames, mode);
        if (i >= 0 && i < w.frames)
          acc += static_cast<double>(wt[(co * cg + c) * w.k + k]) * row[i];
      } else {
        const std::int64_t num = t + w.padding - k * w.dilation;
        if (num < 0 || num % w.stride != 0) continue;
        const std::int64_t j = num / w.stride;
        if (j < w.frames) acc += static_cast<double>(wt[(ci * og + co % og) * w.k + k]) * row[j];
      }
    }
  }
  return acc;
}

// Relative L2 over a slice: batches {0, N-1}, channels {0, C/2, C-1}, frames at both ends and
// in the middle. `y` is the full host copy of an output.
struct Slice {
  std::vector<std::int64_t> b, c;
  std::vector<std::pair<std::int64_t, std::int64_t>> t;
  std::vector<double> ref;  // in loop order
};

Slice make_slice(const Problem& w, std::int64_t T, const float* x, const float* wt) {
  Slice s;
  std::set<std::int64_t> bs = {0, w.n - 1}, cs = {0, w.cout / 2, w.cout - 1};
  s.b.assign(bs.begin(), bs.end());
  s.c.assign(cs.begin(), cs.end());
  s.t = {{0, std::min<std::int64_t>(T, 256)},
         {std::max<std::int64_t>(0, T / 2 - 64), std::min<std::int64_t>(T, T / 2 + 64)},
         {std::max<std::int64_t>(0, T - 256), T}};
  for (auto b : s.b)
    for (auto c : s.c)
      for (auto [t0, t1] : s.t)
        for (std::int64_t t = t0; t < t1; ++t) s.ref.push_back(ref_at(w, x, wt, b, c, t));
  return s;
}

double slice_l2(const Slice& s, const std::vector<float>& y, std::int64_t C, std::int64_t T) {
  double num = 0, den = 0;
  std::size_t i = 0;
  for (auto b : s.b)
    for (auto c : s.c)
      for (auto [t0, t1] : s.t)
        for (std::int64_t t = t0; t < t1; ++t, ++i) {
          const double d =
              static_cast<double>(y[static_cast<std::size_t>((b * C + c) * T + t)]) - s.ref[i];
          num += d * d;
          den += s.ref[i] * s.ref[i];
        }
  return std::sqrt(num / den);
}

// A call's time: the median of `runs` calls timed each alone on an idle stream (the figure
// reported: it takes in the host's work before the kernels start), the median host time of
// those calls, and the time per call of `runs` calls queued back to back (the host's work hidden
// behind the previous call's kernels).
struct Timing {
  double ms = 0, host_us = 0, queued_ms = 0;
};

struct Result {
  Problem p;
  std::string kernel;
  double gflop = 0, bytes = 0;
  Timing ours_t, cudnn_t, tf32_t;
  double ours_l2 = 0;
  bool ours_all_written = true;
  bool have_cudnn = false;
  bool cudnn_zeros_only = false;  // cuDNN ran the layer with zeros padding: no output comparison
  std::string cudnn_algo, cudnn_tf32_algo;
  double cudnn_l2 = 0, max_rel_diff = 0;
  double tf32_l2 = 0;
  std::string note;
};

template <class F>
Timing time_calls(F&& launch, int runs, cudaStream_t stream) {
  for (int i = 0; i < 3; ++i) launch(i);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> times;
  std::vector<double> host;
  for (int i = 0; i < runs; ++i) {
    CUDA_CHECK(cudaEventRecord(a, stream));
    const auto t0 = std::chrono::steady_clock::now();
    launch(i + 3);
    host.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  Timing t;
  CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < runs; ++i) launch(i + 3);
  CUDA_CHECK(cudaEventRecord(b, stream));
  CUDA_CHECK(cudaEventSynchronize(b));
  float queued = 0;
  CUDA_CHECK(cudaEventElapsedTime(&queued, a, b));
  t.queued_ms = queued / runs;
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(times.begin(), times.end());
  std::sort(host.begin(), host.end());
  t.ms = times[times.size() / 2];
  t.host_us = host[host.size() / 2];
  return t;
}

std::vector<float> to_host(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  CUDA_CHECK(cudaMemcpy(v.data(), t.data(), v.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

Result run_problem(const Problem& p, int runs, bool use_cudnn) {
  Result r;
  r.p = p;
  const std::int64_t T = out_frames(p);
  const Shape in{p.n, p.cin, p.frames}, out{p.n, p.cout, T};
  const Shape ws =
      p.transposed ? Shape{p.cin, p.cout / p.groups, p.k} : Shape{p.cout, p.cin / p.groups, p.k};
  const double macs = p.transposed ? double(p.n) * p.cin * p.frames * (p.cout / p.groups) * p.k
                                   : double(p.n) * p.cout * T * (p.cin / p.groups) * p.k;
  r.gflop = 2.0 * macs / 1e9;
  r.bytes = 4.0 * (double(in.numel()) + double(out.numel()) + double(ws.numel()));

  Tensor xh(in), wh(ws);
  fill_hash(xh.data(), xh.numel(), 11);
  fill_hash(wh.data(), wh.numel(), 12, 1.0f / std::sqrt(float(ws.channels * p.k)));
  // Rotate inputs so that consecutive runs never find their input in the 60 MB L2.
  const double in_bytes = 4.0 * double(in.numel());
  const int buffers = std::clamp(static_cast<int>(std::ceil(3.0 * kL2Bytes / in_bytes)), 2, 32);
  std::vector<Tensor> xs;
  for (int i = 0; i < buffers; ++i) xs.push_back(xh.to(Device::kCuda));
  Tensor y(out, Device::kCuda);

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  std::function<void(int)> ours;
  convbank::Conv1d conv({.in_channels = p.cin,
                         .out_channels = p.cout,
                         .kernel_size = p.k,
                         .stride = p.transposed ? 1 : p.stride,
                         .padding = p.transposed ? 0 : p.padding,
                         .dilation = p.transposed ? 1 : p.dilation,
                         .groups = p.transposed ? 1 : p.groups,
                         .bias = false,
                         .padding_mode = mode_of(p)});
  convbank::ConvTranspose1d convt({.in_channels = p.cin,
                                   .out_channels = p.cout,
                                   .kernel_size = p.k,
                                   .stride = p.stride,
                                   .padding = p.padding,
                                   .groups = p.groups,
                                   .bias = false,
                                   .dilation = p.dilation});
  if (p.transposed) {
    convt.set_weight(wh.view());
    convbank::detail::ConvTranspose1dParams q{
        p.n, p.cin, p.cout, p.k, p.stride, p.dilation, p.groups, p.padding, 0, p.frames, T};
    r.kernel = convbank::detail::cuda::conv_transpose1d_kernel_name(q);
    ours = [&](int i) { convt.forward(xs[i % buffers].view(), y.view(), stream); };
  } else {
    conv.set_weight(wh.view());
    convbank::detail::Conv1dParams q{p.n,       p.cin,      p.cout,   p.k,
                                     p.stride,  p.dilation, p.groups, p.padding,
                                     p.padding, mode_of(p), p.frames, T};
    r.kernel = convbank::detail::cuda::conv1d_kernel_name(q);
    ours = [&](int i) { conv.forward(xs[i % buffers].view(), y.view(), stream); };
  }
  const Slice slice = make_slice(p, T, xh.data(), wh.data());

  // Accuracy of ours: poisoned output, one run on buffer 0.
  CUDA_CHECK(cudaMemset(y.data(), 0xFF, 4 * std::size_t(out.numel())));
  ours(0);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> yo = to_host(y);
  for (float v : yo) {
    if (!std::isfinite(v)) {
      r.ours_all_written = false;
      break;
    }
  }
  r.ours_l2 = slice_l2(slice, yo, p.cout, T);
  r.ours_t = time_calls(ours, runs, stream);

#ifdef CONVBANK_HAVE_CUDNN
  if (use_cudnn) {
    r.have_cudnn = true;
    r.cudnn_zeros_only = mode_of(p) != convbank::PaddingMode::kZeros;
    cudnnHandle_t h;
    CUDNN_CHECK(cudnnCreate(&h));
    CUDNN_CHECK(cudnnSetStream(h, stream));
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&yd));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&wd));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
    // 1-D as 2-D NCHW with H = 1. For the transpose, cuDNN's backward-data of the forward
    // convolution out -> in is exactly ConvTranspose1d; its filter (in, out/groups, 1, K) is
    // PyTorch's transpose layout.
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(p.n),
                                           int(p.cin), 1, int(p.frames)));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(p.n),
                                           int(p.cout), 1, int(T)));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(ws.batch),
                                           int(ws.channels), 1, int(p.k)));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd, 0, int(p.padding), 1, int(p.stride), 1,
                                                int(p.dilation), CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(cd, int(p.groups)));
    Tensor wdv = wh.to(Device::kCuda);
    Tensor y2(out, Device::kCuda);
    std::size_t ws_bytes = std::size_t(4) << 30;
    void* workspace = nullptr;
    while (cudaMalloc(&workspace, ws_bytes) != cudaSuccess && ws_bytes > (64u << 20)) {
      cudaGetLastError();
      ws_bytes /= 2;
    }
    const float one = 1.0f, zero = 0.0f;
    auto find_and_time = [&](cudnnMathType_t math, Timing& timing, double& l2, std::string& algo,
                             std::vector<float>* keep) {
      CUDNN_CHECK(cudnnSetConvolutionMathType(cd, math));
      std::function<void(int)> run;
      if (!p.transposed) {
        cudnnConvolutionFwdAlgoPerf_t perf[16];
        int count = 0;
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, xd, xs[0].data(), wd, wdv.data(), cd,
                                                           yd, y2.data(), 16, &count, perf,
                                                           workspace, ws_bytes));
        int best = -1;
        for (int i = 0; i < count && best < 0; ++i) {
          if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_bytes &&
              (math != CUDNN_FMA_MATH || perf[i].mathType == CUDNN_FMA_MATH)) {
            best = i;
          }
        }
        if (best < 0) throw std::runtime_error("cuDNN found no forward algorithm");
        const cudnnConvolutionFwdAlgo_t a = perf[best].algo;
        const cudnnMathType_t mt = perf[best].mathType;
        algo = "fwd_algo_" + std::to_string(int(a)) + (mt == CUDNN_FMA_MATH ? "_fma" : "_tensorop");
        run = [&, a](int i) {
          CUDNN_CHECK(cudnnConvolutionForward(h, &one, xd, xs[i % buffers].data(), wd, wdv.data(),
                                              cd, a, workspace, ws_bytes, &zero, yd, y2.data()));
        };
      } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[16];
        int count = 0;
        // dy = our input (N, Cin, 1, L), dx = our output (N, Cout, 1, T).
        CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, wdv.data(), xd, xs[0].data(),
                                                                cd, yd, y2.data(), 16, &count, perf,
                                                                workspace, ws_bytes));
        int best = -1;
        for (int i = 0; i < count && best < 0; ++i) {
          if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_bytes &&
              (math != CUDNN_FMA_MATH || perf[i].mathType == CUDNN_FMA_MATH)) {
            best = i;
          }
        }
        if (best < 0) throw std::runtime_error("cuDNN found no backward-data algorithm");
        const cudnnConvolutionBwdDataAlgo_t a = perf[best].algo;
        const cudnnMathType_t mt = perf[best].mathType;
        algo = "bwd_data_algo_" + std::to_string(int(a)) +
               (mt == CUDNN_FMA_MATH ? "_fma" : "_tensorop");
        run = [&, a](int i) {
          CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, wd, wdv.data(), xd,
                                                   xs[i % buffers].data(), cd, a, workspace,
                                                   ws_bytes, &zero, yd, y2.data()));
        };
      }
      CUDA_CHECK(cudaMemset(y2.data(), 0xFF, 4 * std::size_t(out.numel())));
      run(0);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<float> yc = to_host(y2);
      l2 = slice_l2(slice, yc, p.cout, T);
      timing = time_calls(run, runs, stream);
      if (keep != nullptr) *keep = std::move(yc);
    };
    // cuDNN's TF32 switch: keep the fp32 measurement honest even if NVIDIA_TF32_OVERRIDE is set.
    std::vector<float> yc;
    find_and_time(CUDNN_FMA_MATH, r.cudnn_t, r.cudnn_l2, r.cudnn_algo, &yc);
    double max_diff = 0, max_ref = 0;
    for (std::size_t i = 0; i < yc.size(); ++i) {
      max_diff = std::max(max_diff, double(std::fabs(yo[i] - yc[i])));
      max_ref = std::max(max_ref, double(std::fabs(yc[i])));
    }
    r.max_rel_diff = max_diff / max_ref;
    find_and_time(CUDNN_TENSOR_OP_MATH, r.tf32_t, r.tf32_l2, r.cudnn_tf32_algo, nullptr);
    CUDA_CHECK(cudaFree(workspace));
    cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroy(h);
  }
#else
  (void)use_cudnn;
#endif
  CUDA_CHECK(cudaStreamDestroy(stream));
  return r;
}

std::string fmt(double v, int prec = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}
std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::vector<std::int64_t> parse_shape(const std::string& s) {
  std::vector<std::int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  if (v.size() != 9) {
    throw std::runtime_error("--shape wants N,Cin,Cout,L,K,stride,padding,dilation,groups, got '" +
                             s + "'");
  }
  return v;
}

void usage() {
  std::printf(
      "usage: convbank-bench-cuda [--workload NAME]... [--op conv1d|conv-transpose1d --shape "
      "N,Cin,Cout,L,K,stride,padding,dilation,groups [--padding-mode "
      "zeros|reflect|replicate|circular]] [--runs N] [--no-cudnn] [--call-times] [--json FILE]\n"
      "--call-times: a second table, the host time per call and the time per call of calls "
      "queued back to back (also in the JSON, always)\n"
      "workloads: seedA seedB enc_tasnet dec_tasnet enc_stft512 dec_stft512 tcn_depthwise "
      "tcn_pointwise up2x (all), and off-list shapes x_dilated x_strided x_grouped x_k7 x_up4x "
      "x_dilated_t x_grouped_t x_dec4 x_dec_pow2 x_pw_odd x_k3_odd x_dil256 (offlist)\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<Problem> problems;
    convbank::PaddingMode padding_mode = convbank::PaddingMode::kZeros;  // of --shape Conv1d
    std::string json_path, op;
    std::vector<std::string> shapes;
    int runs = 30;
    bool use_cudnn = true;
    bool call_times = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--workload") {
        const std::string name = value();
        bool found = false;
        for (const auto& w : kWorkloads) {
          if (name == w.name || name == "all") {
            problems.push_back(w);
            found = true;
          }
        }
        for (const auto& w : kOffList) {
          if (name == w.name || name == "offlist") {
            problems.push_back(w);
            found = true;
          }
        }
        if (!found) throw std::runtime_error("unknown workload '" + name + "'");
      } else if (a == "--op") {
        op = value();
      } else if (a == "--shape") {
        shapes.push_back(value());
      } else if (a == "--runs") {
        runs = std::max(20, std::stoi(value()));
      } else if (a == "--json") {
        json_path = value();
      } else if (a == "--padding-mode") {
        padding_mode = convbank::parse_padding_mode(value(), "--padding-mode");
      } else if (a == "--no-cudnn") {
        use_cudnn = false;
      } else if (a == "--call-times") {
        call_times = true;
      } else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else {
        usage();
        throw std::runtime_error("unknown argument '" + a + "'");
      }
    }
    for (const auto& s : shapes) {
      if (op != "conv1d" && op != "conv-transpose1d") {
        throw std::runtime_error("--shape needs --op conv1d or --op conv-transpose1d");
      }
      const auto v = parse_shape(s);
      problems.push_back({"custom", op == "conv-transpose1d", v[0], v[1], v[2], v[3], v[4], v[5],
                          v[6], v[7], v[8], padding_mode});
    }
    if (problems.empty()) problems.assign(std::begin(kWorkloads), std::end(kWorkloads));
    if (!convbank::cuda_available()) throw std::runtime_error("no CUDA device available");

    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    char date[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
#ifdef CONVBANK_HAVE_CUDNN
    const std::string cudnn_text = "cuDNN " + std::to_string(cudnnGetVersion());
#else
    const std::string cudnn_text = "cuDNN missing (built without it): reporting convbank only";
    use_cudnn = false;
#endif
    std::printf("# convbank-bench-cuda: %s, %s, %s, %s, median of %d runs\n\n", prop.name, date,
                convbank::build_info().c_str(), cudnn_text.c_str(), runs);

    std::vector<Result> results;
    for (const auto& p : problems) {
      std::fprintf(stderr, "running %s (%s) ...\n", p.name, shape_string(p).c_str());
      results.push_back(run_problem(p, runs, use_cudnn));
    }

    std::printf(
        "| workload | op | shape | kernel | ours ms | GFLOP/s | GB/s | %% of floor | cuDNN fp32 ms "
        "| cuDNN/ours | max rel diff vs cuDNN | rel L2 ours (f64 slice) | rel L2 cuDNN fp32 | "
        "cuDNN TF32 ms (not fp32-accurate) | rel L2 TF32 |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : results) {
      const double mem_floor = r.bytes / kCopyBandwidth * 1e3;
      const double ffma_floor = r.gflop * 1e9 / kFfmaPeak * 1e3;
      const double floor = std::max(mem_floor, ffma_floor);
      std::printf(
          "| %s | %s | %s | %s | %s | %s | %s | %s%% (%s) | %s | %s | %s | %s%s | %s | %s | %s |\n",
          r.p.name, r.p.transposed ? "ConvTranspose1d" : "Conv1d", shape_string(r.p).c_str(),
          r.kernel.c_str(), fmt(r.ours_t.ms).c_str(), fmt(r.gflop / r.ours_t.ms * 1e3, 0).c_str(),
          fmt(r.bytes / r.ours_t.ms / 1e6, 0).c_str(), fmt(100.0 * floor / r.ours_t.ms, 0).c_str(),
          mem_floor > ffma_floor ? "mem" : "FFMA", r.have_cudnn ? fmt(r.cudnn_t.ms).c_str() : "n/a",
          r.have_cudnn ? (fmt(r.cudnn_t.ms / r.ours_t.ms, 2) + "x").c_str() : "n/a",
          r.have_cudnn && !r.cudnn_zeros_only ? sci(r.max_rel_diff).c_str() : "n/a",
          sci(r.ours_l2).c_str(), r.ours_all_written ? "" : " UNWRITTEN OUTPUTS",
          r.have_cudnn && !r.cudnn_zeros_only ? sci(r.cudnn_l2).c_str() : "n/a",
          r.have_cudnn ? fmt(r.tf32_t.ms).c_str() : "n/a",
          r.have_cudnn && !r.cudnn_zeros_only ? sci(r.tf32_l2).c_str() : "n/a");
    }
    std::printf(
        "\nfloors: memory = (input + output + weights) bytes / %.1f TB/s, FFMA = FLOP / %.0f "
        "TFLOP/s; %% of floor = floor / ours. Accuracy bar: rel L2 <= 1e-6.\n",
        kCopyBandwidth / 1e12, kFfmaPeak / 1e12);
    if (padding_mode != convbank::PaddingMode::kZeros) {
      std::printf(
          "cuDNN pads with zeros only: its times for %s padding are the same layer with zeros "
          "padding (PyTorch runs that after F.pad), its outputs are not compared.\n",
          convbank::to_string(padding_mode).c_str());
    }

    // Host work per call (--call-times): each timed call above ran alone, so its time includes it.
    if (call_times) {
      std::printf(
          "\nCalls: host time per call (median, us) and time per call of %d calls queued back to "
          "back (ms; the host's work hidden)\n\n| workload | ours host us | ours queued ms | cuDNN "
          "fp32 host us | cuDNN fp32 queued ms |\n|---|---|---|---|---|\n",
          runs);
      for (const auto& r : results) {
        std::printf("| %s | %s | %s | %s | %s |\n", r.p.name, fmt(r.ours_t.host_us, 1).c_str(),
                    fmt(r.ours_t.queued_ms).c_str(),
                    r.have_cudnn ? fmt(r.cudnn_t.host_us, 1).c_str() : "n/a",
                    r.have_cudnn ? fmt(r.cudnn_t.queued_ms).c_str() : "n/a");
      }
    }

    if (!json_path.empty()) {
      std::ofstream js(json_path);
      js << "{\n  \"device\": \"" << prop.name << "\",\n  \"date\": \"" << date
         << "\",\n  \"cudnn\": \"" << cudnn_text << "\",\n  \"runs\": " << runs
         << ",\n  \"results\": [\n";
      for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        js << "    {\"workload\": \"" << r.p.name << "\", \"op\": \""
           << (r.p.transposed ? "conv_transpose1d" : "conv1d") << "\", \"shape\": \""
           << shape_string(r.p) << "\", \"kernel\": \"" << r.kernel << "\", \"gflop\": " << r.gflop
           << ", \"bytes\": " << r.bytes << ", \"ours_ms\": " << r.ours_t.ms
           << ", \"ours_host_us\": " << r.ours_t.host_us
           << ", \"ours_queued_ms\": " << r.ours_t.queued_ms << ", \"ours_rel_l2\": " << r.ours_l2
           << ", \"ours_all_written\": " << (r.ours_all_written ? "true" : "false");
        if (r.have_cudnn) {
          js << ", \"cudnn_fp32_ms\": " << r.cudnn_t.ms
             << ", \"cudnn_fp32_host_us\": " << r.cudnn_t.host_us
             << ", \"cudnn_fp32_queued_ms\": " << r.cudnn_t.queued_ms << ", \"cudnn_fp32_algo\": \""
             << r.cudnn_algo << "\", \"cudnn_over_ours\": " << r.cudnn_t.ms / r.ours_t.ms
             << ", \"max_rel_diff_vs_cudnn\": " << r.max_rel_diff
             << ", \"cudnn_fp32_rel_l2\": " << r.cudnn_l2 << ", \"cudnn_tf32_ms\": " << r.tf32_t.ms
             << ", \"cudnn_tf32_algo\": \"" << r.cudnn_tf32_algo
             << "\", \"cudnn_tf32_rel_l2\": " << r.tf32_l2
             << ", \"cudnn_tf32_note\": \"not fp32-accurate\"";
        }
        js << "}" << (i + 1 < results.size() ? "," : "") << "\n";
      }
      js << "  ]\n}\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convbank-bench-cuda: error: %s\n", e.what());
    return 1;
  }
}
