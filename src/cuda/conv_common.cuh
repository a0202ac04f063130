// Shared pieces of the CUDA convolution kernels: argument blocks passed by value to the
// kernels, the padding-mode index map applied inside the loads (no padded copy of the input),
// and launch checking that names the kernel and the shape.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "convbank/error.hpp"
#include "core/backend.hpp"
#include "cuda/dispatch.hpp"

namespace convbank::detail::cuda {

// PaddingMode as a small integer the kernels switch on.
enum PadMode : int { kPadZeros = 0, kPadReflect = 1, kPadReplicate = 2, kPadCircular = 3 };

inline int to_pad_mode(PaddingMode m) {
  switch (m) {
    case PaddingMode::kReflect:
      return kPadReflect;
    case PaddingMode::kReplicate:
      return kPadReplicate;
    case PaddingMode::kCircular:
      return kPadCircular;
    case PaddingMode::kZeros:
      break;
  }
  return kPadZeros;
}

// Reads x[pos] of a row of `n` frames as F.pad(mode) would present it. Positions outside the
// padded range never reach here for valid outputs (core checked pad < n for reflect and
// pad <= n for circular), but tiles also touch positions past the last output: those, and
// anything the map cannot place, read as 0.
__device__ __forceinline__ float load_padded(const float* __restrict__ row, std::int64_t pos,
                                             std::int64_t n, int mode) {
  if (static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(n)) return __ldg(row + pos);
  if (mode == kPadZeros) return 0.0f;
  std::int64_t i = pos;
  if (mode == kPadReflect) {
    i = pos < 0 ? -pos : 2 * (n - 1) - pos;
  } else if (mode == kPadReplicate) {
    i = pos < 0 ? 0 : n - 1;
  } else {  // circular: one wrap at most
    i = pos < 0 ? pos + n : pos - n;
  }
  if (static_cast<std::uint64_t>(i) >= static_cast<std::uint64_t>(n)) return 0.0f;
  return __ldg(row + i);
}

// "(N 32, Cin 64 -> Cout 128, frames 131072 -> 131070, K 3, stride 1, pad 0+0, dilation 1,
// groups 1, zeros)".
std::string shape_text(const Conv1dParams& p);
std::string shape_text(const ConvTranspose1dParams& p);

// Throws convbank::Error naming the kernel and the shape when the launch just made failed.
// A call's shape for error messages, formatted only when one is thrown: a launch inside a
// stream's process() must not allocate.
class LaunchShape {
 public:
  LaunchShape(const Conv1dParams& p) : conv_(&p) {}  // NOLINT(google-explicit-constructor)
  LaunchShape(const ConvTranspose1dParams& p)
      : transpose_(&p) {}  // NOLINT(google-explicit-constructor)
  std::string text() const {
    return conv_ != nullptr ? shape_text(*conv_) : shape_text(*transpose_);
  }

 private:
  const Conv1dParams* conv_ = nullptr;
  const ConvTranspose1dParams* transpose_ = nullptr;
};
void check_launch(const char* kernel, const LaunchShape& shape);
void check_cuda(cudaError_t status, const char* what);

inline int num_sms() {
  static const int count = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();
      return 132;
    }
    return sms;
  }();
  return count;
}

// Blocks of kKernel resident per multiprocessor (at least 1) at `threads` threads and `smem` bytes
// of dynamic shared memory, remembered for the last pair asked: the occupancy query took a few
// microseconds of host time per launch (log step 113 in docs/performance.md).
template <auto kKernel>
int resident_blocks(int threads, std::size_t smem) {
  static std::atomic<std::uint64_t> memo{0};  // threads << 40 | smem << 8 | blocks; 0: none yet
  const std::uint64_t key =
      (static_cast<std::uint64_t>(threads) << 40) | (static_cast<std::uint64_t>(smem) << 8);
  const std::uint64_t seen = memo.load(std::memory_order_relaxed);
  if (seen != 0 && (seen & ~std::uint64_t{0xff}) == key) return static_cast<int>(seen & 0xff);
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, threads, smem) !=
      cudaSuccess) {
    cudaGetLastError();
    blocks = 1;
  }
  blocks = std::clamp(blocks, 1, 255);
  memo.store(key | static_cast<std::uint64_t>(blocks), std::memory_order_relaxed);
  return blocks;
}

