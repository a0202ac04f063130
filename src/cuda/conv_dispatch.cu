// Host side of the CUDA convolutions: picks a kernel per shape (dispatch rules below, the
// chosen name is what conv1d_kernel_name() reports), launches it on the caller's stream and
// checks the launch. No device-wide synchronization; no allocation except the tensor-core
// kernels' stream-ordered workspaces (conv_wgmma.cu).
//
// Conv1d:
//   reflect, replicate or circular padding, where the rules below pick a tensor-core kernel or
//   GEMM v2 for the layer with zeros padding: that kernel with zeros padding, then
//   conv1d_padding_edges recomputes the outputs whose window reaches into the padding
//   (CONVBANK_CUDA_EDGES=0: off; the rules below with the layer's own padding mode)
//   out frames <= 128 and batch * out * frames * in/groups * K <= 2^22 (a streaming chunk)
//                                  -> conv1d_direct_flat (one thread per output)
//   compute capability 9.0, stride s > 1, dilation 1, K a multiple of s, in channels x K >= 128,
//   out/groups x K / s >= 192, s * in channels <= 4096, any padding mode, at least 2^24
//   multiply-adds, where the shared-memory-operand kernel's stages fit the stride-1
//   convolution of K / s taps over s * in channels it is (space-to-depth:
//   x'[c s + r][q] = x[c][q s + r - pad])
//                                  -> conv1d_s2d_wgmma_ss_3xtf32_{128x128,64x256}
//                                     (CONVBANK_CUDA_S2D=0: off)
//   compute capability 9.0, stride 1, zeros padding, in/groups >= 8, out/groups >= 32, at least
//   2^24 multiply-adds, K taps whose stages the shared-memory-operand kernel does not hold but
//   those of 2-4 groups of consecutive taps it does (large dilations)
//                                  -> conv1d_taps_wgmma_ss_3xtf32_{128x128,64x256} (the groups'
//                                     convolutions summed; CONVBANK_CUDA_TAP_GROUPS=0: off;
//                                     ConvTranspose1d at stride 1 likewise:
//                                     conv_transpose1d_taps_wgmma_ss_3xtf32_*)
//   compute capability 9.0, K = 1, stride 1, zeros padding, in/groups a multiple of 4 and at
//   least 16, in/groups >= 192 or out/groups <= 64, out/groups filling 64-column tiles to 3/4,
//   at least two 192-frame x 64-channel tiles per multiprocessor
//                                  -> conv1d_pointwise_wgmma_3xfp16 (activations split in
//                                     registers; CONVBANK_CUDA_PW=0|1)
//   compute capability 9.0, zeros padding, K <= 8 (K <= 16 for the first kernel below),
//   in/groups >= 8, out/groups >= 32, at least 2^24 multiply-adds; out/groups filling 64-column
//   tiles to 3/4 unless the first kernel below takes the layer
//                                  -> stride 1, where its stages fit (three, or two where three
//                                     do not at 8 channels per chunk: K >= 4 at large dilations,
//                                     14-16 taps; K = 1: with 32-channel chunks, i.e. 128-row
//                                     tiles and padding on the left a multiple of 4):
//                                     conv1d_wgmma_ss_3xtf32_128x128 (out/groups > 64) or
//                                     _64x256 (both operands in shared memory)
//                                     otherwise (strided, other K = 1):
//                                     conv1d_wgmma_3xtf32_128x64 (activations in registers)
//                                     (tensor cores, 3xTF32; CONVBANK_CUDA_WGMMA=1 wherever it
//                                     applies, =0 never; CONVBANK_CUDA_WGMMA_SS=0 keeps the
//                                     register-fragment kernel at stride 1)
//   space-to-depth (the first rule) below out/groups x K / s = 192 too, where the previous
//   rule does not take the layer (K > 8, padding modes other than zeros, ...); its
//   register-fragment tile where the shared-memory-operand kernel's stages do not fit
//                                  -> conv1d_s2d_wgmma_ss_3xtf32_{128x128,64x256},
//                                     conv1d_s2d_wgmma_3xtf32_128x64
//   compute capability 9.0, stride 1, dilation 1, pad_left <= K - 1, out/groups x K <= 32
//   (out/groups < 32), in/groups >= 16, a group's weights fit shared memory (the tensor-core
//   decoder below, taps reversed)
//                                  -> conv1d_few_outputs_wgmma_3xtf32
//                                     (CONVBANK_CUDA_DECODER_WGMMA=0: off)
//   K = 3, stride 1, dilation 1, in/groups >= 16, out/groups >= 32
//                                  -> conv1d_winograd_f43_ffma
//   in/groups = 1, out/groups >= 64, dilation 1 (one-channel encoders), two input windows fit
//   shared memory, stride 2..4, >= 2 taps per phase, >= 4 tiles per multiprocessor
//                                  -> conv1d_encoder_aligned_ffma
//                                     (CONVBANK_CUDA_ENC_ALIGNED=0: off)
//   in/groups = 1, out/groups >= 16 (one-channel encoders), input window fits shared memory
//                                  -> conv1d_encoder_ffma
//   in/groups = 1, out/groups < 16 (depthwise), input window fits shared memory
//                                  -> conv1d_depthwise_staged
//   out/groups <= 4 (few outputs per group)
//                                  -> conv1d_direct_coalesced
//   zeros padding (or none), in/groups * K >= 32 (pointwise, large-stride encoders, ...)
//                                  -> conv1d_gemm_v2_ffma_{128,64,32}x128
//   otherwise                      -> conv1d_implicit_gemm_ffma_{128,64,32,16}x128 (rows =
//                                     out/groups; a smaller tile when the grid would not fill
//                                     the GPU twice)
// ConvTranspose1d:
//                                  -> conv_transpose1d_wgmma_ss_3xtf32_{128x128,64x256}
//   compute capability 9.0, stride s > 1, dilation 1, ceil(K / s) = 2..8 taps, in/groups >= 8,
//   s * out/groups >= 32 rows, at least 2^24 multiply-adds (one stride-1 convolution whose
//   output channels are the (channel, phase) pairs, depth-to-space in the epilogue)
//                                  -> conv_transpose1d_d2s_wgmma_ss_3xtf32_{128x128,64x256}
//                                     (CONVBANK_CUDA_D2S=0: off)
//   compute capability 9.0, dilation 1, K a multiple of the stride (K / stride <= 32),
//   out/groups x K <= 32 (out/groups < 32), in/groups >= 8, a group's weights fit shared memory,
//   at least one 128-frame tile per multiprocessor, unless the FFMA decoder below fills its waves
//   to 90 % with one output per group and K <= 16 (a GEMM over the input channels into (channel,
//   tap) columns, overlap-add in the epilogue)
//                                  -> conv_transpose1d_decoder_wgmma_3xtf32
//                                     (CONVBANK_CUDA_DECODER_WGMMA=0: off)
//   the Conv1d wgmma rule at stride s > 1 with dilation 1 and K a multiple of s (K = s here,
//   unless depth-to-space is off), any out/groups >= 32 (s phase convolutions of K / s taps)
//                                  -> conv_transpose1d_phase_wgmma_3xtf32_128x64
//   stride 1, dilation 1, K = 3, in/groups >= 16, out/groups >= 32
//                                  -> conv_transpose1d_winograd_f43_ffma
//   dilation 1, stride 2..16, K % stride == 0, K / stride <= 4, out/groups <= 4 (decoders),
//   at least one block of 1024 output blocks per multiprocessor
//                                  -> conv_transpose1d_decoder_ffma
//   the same decoders with fewer blocks
//                                  -> conv_transpose1d_polyphase_splitk (its channels split
//                                     over a thread-block cluster when its tiles underfill the
//                                     GPU, sm_90+)
//   out/groups == 1, dilation 1, stride >= 32, K % stride == 0 (STFT-like synthesis)
//                                  -> conv_transpose1d_phase_gemm_v2_ffma_{128,64,32}x128, and
//                                     where the output tiles underfill the GPU (sm_90+):
//                                     ..._{128,64,32}x128_split{2..8} (reduction split over a
//                                     thread-block cluster, summed in distributed shared memory)
//   dilation 1, stride >= 2, out/groups <= 4 (other decoders)
//                                  -> conv_transpose1d_polyphase_narrow
//   dilation 1 or stride 1, rows = out/groups * phases > 4
//                                  -> conv_transpose1d_polyphase_gemm_ffma_*x128
//   otherwise                      -> conv_transpose1d_direct_gather
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "cuda/conv_common.cuh"
#include "cuda/dispatch.hpp"

