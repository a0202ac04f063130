// Which CUDA kernel the dispatcher runs for a shape. Host-only and free of CUDA headers so the
// benchmark and the tests can report (and check) the choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "../core/backend.hpp"  // relative: the tests and the benchmark include this header too

namespace convbank::detail::cuda {

// The name of the kernel conv1d()/conv_transpose1d() launch for these parameters, e.g.
// "conv1d_winograd_f43_ffma", "conv1d_implicit_gemm_ffma_128x128",
// "conv_transpose1d_polyphase_gemm_ffma_64x128", "conv1d_direct_coalesced".
const char* conv1d_kernel_name(const Conv1dParams& p);
const char* conv_transpose1d_kernel_name(const ConvTranspose1dParams& p);

// True when the tensor-core (3xTF32 wgmma) kernels can run here: a compute capability 9.0
// device and a build that holds their sm_90a code.
bool wgmma_available();

// When the dispatcher uses the tensor-core kernels: kAuto where they measured faster than the
// FFMA kernels (see conv_dispatch.cu), kAlways wherever they apply (tests, A/B benchmarks),
// kNever. The environment sets the start value: CONVBANK_CUDA_WGMMA=1 always, =0 never.
enum class WgmmaPolicy { kAuto, kAlways, kNever };
void set_wgmma_policy(WgmmaPolicy policy);
WgmmaPolicy wgmma_policy();

// The same three values for the aligned one-channel encoder (conv1d_encoder_aligned_ffma): kAuto
// where it measured faster (see conv_dispatch.cu), kAlways wherever it applies (tests), kNever
// (CONVBANK_CUDA_ENC_ALIGNED=0 sets the start value).
void set_encoder_aligned_policy(WgmmaPolicy policy);
WgmmaPolicy encoder_aligned_policy();
// The same for the local-order encoder (conv1d_encoder_local_ffma; CONVBANK_CUDA_ENC_LOCAL=0|1),
// and its tile for the tests: channels (rounded up to a multiple of 4) x 256 frames_per_lane
// frames (1, 2, or 4 where K <= 16); 0 for either: by the taps (32 x 1024 up to K 16, 64 x 512
// above; CONVBANK_CUDA_ENC_LOCAL_C / _F set the start values). Returns the tile set before.
void set_encoder_local_policy(WgmmaPolicy policy);
WgmmaPolicy encoder_local_policy();
std::pair<int, int> set_encoder_local_tile(int channels, int frames_per_lane);
// The local-order encoder's row alignment in floats (1: none, 8, 16 or 32; 0: the default, 8;
// CONVBANK_CUDA_ENC_LOCAL_ALIGN sets the start value). Returns the value set before.
int set_encoder_local_align(int floats);
// Launches of the local-order encoder with aligned channel tiles so far (the tests count them).
std::uint64_t encoder_local_aligned_launches();
// The same for the tensor-core encoder (conv1d_encoder_wgmma_3xtf32; CONVBANK_CUDA_ENC_WGMMA=0|1),
// and its channels per item for the tests: a power of two times 64, at most what a block's
// weights hold (0: 256; CONVBANK_CUDA_ENC_WGMMA_CH sets the start value). Returns the value set
// before.
void set_encoder_wgmma_policy(WgmmaPolicy policy);
WgmmaPolicy encoder_wgmma_policy();
int set_encoder_wgmma_tile(int channels);

// The same for the pointwise tensor-core kernel (conv1d_pointwise_wgmma_3xfp16;
// CONVBANK_CUDA_PW=0|1), and its launches since the program started (views it cannot read run
// on the shared-memory-operand kernel instead and are not counted).
void set_pointwise_wgmma_policy(WgmmaPolicy policy);
WgmmaPolicy pointwise_wgmma_policy();
std::uint64_t pointwise_wgmma_launches();

// The most bytes of stream-ordered workspace the tap groups (conv1d_taps_*,
// conv_transpose1d_taps_*) hold for the groups' partial outputs, 1 GiB to start with; layers
// whose output is larger run in batch slices (tests set less to check the slices).
void set_tap_groups_workspace_cap(std::size_t bytes);
std::size_t tap_groups_workspace_cap();

// How the launches of the shared-memory-operand tensor-core kernel brought in their input,
// counted since the program started: bulk tensor copies of rows (rows 16-byte aligned), of
// "quad rows" (rows of odd length, four channels per copied row), or the producer's 16-byte
// pieces. A fallback to the pieces computes the same outputs, only slower: the tests count.
struct SsInputCopies {
  std::uint64_t rows = 0, quads = 0, pieces = 0;
  // Of those, the launches whose copies were split into parts (a box holds at most 256 frames),
  // and the most parts one copy had.
  std::uint64_t rows_split = 0, quads_split = 0;
  int max_parts = 0;
  std::uint64_t windowed = 0;    // launches that copied a window per tap (large dilations)
  std::uint64_t two_stages = 0;  // launches with two stages (three did not fit)
};
SsInputCopies ss_input_copies();

// The SS kernel's products in fp16 pairs (3xFP16: the tensor time of 1.5 tf32 products instead
// of 3, at the same accuracy) where a launch's chunk allows it: kAuto where it measured faster
// (to start with; CONVBANK_CUDA_SS_HALF=0 is kNever, =1 kAlways), kAlways wherever it fits. The
// launches that took it since the program started (the tests count).
void set_ss_half_policy(WgmmaPolicy policy);
WgmmaPolicy ss_half_policy();
std::uint64_t ss_half_launches();
// Of those, the launches whose producer warps scaled their own 32 columns (one-tap layers on
// 128 x 128 tiles, WgArgs::warp_scale in conv_wgmma.cu; CONVBANK_CUDA_SS_WARP_SCALE=0 turns it
// off).
std::uint64_t ss_warp_scale_launches();

// The tensor-core decoder's input through the copy engine (bulk tensor copies into a ring of
// stages) where the layer allows it, on to start with unless CONVBANK_CUDA_DECODER_TMA=0; off,
// the consumers load it themselves. The launches that took the copy engine since the program
// started (the tests count).
void set_decoder_tma(bool on);
bool decoder_tma();
std::uint64_t decoder_tma_launches();
// The copy-engine decoder's products of a step as two wgmmas, hi x [small | big] and lo x big,
// instead of three; on to start with unless CONVBANK_CUDA_DECODER_PAIR=0. The copy-engine
// launches that took the pair (the tests count).
void set_decoder_pair(bool on);
bool decoder_pair();
std::uint64_t decoder_pair_launches();
// The copy-engine decoder's wide variant (256-row tiles, four consumer warpgroups): kAuto where
// its tiles load the multiprocessors at least as evenly as 128-row ones
// (CONVBANK_CUDA_DECODER_WIDE=0 is kNever, =1 kAlways), kAlways wherever it fits. The
// copy-engine launches that took it (the tests count).
void set_decoder_wide_policy(WgmmaPolicy policy);
WgmmaPolicy decoder_wide_policy();
std::uint64_t decoder_wide_launches();

}  // namespace convbank::detail::cuda