// Thread-block clusters (sm_90+): the split-reduction phase GEMM needs them (read once).
inline bool cluster_launch_supported() {
  static const bool ok = [] {
    int device = 0, v = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrClusterLaunch, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return v != 0;
  }();
  return ok;
}

// A memory pool of convbank's own per device, for the stream-ordered workspaces below.
cudaMemPool_t workspace_pool();

// A stream-ordered workspace from convbank's pool, freed after the launches that use it were
// queued (free()), or when one of them throws.
class Workspace {
 public:
  Workspace(std::size_t bytes, cudaStream_t stream, const char* what) : stream_(stream) {
    const std::string call = std::string("cudaMallocFromPoolAsync (") + what + ")";
    check_cuda(cudaMallocFromPoolAsync(&p_, bytes, workspace_pool(), stream), call.c_str());
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  Workspace(Workspace&& o) noexcept : p_(std::exchange(o.p_, nullptr)), stream_(o.stream_) {}
  ~Workspace() {
    if (p_ != nullptr && cudaFreeAsync(p_, stream_) != cudaSuccess) cudaGetLastError();
  }
  float* floats() const { return static_cast<float*>(p_); }
  void free(const char* what) {
    const std::string call = std::string("cudaFreeAsync (") + what + ")";
    check_cuda(cudaFreeAsync(std::exchange(p_, nullptr), stream_), call.c_str());
  }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

// A benchmarking knob from the environment (0 when unset); callers read it once, into a static.
inline int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : 0;
}

// An on-by-default feature's off switch: true when the variable is set to 0.
inline bool env_off(const char* name) {
  return std::getenv(name) != nullptr && env_int(name) == 0;
}

// A three-way switch for A/B runs: unset, the dispatcher's rule (kAuto); 0, never; any other
// value, always.
inline WgmmaPolicy env_policy(const char* name) {
  if (std::getenv(name) == nullptr) return WgmmaPolicy::kAuto;
  return env_int(name) == 0 ? WgmmaPolicy::kNever : WgmmaPolicy::kAlways;
}

// i / d for i < 2^32, with m = div_magic(d) = floor((2^32 - 1) / d): the multiply-high's
// estimate is the quotient or one below it (i m / 2^32 > i / d - 1), so one correction makes it
// exact. A division by a runtime value is about 20 instructions otherwise.
__device__ __forceinline__ std::uint32_t div_u32(std::uint32_t i, std::uint32_t d,
                                                 std::uint32_t m) {
  const std::uint32_t q = __umulhi(i, m);
  return i - q * d >= d ? q + 1 : q;
}
inline std::uint32_t div_magic(std::int64_t d) {
  return static_cast<std::uint32_t>(0xffffffffULL / static_cast<std::uint64_t>(d));
}

// Grid extents are capped; kernels loop over the rest (64-bit work counts).
constexpr std::int64_t kMaxGridX = 1LL << 30;
constexpr std::int64_t kMaxGridYZ = 65535;

inline unsigned grid_dim(std::int64_t want, std::int64_t cap) {
  if (want < 1) want = 1;
  return static_cast<unsigned>(want < cap ? want : cap);
}

// Sets the operand pointers and strides every kernel family's argument block carries under the
// same names (x, x_bs, x_cs, w, bias, y, y_bs, y_cs; strides in floats). A template, not a
// shared base struct: the blocks' layouts (kernel parameters) stay as they were.
template <class Args>
void set_views(Args& a, TensorView<const float> x, const float* w, const float* bias,
               TensorView<float> y) {
  a.x = x.data();
  a.x_bs = x.batch_stride();
  a.x_cs = x.channel_stride();
  a.w = w;
  a.bias = bias;
  a.y = y.data();
  a.y_bs = y.batch_stride();
  a.y_cs = y.channel_stride();
}

// Sets the polyphase geometry the ConvTranspose1d decoder kernels' argument blocks carry under
// the same names: out_channels, rows = batch * out_channels, cin_g, cout_g, K, P = stride,
// T = taps per phase (ceil(K / P)), pad, in_frames, out_frames.
template <class Args>
void set_polyphase(Args& a, const ConvTranspose1dParams& p) {
  a.out_channels = p.out_channels;
  a.rows = p.batch * p.out_channels;
  a.cin_g = static_cast<int>(p.in_channels / p.groups);
  a.cout_g = static_cast<int>(p.out_channels / p.groups);
  a.K = static_cast<int>(p.kernel_size);
  a.P = static_cast<int>(p.stride);
  a.T = static_cast<int>((p.kernel_size + p.stride - 1) / p.stride);
  a.pad = p.padding;
  a.in_frames = p.in_frames;
  a.out_frames = p.out_frames;
}

// ---- launchers (one per kernel family), each in its own .cu ---------------------------------

// Per-output direct kernels: every argument, any shape; coalesced along time.
void launch_conv1d_direct(const Conv1dParams& p, TensorView<const float> x, const float* w,
                          const float* bias, TensorView<float> y, cudaStream_t stream,
                          const char* name);
// One thread per output, for tiny problems (any argument).
void launch_conv1d_direct_flat(const Conv1dParams& p, TensorView<const float> x, const float* w,
                               const float* bias, TensorView<float> y, cudaStream_t stream,
                               const char* name);
void launch_conv_transpose1d_direct(const ConvTranspose1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name);
// Padding modes other than zeros on the kernels that only pad with zeros: after such a kernel
// ran the layer with zeros, this recomputes the outputs whose window reaches into the padding
// (at most pad_left + pad_right per row at stride 1), one warp per output, summed in float64.
void launch_conv1d_padding_edges(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                 const float* bias, TensorView<float> y, cudaStream_t stream,
                                 const char* name);

// Polyphase ConvTranspose1d for few output channels per group (dilation 1, stride >= 2).
bool conv_transpose1d_narrow_supported(const ConvTranspose1dParams& p);
void launch_conv_transpose1d_narrow(const ConvTranspose1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name);

// Split-reduction decoder for few output channels per group: dilation 1, stride 2..16, K a
// multiple of the stride, K / stride <= 4 taps (conv_direct.cu).
// Below one block per multiprocessor it splits the channels over a thread-block cluster of
// splitk_cluster_size(p) blocks (1 = no cluster; CONVBANK_CUDA_SPLITK_CLUSTER=n forces n).
bool conv_transpose1d_splitk_supported(const ConvTranspose1dParams& p);
int splitk_cluster_size(const ConvTranspose1dParams& p);
void launch_conv_transpose1d_splitk(const ConvTranspose1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name);

// Memory-bound kernels (conv_memory.cu). Conv1d with one input channel per group: the encoder
// for >= 16 outputs per group, the depthwise kernel for fewer; each while its staged input
// window fits in shared memory (any padding mode, stride, dilation).
bool conv1d_encoder_supported(const Conv1dParams& p);
void launch_conv1d_encoder(const Conv1dParams& p, TensorView<const float> x, const float* w,
                           const float* bias, TensorView<float> y, cudaStream_t stream,
                           const char* name);
// One-channel encoders with >= 64 outputs per group and dilation 1, each thread storing 4
// consecutive frames from a 16-byte boundary of its row (rows of any length).
bool conv1d_encoder2_supported(const Conv1dParams& p);
// Its work items: (batch, 1024-frame tile, 64-channel tile) triples.
std::int64_t conv1d_encoder2_tiles(const Conv1dParams& p);
void launch_conv1d_encoder2(const Conv1dParams& p, TensorView<const float> x, const float* w,
                            const float* bias, TensorView<float> y, cudaStream_t stream,
                            const char* name);
// One-channel encoders with K <= 32 in tiles taken in frame order by persistent blocks
// (conv1d_encoder_local_ffma).
bool conv1d_encoder_local_supported(const Conv1dParams& p);
// Its tiles, 0 where it does not apply.
std::int64_t conv1d_encoder_local_tiles(const Conv1dParams& p);
void launch_conv1d_encoder_local(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                 const float* bias, TensorView<float> y, cudaStream_t stream,
                                 const char* name);
// The tensor-core one-channel encoder (conv_encoder_wgmma.cu): K <= 32, sm_90a.
bool conv1d_encoder_wgmma_supported(const Conv1dParams& p);
std::int64_t conv1d_encoder_wgmma_items(const Conv1dParams& p);  // 0 where it does not fit
void launch_conv1d_encoder_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                 const float* bias, TensorView<float> y, cudaStream_t stream,
                                 const char* name);