namespace convbank::detail::cuda {

namespace {

enum class Family {
  kDirect,
  kDirectFlat,
  kGemm,
  kGemm2,
  kWinograd,
  kNarrow,
  kSplitK,
  kWgmma,
  kEncoder,
  kEncoder2,
  kEncoderLocal,
  kEncoderWgmma,
  kPointwise,
  kDepthwise,
  kDecoder,
  kDecoderWgmma,
  kS2d,
  kD2s,
  kTaps
};

// Multiply-adds up to which a Conv1d of short rows runs one thread per output.
constexpr std::int64_t kTinyConvFmas = std::int64_t{1} << 22;
// Multiply-adds from which the tensor-core kernel is used where it applies: below, a few
// 128-frame tiles leave most of the GPU idle and the FFMA kernels' smaller tiles do better.
constexpr std::int64_t kWgmmaMinFmas = std::int64_t{1} << 24;

std::atomic<WgmmaPolicy>& policy_slot() {
  static std::atomic<WgmmaPolicy> slot{env_policy("CONVBANK_CUDA_WGMMA")};
  return slot;
}

// The tensor-core kernel where it measured faster than the FFMA kernels on the H200 (see
// docs/performance.md): everywhere it applies (seedA 3.98 vs 4.37 ms Winograd, seedB 7.19 vs
// 7.69, tcn_pointwise 0.86 vs 0.95, dilated/strided/K = 7 layers 1.1-3.2x) except when the
// register-fragment kernel's 64-column tiles would be less than 3/4 used (32 columns per group:
// 0.96 vs 0.86 ms). Kernels whose tiles win even half used (`fill_free`): the
// shared-memory-operand kernel of the stride-1 convolutions (x_grouped, 32 channels per group
// on its 64-row tile: 0.578 vs 0.865 ms GEMM v2) and the phase convolutions of a strided
// ConvTranspose1d (up2x, 32 columns: 0.48 vs 0.82 ms; x_up4x 0.84 vs 2.22; x_grouped_t 1.00 vs
// 2.31).
bool wgmma_wins(std::int64_t cout_g, bool fill_free) {
  const std::int64_t cols = (cout_g + 63) / 64 * 64;
  return fill_free || 4 * cout_g >= 3 * cols;
}

// What a policy alone decides for a kernel: never, always, or (kAuto, nullopt) the caller's rule.
std::optional<bool> forced_by(WgmmaPolicy policy) {
  switch (policy) {
    case WgmmaPolicy::kNever:
      return false;
    case WgmmaPolicy::kAlways:
      return true;
    case WgmmaPolicy::kAuto:
      break;
  }
  return std::nullopt;
}

// ... the tensor-core policy.
std::optional<bool> policy_forces() {
  return forced_by(wgmma_policy());
}

bool use_wgmma(std::int64_t fmas, std::int64_t cout_g, bool fill_free) {
  if (const auto forced = policy_forces()) return *forced;
  return fmas >= kWgmmaMinFmas && wgmma_wins(cout_g, fill_free);
}

// Space-to-depth onto the tensor cores where the reduction per output (in channels x K) is
// deep: at 512 it measured 0.248 vs 0.367 ms (enc_stft512, against GEMM v2), at 16 0.419 vs
// 0.272 ms (enc_tasnet, against the encoder kernel, which is bound by its output writes).
// CONVBANK_CUDA_WGMMA=1 takes it wherever it applies; CONVBANK_CUDA_S2D=0 turns it off (read
// once).
bool s2d_wins(const Conv1dParams& p) {
  static const bool off = env_off("CONVBANK_CUDA_S2D");
  if (off) return false;
  return wgmma_policy() == WgmmaPolicy::kAlways || p.in_channels * p.kernel_size >= 128;
}

// Space-to-depth before the register-fragment kernel for a strided layer: x' costs a pass over
// the input (read and write), which pays where each input frame feeds enough products,
// out/groups x K / stride of them. On the H200 (log step 80 in docs/performance.md, ms,
// space-to-depth vs register-fragment kernel): 512 (128 -> 256, K 4, s 2) 0.96 vs 1.31, 256
// (64 -> 128, K 8, s 4) 0.27 vs 0.59 and (K 6, s 3) 0.31 vs 0.56; 128 (32 -> 64, K 4, s 2) 0.267
// vs 0.227 and (128 -> 128, K 2, s 2) 0.454 vs 0.388. The threshold sits between.
bool s2d_first(const Conv1dParams& p) {
  if (wgmma_policy() == WgmmaPolicy::kAlways) return true;
  return p.out_channels / p.groups * (p.kernel_size / p.stride) >= 192;
}

std::atomic<WgmmaPolicy>& encoder_aligned_slot() {
  static std::atomic<WgmmaPolicy> slot{env_off("CONVBANK_CUDA_ENC_ALIGNED") ? WgmmaPolicy::kNever
                                                                            : WgmmaPolicy::kAuto};
  return slot;
}

// The aligned encoder where it measured faster than conv1d_encoder_ffma on the H200 (log step 87
// in docs/performance.md, ms, aligned vs 4-byte stores): strides 2..4 with at least two taps
// per phase (1 -> 512, K 16, s 4: 0.43 vs 0.56; 1 -> 256, K 6, s 3: 0.25 vs 0.33; K 8, s 4: 0.106
// vs 0.118). Elsewhere it was slower or even: enc_tasnet (K 16, s 8) 0.27 vs 0.24, K 32, s 8
// 0.39 vs 0.34, one tap per phase (K 8, s 8; K 2, s 2), stride 1 (K 3: 0.19 vs 0.16; K 5 even).
// And only where its tiles fill the GPU: below two per resident block (of two per
// multiprocessor) the 128-frame tiles of conv1d_encoder_ffma spread the work better (4 x 1 ->
// 128, K 40, stride 20, 64000 frames: 32 tiles, 0.079 against 0.019 ms on its first version).
bool encoder2_wins(const Conv1dParams& p) {
  if (const auto forced = forced_by(encoder_aligned_slot().load())) return *forced;
  const std::int64_t taps = (p.kernel_size + p.stride - 1) / p.stride;
  return p.stride >= 2 && p.stride <= 4 && taps >= 2 && conv1d_encoder2_tiles(p) >= 4LL * num_sms();
}

std::atomic<WgmmaPolicy>& encoder_local_slot() {
  static std::atomic<WgmmaPolicy> slot{env_policy("CONVBANK_CUDA_ENC_LOCAL")};
  return slot;
}

// The local-order encoder where its tiles fill the GPU twice: on the H200 (log step 107 in
// docs/performance.md, ms, local vs conv1d_encoder_ffma, one run each in the same call) enc_tasnet
// 0.192 vs 0.246, 4 x 1 -> 1024 0.104 vs 0.127, 8 x 1 -> 128, K 3, s 1 0.188 vs 0.248, 8 x 1 ->
// 512, K 12, s 6 0.125 vs 0.160, K 20, s 10 0.116 vs 0.142, K 32, s 16 0.088 vs 0.108; with fewer
// tiles the other encoder's 128-frame tiles spread the work better. The aligned encoder keeps the
// layers it wins (strides 2..4).
bool encoder_local_wins(const Conv1dParams& p) {
  if (const auto forced = forced_by(encoder_local_slot().load())) return *forced;
  return conv1d_encoder_local_tiles(p) >= 2LL * num_sms();
}

std::atomic<WgmmaPolicy>& encoder_wgmma_slot() {
  static std::atomic<WgmmaPolicy> slot{env_policy("CONVBANK_CUDA_ENC_WGMMA")};
  return slot;
}

// The tensor-core encoder where it measured faster than the FFMA encoders on the H200 (log step
// 114 in docs/performance.md, ms, tensor cores vs FFMA, the three device calls of this design):
// strides 2..4 with at least two taps per phase and 256 or more channels per group, the aligned
// encoder's layers (1 -> 512, K 16, s 4: 0.392-0.403 vs 0.425-0.429; 1 -> 256, K 8, s 4:
// 0.092-0.094 vs 0.097-0.099), where its items fill the GPU twice. Elsewhere it was even or
// slower, or faster by too little in too few runs to change the default: enc_tasnet 0.191-0.197
// vs 0.188-0.205, K 20, s 10 0.106-0.108 vs 0.112-0.115, K 12, s 6 0.130-0.132 vs 0.123-0.126,
// 1 -> 128, K 3, s 1 0.172-0.176 vs 0.158-0.160 (padding 1) and 0.183 vs 0.189-0.193 (none),
// 64 channels 0.045-0.047 vs 0.031-0.034. Not where the tensor cores are off.
bool encoder_wgmma_wins(const Conv1dParams& p) {
  if (const auto forced = forced_by(encoder_wgmma_slot().load())) return *forced;
  if (wgmma_policy() == WgmmaPolicy::kNever) return false;
  const std::int64_t taps = (p.kernel_size + p.stride - 1) / p.stride;
  return p.stride >= 2 && p.stride <= 4 && taps >= 2 && p.out_channels / p.groups >= 256 &&
         conv1d_encoder_wgmma_items(p) >= 2LL * num_sms();
}

// The pointwise tensor-core kernel (activations split in registers, 3xFP16) where it measured
// faster than the shared-memory-operand kernel on the H200 (log step 120 in
// docs/performance.md, ms, pointwise vs SS kernel, one call of two rounds): 192 input channels
// per group and more (tcn_pointwise 0.293 vs 0.397, x_pw_odd 0.298 vs 0.455, 4 x 512 -> 512 0.295
// vs 0.397, 2 x 1024 -> 256 0.148 vs 0.221, 16 x 256 -> 128 0.199 vs 0.228, 8 x 256 -> 256 0.195
// vs 0.225, 8 x 192 -> 256 0.171 vs 0.181) and one column tile (8 x 128 -> 64 on 65536 frames
// 0.173 vs 0.223). Shallower reductions over several column tiles copy and split too little per
// tile to repay it: 16 x 128 -> 256 0.268 vs 0.247, 8 x 128 -> 128 0.149 vs 0.138, 16 x 64 -> 256
// 0.226 vs 0.167. Its 64-column tiles at least 3/4 used, its tiles filling the GPU twice; not
// where the tensor cores are off. CONVBANK_CUDA_PW=0|1 (set_pointwise_wgmma_policy) for A/B runs
// and tests.
bool pointwise_wgmma_wins(const Conv1dParams& p) {
  if (const auto forced = forced_by(pointwise_wgmma_policy())) return *forced;
  if (wgmma_policy() == WgmmaPolicy::kNever) return false;
  const std::int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  return (cin_g >= 192 || cout_g <= 64) && wgmma_wins(cout_g, false) &&
         conv1d_pointwise_wgmma_tiles(p) >= 2LL * num_sms();
}

// CONVBANK_CUDA_DECODER_WGMMA=0: the tensor-core decoder kernel off, for both layer kinds.
bool decoder_wgmma_off() {
  static const bool off = env_off("CONVBANK_CUDA_DECODER_WGMMA");
  return off;
}

// The tensor-core decoder (conv_decoder_wgmma.cu) where its 128-frame tiles fill the GPU, except
// for the FFMA decoder's best case: one output channel per group, K <= 16, and its 1024-block
// tiles filling their waves (two resident per multiprocessor) to 90 % or more. On the H200
// (log step 83 in docs/performance.md, ms, tensor cores vs FFMA decoder): 16 x 512 -> 1, K 16,
// s 8 on 16383 frames (0.97 waves) 0.216 vs 0.202, 16384 frames 0.216 vs 0.193, 64 x 512 -> 1
// on 4096 frames (0.97) 0.215 vs 0.204; on 20000 frames (1.18 waves) 0.254 vs 0.303, 8 x 256 ->
// 1 on 40000 frames (1.18) 0.137 vs 0.156; 512 -> 2, K 8, s 4 0.215 vs 0.251; 256 -> 1, K 20,
// s 10 0.132 vs 0.178 (two warpgroups per block since log step 85: dec_tasnet 0.222 vs 0.203,
// K 20 0.105). With its input through the copy engine (more than 64 channels per group, log
// step 90) it beats the FFMA decoder's best case too: dec_tasnet 0.171 vs 0.206, 16384 frames
// 0.171 vs 0.193 (check of bbb8418). CONVBANK_CUDA_DECODER_WGMMA=0 turns it off (read once);
// CONVBANK_CUDA_WGMMA=1 takes it wherever it applies, =0 never.
bool decoder_wgmma_wins(const ConvTranspose1dParams& p) {
  if (decoder_wgmma_off()) return false;
  if (const auto forced = policy_forces()) return *forced;
  // 32 outputs (pointwise layers) stay on the stride-1 rule's kernel.
  if (p.out_channels / p.groups >= 32) return false;
  const std::int64_t blocks = (p.out_frames + p.padding) / p.stride + 1;
  if (p.batch * p.groups * ((blocks + 127) / 128) < num_sms()) return false;
  if (conv_transpose1d_decoder_wgmma_tma_shape(p)) return true;
  const bool ffma_best = p.out_channels == p.groups && p.kernel_size <= 16 &&
                         conv_transpose1d_decoder_supported(p) &&
                         conv_transpose1d_decoder_wave_fill(p) >= 0.9;
  return !ffma_best;
}

// Stride-1 Conv1d layers of few outputs (a vocoder's last layer, 32 -> 1, K 7) on the same
// tensor-core decoder kernel where they have at least 16 inputs per group. Its reduction runs
// in whole groups of 64 channels, so 8 inputs per group leave 7/8 of its work padding. On the
// H200 (log step 84 in docs/performance.md, ms, against conv1d_direct_coalesced): 8 x 32 -> 1
// on 131072 frames 0.105 vs 0.243, 64 -> 1 0.125 vs 0.476, 32 -> 4 0.108 vs 0.426, 512 -> 1,
// K 1 0.195 vs 0.852, 16 -> 2, K 15 0.091 vs 0.234, 1 x 32 -> 1 on 2048 frames 0.012 vs 0.080;
// but 8 -> 1 0.094 vs 0.068 and 8 groups of 8 -> 1 0.406 vs 0.220. Shorter rows of little work
// take conv1d_direct_flat first. CONVBANK_CUDA_DECODER_WGMMA=0 turns it off too.
bool few_outputs_wgmma_wins(const Conv1dParams& p) {
  if (decoder_wgmma_off() || p.out_channels / p.groups >= 32) return false;
  if (const auto forced = policy_forces()) return *forced;
  return p.in_channels / p.groups >= 16;
}

// Tensor-core kernel names: the register-fragment kernel (128 frames x 64 channels, ss_tile 0)
// or the shared-memory-operand kernel (channels x frames, ss_tile = wgmma_ss_tile()), whose
// products are fp16 pairs where `half` (wgmma_ss_half()). The phase convolutions run only on the
// former, depth-to-space only on the latter.
enum class WgmmaKind { kConv, kS2d, kTransposed, kPhase, kD2s, kTaps, kTransposedTaps };
const char* wgmma_name(WgmmaKind kind, int ss_tile, bool half = false) {
  static constexpr const char* kNames[3][3] = {
      {"conv1d_wgmma_3xtf32_128x64", "conv1d_wgmma_ss_3xtf32_64x256",
       "conv1d_wgmma_ss_3xtf32_128x128"},
      {"conv1d_s2d_wgmma_3xtf32_128x64", "conv1d_s2d_wgmma_ss_3xtf32_64x256",
       "conv1d_s2d_wgmma_ss_3xtf32_128x128"},
      {"conv_transpose1d_wgmma_3xtf32_128x64", "conv_transpose1d_wgmma_ss_3xtf32_64x256",
       "conv_transpose1d_wgmma_ss_3xtf32_128x128"}};
  static constexpr const char* kHalfNames[3][2] = {
      {"conv1d_wgmma_ss_3xfp16_64x256", "conv1d_wgmma_ss_3xfp16_128x128"},
      {"conv1d_s2d_wgmma_ss_3xfp16_64x256", "conv1d_s2d_wgmma_ss_3xfp16_128x128"},
      {"conv_transpose1d_wgmma_ss_3xfp16_64x256", "conv_transpose1d_wgmma_ss_3xfp16_128x128"}};
  half = half && ss_tile != 0;
  switch (kind) {
    case WgmmaKind::kPhase:
      return "conv_transpose1d_phase_wgmma_3xtf32_128x64";
    case WgmmaKind::kD2s:
      if (half) {
        return ss_tile == 64 ? "conv_transpose1d_d2s_wgmma_ss_3xfp16_64x256"
                             : "conv_transpose1d_d2s_wgmma_ss_3xfp16_128x128";
      }
      return ss_tile == 64 ? "conv_transpose1d_d2s_wgmma_ss_3xtf32_64x256"
                           : "conv_transpose1d_d2s_wgmma_ss_3xtf32_128x128";
    case WgmmaKind::kTaps:
      return ss_tile == 64 ? "conv1d_taps_wgmma_ss_3xtf32_64x256"
                           : "conv1d_taps_wgmma_ss_3xtf32_128x128";
    case WgmmaKind::kTransposedTaps:
      return ss_tile == 64 ? "conv_transpose1d_taps_wgmma_ss_3xtf32_64x256"
                           : "conv_transpose1d_taps_wgmma_ss_3xtf32_128x128";
    default:
      return half ? kHalfNames[static_cast<int>(kind)][ss_tile / 64 - 1]
                  : kNames[static_cast<int>(kind)][ss_tile / 64];
  }
}

// A strided ConvTranspose1d as one depth-to-space convolution on the shared-memory-operand
// kernel (conv_transpose1d_d2s_supported()) wherever it applies: against the phase
// convolutions, up2x 0.230 vs 0.446 ms, x_up4x 0.59 vs 0.80, x_grouped_t 0.69 vs 0.95; against
// the FFMA phase GEMM, dec_stft512 0.133 vs 0.279; against the decoder kernels (out/groups <= 4,
// rows half used), 512 -> 4 K16 s8 0.88 vs 1.03, 64 -> 4 0.21 vs 0.36, and a small 24 -> 4
// 0.030 vs 0.027 (2026-11-30). CONVBANK_CUDA_D2S=0 turns it off (read once).
bool d2s_on() {
  static const bool off = env_off("CONVBANK_CUDA_D2S");
  return !off;
}

struct Choice {
  Family family;
  GemmTile tile;
  const char* name;
  int split = 1;
  // Padding other than zeros on a kernel that pads with zeros: run it with zeros, then
  // recompute the outputs whose window reaches into the padding (launch_conv1d_padding_edges).
  bool edges = false;
};

// Benchmarking knobs, read once (env_int): CONVBANK_CUDA_PHASE_TILE=128|64|32 and
// CONVBANK_CUDA_PHASE_SPLIT=1..8 force the transposed phase GEMM's tile rows and split.

const char* phase_split_name(GemmTile tile, int split) {
  static const auto names = [] {
    std::array<std::array<std::string, kMaxSplit + 1>, 3> n;
    const char* rows[3] = {"128", "64", "32"};
    for (int t = 0; t < 3; ++t) {
      for (int k = 0; k <= kMaxSplit; ++k) {
        n[t][k] = std::string("conv_transpose1d_phase_gemm_v2_ffma_") + rows[t] + "x128_split" +
                  std::to_string(k);
      }
    }
    return n;
  }();
  const int t = tile == GemmTile::k128x128 ? 0 : tile == GemmTile::k64x128 ? 1 : 2;
  return names[t][split].c_str();
}

// Reduction split of the phase GEMM: minimises waves x (steps per slice + a fixed cost for
// the prologue and the cluster reduction), with at least 8 steps per slice; ties keep the
// smaller split. Blocks per multiprocessor follow the kernels' launch bounds (256 threads: 2,
// 128 threads: 4), so a wave of either 8x8-per-thread tile costs the same per step and the
// costs of the 128- and 64-row tiles compare directly. Returns {split, cost}.
std::pair<int, std::int64_t> pick_split(GemmTile tile, std::int64_t blocks, int steps) {
  const std::int64_t slots =
      static_cast<std::int64_t>(num_sms()) * (tile == GemmTile::k128x128 ? 2 : 4);
  auto cost = [&](std::int64_t k) {
    const std::int64_t waves = (blocks * k + slots - 1) / slots;
    return waves * ((steps + k - 1) / k + 6);
  };
  if (!cluster_launch_supported()) return {1, cost(1)};
  static const int forced = env_int("CONVBANK_CUDA_PHASE_SPLIT");
  if (forced >= 1) {
    const int k = forced < kMaxSplit ? forced : kMaxSplit;
    return {k, cost(k)};
  }
  int best = 1;
  for (int k = 2; k <= kMaxSplit && steps / k >= 8; ++k) {
    if (cost(k) < cost(best)) best = k;
  }
  return {best, cost(best)};
}

const char* gemm_name(bool transposed, GemmTile tile) {
  if (transposed) {
    switch (tile) {
      case GemmTile::k128x128:
        return "conv_transpose1d_polyphase_gemm_ffma_128x128";
      case GemmTile::k64x128:
        return "conv_transpose1d_polyphase_gemm_ffma_64x128";
      case GemmTile::k32x128:
        return "conv_transpose1d_polyphase_gemm_ffma_32x128";
      case GemmTile::k16x128:
        return "conv_transpose1d_polyphase_gemm_ffma_16x128";
    }
  }
  switch (tile) {
    case GemmTile::k128x128:
      return "conv1d_implicit_gemm_ffma_128x128";
    case GemmTile::k64x128:
      return "conv1d_implicit_gemm_ffma_64x128";
    case GemmTile::k32x128:
      return "conv1d_implicit_gemm_ffma_32x128";
    case GemmTile::k16x128:
      return "conv1d_implicit_gemm_ffma_16x128";
  }
  return "?";
}

const char* gemm2_name(bool transposed, GemmTile tile) {
  switch (tile) {
    case GemmTile::k128x128:
      return transposed ? "conv_transpose1d_phase_gemm_v2_ffma_128x128"
                        : "conv1d_gemm_v2_ffma_128x128";
    case GemmTile::k64x128:
      return transposed ? "conv_transpose1d_phase_gemm_v2_ffma_64x128"
                        : "conv1d_gemm_v2_ffma_64x128";
    case GemmTile::k32x128:
    case GemmTile::k16x128:
      break;
  }
  return transposed ? "conv_transpose1d_phase_gemm_v2_ffma_32x128" : "conv1d_gemm_v2_ffma_32x128";
}

// GEMM v2 tile: 128 rows unless that pads the rows by more than an eighth (e.g. 514 -> 640) or
// leaves fewer than 1.5 blocks per multiprocessor; 32 rows only when 64 would not fill the GPU.
GemmTile pick_tile_v2(std::int64_t rows, std::int64_t cols, std::int64_t batch_groups) {
  const std::int64_t col_tiles = (cols + 127) / 128;
  auto tiles = [&](std::int64_t bm) { return (rows + bm - 1) / bm; };
  auto blocks = [&](std::int64_t bm) { return tiles(bm) * col_tiles * batch_groups; };
  const std::int64_t sms = num_sms();
  GemmTile tile = rows > 64   ? GemmTile::k128x128
                  : rows > 32 ? GemmTile::k64x128
                              : GemmTile::k32x128;
  if (tile == GemmTile::k128x128 &&
      (tiles(128) * 128 - rows > rows / 8 || 2 * blocks(128) < 3 * sms)) {
    tile = GemmTile::k64x128;
  }
  if (tile == GemmTile::k64x128 && blocks(64) < sms) tile = GemmTile::k32x128;
  return tile;
}

// The largest tile that still gives about two blocks per multiprocessor.
GemmTile pick_tile(std::int64_t rows, std::int64_t cols, std::int64_t batch_groups) {
  GemmTile tile = rows > 64   ? GemmTile::k128x128
                  : rows > 32 ? GemmTile::k64x128
                  : rows > 16 ? GemmTile::k32x128
                              : GemmTile::k16x128;
  const std::int64_t col_tiles = (cols + 127) / 128;
  auto blocks = [&](std::int64_t bm) { return ((rows + bm - 1) / bm) * col_tiles * batch_groups; };
  const std::int64_t want = 2LL * num_sms();
  if (tile == GemmTile::k128x128 && blocks(128) < want) tile = GemmTile::k64x128;
  if (tile == GemmTile::k64x128 && blocks(64) < want) tile = GemmTile::k32x128;
  // Benchmarking knob: CONVBANK_CUDA_GEMM_TILE=128|64|32|16 forces the tile rows (read once).
  static const int forced = [] {
    const char* v = std::getenv("CONVBANK_CUDA_GEMM_TILE");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  switch (forced) {
    case 128:
      return GemmTile::k128x128;
    case 64:
      return GemmTile::k64x128;
    case 32:
      return GemmTile::k32x128;
    case 16:
      return GemmTile::k16x128;
    default:
      break;
  }
  return tile;
}

Conv1dParams with_zeros_padding(const Conv1dParams& p) {
  Conv1dParams z = p;
  z.padding_mode = PaddingMode::kZeros;
  return z;
}

Choice choose_zeros_or_native(const Conv1dParams& p);

// Reflect, replicate and circular padding change only the outputs whose window reaches into
// the padding: the tensor-core kernels and GEMM v2, which pad with zeros, run such layers
// with zeros and a small kernel recomputes those edge outputs (pad_left + pad_right per row at
// stride 1). The kernels that take padding modes themselves keep them. CONVBANK_CUDA_EDGES=0
// turns this off (read once).
Choice choose(const Conv1dParams& p) {
  static const bool off = env_off("CONVBANK_CUDA_EDGES");
  if (!off && p.padding_mode != PaddingMode::kZeros && (p.pad_left > 0 || p.pad_right > 0)) {
    Choice z = choose_zeros_or_native(with_zeros_padding(p));
    if (z.family == Family::kWgmma || z.family == Family::kGemm2 ||
        z.family == Family::kDecoderWgmma || z.family == Family::kTaps ||
        z.family == Family::kPointwise) {
      z.edges = true;
      return z;
    }
  }
  return choose_zeros_or_native(p);
}

Choice choose_zeros_or_native(const Conv1dParams& p) {
  const std::int64_t cin_g = p.in_channels / p.groups;
  const std::int64_t cout_g = p.out_channels / p.groups;
  // Short rows of little work (a streaming chunk): one thread per output beats the tiled
  // kernels, whose 128-frame tiles would be mostly empty (1 -> 512 K16 s8 on 33 frames: 10 us
  // as a GEMM, and 4096 near-empty blocks on the per-row direct kernel at batch 8).
  const std::int64_t outputs = p.batch * p.out_channels * p.out_frames;
  if (p.out_frames <= 128 && outputs * cin_g * p.kernel_size <= kTinyConvFmas) {
    return {Family::kDirectFlat, GemmTile::k128x128, "conv1d_direct_flat"};
  }
  const std::int64_t fmas = outputs * cin_g * p.kernel_size;
  // Strided layers whose kernel is whole strides long, as a stride-1 convolution over stride x
  // channels on the shared-memory-operand kernel (space-to-depth), where that beats the
  // register-fragment kernel (s2d_first).
  if (p.stride > 1 && s2d_first(p) && s2d_wins(p) && conv1d_s2d_supported(p)) {
    const int s2d_tile = conv1d_s2d_ss_tile(p);
    if (s2d_tile != 0 && use_wgmma(fmas, cout_g, true)) {
      return {Family::kS2d, GemmTile::k128x128,
              wgmma_name(WgmmaKind::kS2d, s2d_tile, conv1d_s2d_ss_half(p))};
    }
  }
  const int ss = conv1d_ss_tile(p);
  // Layers whose taps the SS kernel's stages do not hold, as groups of taps on it
  // (tap_groups in conv_wgmma.cu) before the register-fragment kernel or the FFMA kernels:
  // 1.4-5.6x faster than those on the 13 layers of log step 89.
  if (ss == 0 && conv1d_tap_groups_supported(p) && use_wgmma(fmas, cout_g, true)) {
    return {Family::kTaps, GemmTile::k128x128,
            wgmma_name(WgmmaKind::kTaps, conv1d_tap_groups_ss_tile(p))};
  }
  if (p.kernel_size == 1 && pointwise_wgmma_wins(p) && conv1d_pointwise_wgmma_supported(p)) {
    return {Family::kPointwise, GemmTile::k128x128, "conv1d_pointwise_wgmma_3xfp16"};
  }
  const bool tensor_cores = use_wgmma(fmas, cout_g, ss != 0);
  if (tensor_cores && conv1d_wgmma_supported(p)) {
    return {Family::kWgmma, GemmTile::k128x128,
            wgmma_name(WgmmaKind::kConv, ss, conv1d_ss_half(p))};
  }
  if (s2d_wins(p) && conv1d_s2d_supported(p)) {
    const int s2d_tile = conv1d_s2d_ss_tile(p);
    if (use_wgmma(fmas, cout_g, s2d_tile != 0)) {
      return {Family::kS2d, GemmTile::k128x128,
              wgmma_name(WgmmaKind::kS2d, s2d_tile, conv1d_s2d_ss_half(p))};
    }
  }
  if (few_outputs_wgmma_wins(p) && conv1d_few_outputs_wgmma_supported(p)) {
    return {Family::kDecoderWgmma, GemmTile::k128x128, "conv1d_few_outputs_wgmma_3xtf32"};
  }
  if (p.kernel_size == 3 && p.stride == 1 && p.dilation == 1 && cin_g >= 16 && cout_g >= 32) {
    return {Family::kWinograd, GemmTile::k128x128, "conv1d_winograd_f43_ffma"};
  }
  if (cin_g == 1 && encoder_wgmma_wins(p) && conv1d_encoder_wgmma_supported(p)) {
    return {Family::kEncoderWgmma, GemmTile::k128x128, "conv1d_encoder_wgmma_3xtf32"};
  }
  if (cin_g == 1 && conv1d_encoder2_supported(p) && encoder2_wins(p)) {
    return {Family::kEncoder2, GemmTile::k128x128, "conv1d_encoder_aligned_ffma"};
  }
  if (cin_g == 1 && cout_g >= 16 && conv1d_encoder_local_supported(p) && encoder_local_wins(p)) {
    return {Family::kEncoderLocal, GemmTile::k128x128, "conv1d_encoder_local_ffma"};
  }
  if (cin_g == 1 && cout_g >= 16 && conv1d_encoder_supported(p)) {
    return {Family::kEncoder, GemmTile::k128x128, "conv1d_encoder_ffma"};
  }
  if (cin_g == 1 && cout_g < 16 && conv1d_depthwise_supported(p)) {
    return {Family::kDepthwise, GemmTile::k128x128, "conv1d_depthwise_staged"};
  }
  if (cout_g <= 4) return {Family::kDirect, GemmTile::k128x128, "conv1d_direct_coalesced"};
  if (conv1d_gemm_v2_supported(p)) {
    const GemmTile tile = pick_tile_v2(cout_g, p.out_frames, p.batch * p.groups);
    return {Family::kGemm2, tile, gemm2_name(false, tile)};
  }
  const GemmTile tile = pick_tile(cout_g, p.out_frames, p.batch * p.groups);
  return {Family::kGemm, tile, gemm_name(false, tile)};
}

Choice choose(const ConvTranspose1dParams& p) {
  const std::int64_t cin_g = p.in_channels / p.groups;
  const std::int64_t cout_g = p.out_channels / p.groups;
  // Each output sums K / stride taps of every input channel of its group.
  const std::int64_t fmas = p.batch * p.out_channels * p.out_frames * cin_g *
                            std::max<std::int64_t>(1, p.kernel_size / p.stride);
  if (p.stride > 1 && d2s_on()) {
    // Depth-to-space: s x out/groups rows of ceil(K / s) taps.
    const std::int64_t rows = p.stride * cout_g;
    if (use_wgmma(p.batch * p.out_channels * p.out_frames * cin_g * d2s_taps(p), rows, true) &&
        conv_transpose1d_d2s_supported(p)) {
      return {
          Family::kD2s, GemmTile::k128x128,
          wgmma_name(WgmmaKind::kD2s, conv_transpose1d_ss_tile(p), conv_transpose1d_ss_half(p))};
    }
  }
  if (decoder_wgmma_wins(p) && conv_transpose1d_decoder_wgmma_supported(p)) {
    return {Family::kDecoderWgmma, GemmTile::k128x128, "conv_transpose1d_decoder_wgmma_3xtf32"};
  }
  const int ss = p.stride == 1 ? conv_transpose1d_ss_tile(p) : 0;
  // As for Conv1d: taps that the SS kernel's stages do not hold, as groups of taps on it.
  if (p.stride == 1 && ss == 0 && conv_transpose1d_tap_groups_supported(p) &&
      use_wgmma(fmas, cout_g, true)) {
    return {Family::kTaps, GemmTile::k128x128,
            wgmma_name(WgmmaKind::kTransposedTaps, conv_transpose1d_tap_groups_ss_tile(p))};
  }
  if (use_wgmma(fmas, cout_g, p.stride > 1 || ss != 0) && conv_transpose1d_wgmma_supported(p)) {
    return {Family::kWgmma, GemmTile::k128x128,
            wgmma_name(p.stride == 1 ? WgmmaKind::kTransposed : WgmmaKind::kPhase, ss,
                       p.stride == 1 && conv_transpose1d_ss_half(p))};
  }
  if (p.kernel_size == 3 && p.stride == 1 && p.dilation == 1 && cin_g >= 16 && cout_g >= 32) {
    return {Family::kWinograd, GemmTile::k128x128, "conv_transpose1d_winograd_f43_ffma"};
  }
  if (cout_g <= 4 && conv_transpose1d_decoder_supported(p) &&
      conv_transpose1d_decoder_blocks(p) >= num_sms()) {
    return {Family::kDecoder, GemmTile::k128x128, "conv_transpose1d_decoder_ffma"};
  }
  if (cout_g <= 4 && conv_transpose1d_splitk_supported(p)) {
    return {Family::kSplitK, GemmTile::k128x128, "conv_transpose1d_polyphase_splitk"};
  }
  if (conv_transpose1d_gemm_v2_supported(p)) {
    const std::int64_t q0 = p.padding / p.stride;
    const std::int64_t cols = (p.out_frames - 1 + p.padding) / p.stride - q0 + 1;
    GemmTile tile = pick_tile_v2(p.stride, cols, p.batch * p.groups);
    auto blocks = [&](GemmTile t) {
      const std::int64_t bm = t == GemmTile::k128x128 ? 128 : t == GemmTile::k64x128 ? 64 : 32;
      return (p.stride + bm - 1) / bm * ((cols + 127) / 128) * p.batch * p.groups;
    };
    const int steps = conv_transpose1d_gemm_v2_steps(p);
    auto [split, cost] = pick_split(tile, blocks(tile), steps);
    // Split over clusters, the 128-row tile (more reuse per load) where it costs no more waves
    // and pads the phases by at most an eighth (measured on dec_stft512: 0.33 vs 0.37 ms).
    if (split > 1 && tile == GemmTile::k64x128 &&
        (p.stride + 127) / 128 * 128 - p.stride <= p.stride / 8) {
      const auto [split128, cost128] =
          pick_split(GemmTile::k128x128, blocks(GemmTile::k128x128), steps);
      if (cost128 <= cost) {
        tile = GemmTile::k128x128;
        split = split128;
      }
    }
    static const int forced_tile = env_int("CONVBANK_CUDA_PHASE_TILE");
    if (forced_tile == 128 || forced_tile == 64 || forced_tile == 32) {
      tile = forced_tile == 128  ? GemmTile::k128x128
             : forced_tile == 64 ? GemmTile::k64x128
                                 : GemmTile::k32x128;
      split = pick_split(tile, blocks(tile), steps).first;
    }
    if (split > 1) return {Family::kGemm2, tile, phase_split_name(tile, split), split};
    return {Family::kGemm2, tile, gemm2_name(true, tile)};
  }
  if (cout_g <= 4 && conv_transpose1d_narrow_supported(p)) {
    return {Family::kNarrow, GemmTile::k128x128, "conv_transpose1d_polyphase_narrow"};
  }
  if (p.stride == 1 || p.dilation == 1) {
    const std::int64_t rows = cout_g * p.stride;
    if (rows > 4) {
      const std::int64_t cols =
          (p.out_frames - 1 + p.padding) / p.stride - p.padding / p.stride + 1;
      const GemmTile tile = pick_tile(rows, cols, p.batch * p.groups);
      return {Family::kGemm, tile, gemm_name(true, tile)};
    }
  }
  return {Family::kDirect, GemmTile::k128x128, "conv_transpose1d_direct_gather"};
}

std::string dims(std::int64_t n, std::int64_t cin, std::int64_t cout, std::int64_t fin,
                 std::int64_t fout, std::int64_t k, std::int64_t s, std::int64_t d,
                 std::int64_t g) {
  return "(N " + std::to_string(n) + ", Cin " + std::to_string(cin) + " -> Cout " +
         std::to_string(cout) + ", frames " + std::to_string(fin) + " -> " + std::to_string(fout) +
         ", K " + std::to_string(k) + ", stride " + std::to_string(s) + ", dilation " +
         std::to_string(d) + ", groups " + std::to_string(g);
}

}  // namespace

std::string shape_text(const Conv1dParams& p) {
  return dims(p.batch, p.in_channels, p.out_channels, p.in_frames, p.out_frames, p.kernel_size,
              p.stride, p.dilation, p.groups) +
         ", pad " + std::to_string(p.pad_left) + "+" + std::to_string(p.pad_right) + " " +
         to_string(p.padding_mode) + ")";
}

std::string shape_text(const ConvTranspose1dParams& p) {
  return dims(p.batch, p.in_channels, p.out_channels, p.in_frames, p.out_frames, p.kernel_size,
              p.stride, p.dilation, p.groups) +
         ", padding " + std::to_string(p.padding) + ", output_padding " +
         std::to_string(p.output_padding) + ")";
}

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
  }
}