bool conv1d_depthwise_supported(const Conv1dParams& p);
void launch_conv1d_depthwise(const Conv1dParams& p, TensorView<const float> x, const float* w,
                             const float* bias, TensorView<float> y, cudaStream_t stream,
                             const char* name);
// ConvTranspose1d decoder: dilation 1, stride 2..16, K a multiple of the stride, K / stride <= 4
// taps; every input channel of an output block is summed in one thread (no split reduction),
// so it wants at least conv_transpose1d_decoder_blocks(p) >= the multiprocessor count.
bool conv_transpose1d_decoder_supported(const ConvTranspose1dParams& p);
std::int64_t conv_transpose1d_decoder_blocks(const ConvTranspose1dParams& p);
// How full its waves of resident thread blocks are (0..1], its work counted in whole tiles of
// output blocks (a row's last, short tile costs its share: its idle warps take channels).
double conv_transpose1d_decoder_wave_fill(const ConvTranspose1dParams& p);
void launch_conv_transpose1d_decoder(const ConvTranspose1dParams& p, TensorView<const float> x,
                                     const float* w, const float* bias, TensorView<float> y,
                                     cudaStream_t stream, const char* name);

// ConvTranspose1d decoders on the tensor cores (3xTF32 wgmma, conv_decoder_wgmma.cu; sm_90a):
// dilation 1, K a multiple of the stride with K / stride <= 32, out/groups x K <= 32 columns,
// in/groups >= 8, weights of a group in shared memory (about in/groups <= 800 at 16 columns).
bool conv_transpose1d_decoder_wgmma_supported(const ConvTranspose1dParams& p);
// Whether its input would come through the copy engine (more than 64 channels per group, a
// multiple of 4; views with 16-byte aligned starts and batch strides, which the launch checks).
bool conv_transpose1d_decoder_wgmma_tma_shape(const ConvTranspose1dParams& p);
void launch_conv_transpose1d_decoder_wgmma(const ConvTranspose1dParams& p,
                                           TensorView<const float> x, const float* w,
                                           const float* bias, TensorView<float> y,
                                           cudaStream_t stream, const char* name);
// The same kernel for stride-1 Conv1d layers of few outputs (HiFi-GAN's conv_post, 32 -> 1,
// K 7): dilation 1, zeros padding with pad_left <= K - 1, out/groups x K <= 32, in/groups >= 8.
bool conv1d_few_outputs_wgmma_supported(const Conv1dParams& p);
void launch_conv1d_few_outputs_wgmma(const Conv1dParams& p, TensorView<const float> x,
                                     const float* w, const float* bias, TensorView<float> y,
                                     cudaStream_t stream, const char* name);
// Tile configurations of the FFMA implicit GEMM (rows x cols per block).
enum class GemmTile { k128x128, k64x128, k32x128, k16x128 };
void launch_conv1d_gemm(const Conv1dParams& p, TensorView<const float> x, const float* w,
                        const float* bias, TensorView<float> y, cudaStream_t stream, GemmTile tile,
                        const char* name);
// Polyphase (dilation 1, any stride) or stride-1 (any dilation) ConvTranspose1d as a GEMM:
// rows (out channel, phase), cols input-rate frames, reduction (in channel, tap of the phase).
void launch_conv_transpose1d_gemm(const ConvTranspose1dParams& p, TensorView<const float> x,
                                  const float* w, const float* bias, TensorView<float> y,
                                  cudaStream_t stream, GemmTile tile, const char* name);