void check_launch(const char* kernel, const LaunchShape& shape) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA: kernel ") + kernel + " failed to launch for " + shape.text() +
                ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

void set_wgmma_policy(WgmmaPolicy policy) {
  policy_slot().store(policy);
}
WgmmaPolicy wgmma_policy() {
  return policy_slot().load();
}
void set_encoder_aligned_policy(WgmmaPolicy policy) {
  encoder_aligned_slot().store(policy);
}
WgmmaPolicy encoder_aligned_policy() {
  return encoder_aligned_slot().load();
}
void set_encoder_local_policy(WgmmaPolicy policy) {
  encoder_local_slot().store(policy);
}
WgmmaPolicy encoder_local_policy() {
  return encoder_local_slot().load();
}
void set_encoder_wgmma_policy(WgmmaPolicy policy) {
  encoder_wgmma_slot().store(policy);
}
WgmmaPolicy encoder_wgmma_policy() {
  return encoder_wgmma_slot().load();
}

const char* conv1d_kernel_name(const Conv1dParams& p) {
  return choose(p).name;
}
const char* conv_transpose1d_kernel_name(const ConvTranspose1dParams& p) {
  return choose(p).name;
}

namespace {

// The chosen kernel family's launch (the padding edges aside).
void launch_conv1d(const Choice& c, const Conv1dParams& p, TensorView<const float> input,
                   const float* weight, const float* bias, TensorView<float> output,
                   cudaStream_t s) {
  switch (c.family) {
    case Family::kWgmma:
      launch_conv1d_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kS2d:
      launch_conv1d_s2d_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kTaps:
      launch_conv1d_tap_groups_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kWinograd:
      launch_conv1d_winograd(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kGemm:
      launch_conv1d_gemm(p, input, weight, bias, output, s, c.tile, c.name);
      break;
    case Family::kGemm2:
      launch_conv1d_gemm_v2(p, input, weight, bias, output, s, c.tile, c.name);
      break;
    case Family::kDirectFlat:
      launch_conv1d_direct_flat(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kEncoder:
      launch_conv1d_encoder(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kEncoder2:
      launch_conv1d_encoder2(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kEncoderLocal:
      launch_conv1d_encoder_local(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kEncoderWgmma:
      launch_conv1d_encoder_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kPointwise:
      launch_conv1d_pointwise_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kDepthwise:
      launch_conv1d_depthwise(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kDecoderWgmma:
      launch_conv1d_few_outputs_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kDirect:
    case Family::kNarrow:
    case Family::kSplitK:
    case Family::kDecoder:
    case Family::kD2s:
      launch_conv1d_direct(p, input, weight, bias, output, s, c.name);
      break;
  }
}

}  // namespace

void conv1d(const Conv1dParams& p, TensorView<const float> input, const float* weight,
            const float* bias, TensorView<float> output, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Choice c = choose(p);
  if (!c.edges) {
    launch_conv1d(c, p, input, weight, bias, output, s);
    return;
  }
  // The layer with zeros padding, then its edge outputs with the layer's own padding mode.
  launch_conv1d(c, with_zeros_padding(p), input, weight, bias, output, s);
  launch_conv1d_padding_edges(p, input, weight, bias, output, s, "conv1d_padding_edges");
}

void conv_transpose1d(const ConvTranspose1dParams& p, TensorView<const float> input,
                      const float* weight, const float* bias, TensorView<float> output,
                      void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Choice c = choose(p);
  switch (c.family) {
    case Family::kWgmma:
      launch_conv_transpose1d_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kD2s:
      launch_conv_transpose1d_d2s_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kWinograd:
      launch_conv_transpose1d_winograd(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kGemm:
      launch_conv_transpose1d_gemm(p, input, weight, bias, output, s, c.tile, c.name);
      break;
    case Family::kDirect:
    case Family::kDirectFlat:
    case Family::kEncoder:
    case Family::kEncoder2:
    case Family::kEncoderLocal:
    case Family::kEncoderWgmma:
    case Family::kPointwise:
    case Family::kDepthwise:
    case Family::kS2d:
      launch_conv_transpose1d_direct(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kTaps:
      launch_conv_transpose1d_tap_groups_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kDecoder:
      launch_conv_transpose1d_decoder(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kDecoderWgmma:
      launch_conv_transpose1d_decoder_wgmma(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kNarrow:
      launch_conv_transpose1d_narrow(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kSplitK:
      launch_conv_transpose1d_splitk(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kGemm2:
      launch_conv_transpose1d_gemm_v2(p, input, weight, bias, output, s, c.tile, c.split, c.name);
      break;
  }
}

}  // namespace convbank::detail::cuda