// GEMM v2 (conv_gemm_v2.cu): linear operand maps, no per-element decode. Conv1d with zeros
// padding and in/groups * K >= 32; ConvTranspose1d with one output channel per group, dilation
// 1, stride >= 32 and K a multiple of the stride (rows = phases). The transposed one splits
// its reduction over a cluster of `split` blocks (1..kMaxSplit; > 1 only where
// cluster_launch_supported()), reduced deterministically through distributed shared memory.
constexpr int kMaxSplit = 8;
bool conv1d_gemm_v2_supported(const Conv1dParams& p);
bool conv_transpose1d_gemm_v2_supported(const ConvTranspose1dParams& p);
int conv_transpose1d_gemm_v2_steps(const ConvTranspose1dParams& p);  // reduction steps of 8
void launch_conv1d_gemm_v2(const Conv1dParams& p, TensorView<const float> x, const float* w,
                           const float* bias, TensorView<float> y, cudaStream_t stream,
                           GemmTile tile, const char* name);
void launch_conv_transpose1d_gemm_v2(const ConvTranspose1dParams& p, TensorView<const float> x,
                                     const float* w, const float* bias, TensorView<float> y,
                                     cudaStream_t stream, GemmTile tile, int split,
                                     const char* name);

// Implicit GEMM on Hopper tensor cores at fp32 accuracy (3xTF32 wgmma, conv_wgmma.cu; built
// for sm_90a only, so *_supported() is false on other GPUs): zeros padding, K <= 8, in/groups
// >= 8, out/groups >= 32; ConvTranspose1d at stride 1.
bool conv1d_wgmma_supported(const Conv1dParams& p);
bool conv_transpose1d_wgmma_supported(const ConvTranspose1dParams& p);
void launch_conv1d_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                         const float* bias, TensorView<float> y, cudaStream_t stream,
                         const char* name);
void launch_conv_transpose1d_wgmma(const ConvTranspose1dParams& p, TensorView<const float> x,
                                   const float* w, const float* bias, TensorView<float> y,
                                   cudaStream_t stream, const char* name);

// The channel tile (128 or 64) of the tensor-core kernel with both operands in shared memory,
// which runs the stride-1 convolutions of the wgmma launches (the Conv1d itself, space-to-depth,
// depth-to-space); 0 where the register-fragment kernel (128 x 64) runs. The arguments are those
// of the stride-1 convolution the launch runs; aligned: its output 0, tap 0 reads an input frame
// that is a multiple of 4 (Conv1d: padding on the left % 4 == 0); d2s: a depth-to-space
// convolution (three stages only, see ss_two_stages_allowed).
int wgmma_ss_tile(std::int64_t stride, std::int64_t taps, std::int64_t dilation,
                  std::int64_t cout_g, bool aligned, bool d2s = false);
// wgmma_ss_tile() of the convolution a layer's wgmma launch runs: the Conv1d itself; the
// ConvTranspose1d at stride 1, or its depth-to-space convolution at stride s > 1.
int conv1d_ss_tile(const Conv1dParams& p);
int conv_transpose1d_ss_tile(const ConvTranspose1dParams& p);
// The same for the space-to-depth convolution of a strided Conv1d, and the taps (ceil(K / s))
// of the depth-to-space convolution of a strided ConvTranspose1d.
int conv1d_s2d_ss_tile(const Conv1dParams& p);
std::int64_t d2s_taps(const ConvTranspose1dParams& p);
// Whether those launches multiply in fp16 pairs (3xFP16, the SS kernel's kHalf in
// conv_wgmma.cu) rather than tf32 pairs: the kernel names say which. co_tile: wgmma_ss_tile()'s;
// batch x groups, output rows (channels) per group and output frames of the convolution run.
bool wgmma_ss_half(std::int64_t taps, std::int64_t dilation, int co_tile, bool aligned,
                   std::int64_t batch_groups, std::int64_t rows, std::int64_t frames,
                   bool d2s = false);
bool conv1d_ss_half(const Conv1dParams& p);
bool conv_transpose1d_ss_half(const ConvTranspose1dParams& p);
bool conv1d_s2d_ss_half(const Conv1dParams& p);

// A strided Conv1d with few input channels (one group, dilation 1, zeros padding, K a multiple
// of the stride) as the stride-1 tensor-core convolution over stride * in_channels channels
// (space-to-depth, conv_wgmma.cu): false wherever conv1d_wgmma_supported() is for that shape.
bool conv1d_s2d_supported(const Conv1dParams& p);
void launch_conv1d_s2d_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                             const float* bias, TensorView<float> y, cudaStream_t stream,
                             const char* name);

// A stride-1 Conv1d or ConvTranspose1d whose taps the shared-memory-operand kernel's stages do
// not hold (large dilations, more than 16 taps), as n convolutions of consecutive tap groups on
// it, summed (conv_wgmma.cu). *_ss_tile(): the first group's tile.
int conv1d_tap_groups_ss_tile(const Conv1dParams& p);
bool conv1d_tap_groups_supported(const Conv1dParams& p);
void launch_conv1d_tap_groups_wgmma(const Conv1dParams& p, TensorView<const float> x,
                                    const float* w, const float* bias, TensorView<float> y,
                                    cudaStream_t stream, const char* name);
int conv_transpose1d_tap_groups_ss_tile(const ConvTranspose1dParams& p);
bool conv_transpose1d_tap_groups_supported(const ConvTranspose1dParams& p);
void launch_conv_transpose1d_tap_groups_wgmma(const ConvTranspose1dParams& p,
                                              TensorView<const float> x, const float* w,
                                              const float* bias, TensorView<float> y,
                                              cudaStream_t stream, const char* name);

// A ConvTranspose1d of stride s > 1 (dilation 1, ceil(K / s) = 2..8 taps, in/groups >= 8,
// s * out/groups >= 32) as one stride-1 tensor-core convolution whose s * out/groups output
// channels are the (channel, phase) pairs, written to every s-th output frame (depth-to-space,
// conv_wgmma.cu).
bool conv_transpose1d_d2s_supported(const ConvTranspose1dParams& p);
void launch_conv_transpose1d_d2s_wgmma(const ConvTranspose1dParams& p, TensorView<const float> x,
                                       const float* w, const float* bias, TensorView<float> y,
                                       cudaStream_t stream, const char* name);

// Pointwise Conv1d (K = 1, stride 1) on the tensor cores with the activations split in registers
// (3xFP16 wgmma, conv_pointwise_wgmma.cu; sm_90a): in/groups a multiple of 4 from 16 to 512,
// zeros padding (the dispatcher's edge pass for the other modes). Views the copy engine cannot
// read (a start or batch stride off 16 bytes) run on the shared-memory-operand kernel.
bool conv1d_pointwise_wgmma_supported(const Conv1dParams& p);
std::int64_t conv1d_pointwise_wgmma_tiles(const Conv1dParams& p);
void launch_conv1d_pointwise_wgmma(const Conv1dParams& p, TensorView<const float> x, const float* w,
                                   const float* bias, TensorView<float> y, cudaStream_t stream,
                                   const char* name);

// 1-D Winograd F(4,3), K = 3, stride 1, dilation 1.
void launch_conv1d_winograd(const Conv1dParams& p, TensorView<const float> x, const float* w,
                            const float* bias, TensorView<float> y, cudaStream_t stream,
                            const char* name);
void launch_conv_transpose1d_winograd(const ConvTranspose1dParams& p, TensorView<const float> x,
                                      const float* w, const float* bias, TensorView<float> y,
                                      cudaStream_t stream, const char* name);

}  // namespace convbank::detail::cuda
