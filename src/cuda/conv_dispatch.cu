// Host side of the CUDA convolutions: picks a kernel per shape (dispatch rules below, the
// chosen name is what conv1d_kernel_name() reports), launches it on the caller's stream and
// checks the launch. No device-wide synchronization, no allocation.
//
// Conv1d:
//   K = 3, stride 1, dilation 1, in/groups >= 16, out/groups >= 32
//                                  -> conv1d_winograd_f43_ffma
//   out/groups <= 4 (depthwise, few outputs per group)
//                                  -> conv1d_direct_coalesced
//   zeros padding (or none), in/groups * K >= 32 (pointwise, large-stride encoders, ...)
//                                  -> conv1d_gemm_v2_ffma_{128,64,32}x128
//   otherwise                      -> conv1d_implicit_gemm_ffma_{128,64,32,16}x128 (rows =
//                                     out/groups; a smaller tile when the grid would not fill
//                                     the GPU twice)
// ConvTranspose1d:
//   stride 1, dilation 1, K = 3, in/groups >= 16, out/groups >= 32
//                                  -> conv_transpose1d_winograd_f43_ffma
//   dilation 1, stride 2..16, K % stride == 0, K / stride <= 4, out/groups <= 4 (decoders)
//                                  -> conv_transpose1d_polyphase_splitk
//   out/groups == 1, dilation 1, stride >= 32, K % stride == 0 (STFT-like synthesis)
//                                  -> conv_transpose1d_phase_gemm_v2_ffma_{128,64,32}x128
//   dilation 1, stride >= 2, out/groups <= 4 (other decoders)
//                                  -> conv_transpose1d_polyphase_narrow
//   dilation 1 or stride 1, rows = out/groups * phases > 4
//                                  -> conv_transpose1d_polyphase_gemm_ffma_*x128
//   otherwise                      -> conv_transpose1d_direct_gather
#include <cstdlib>
#include <string>

#include "cuda/conv_common.cuh"
#include "cuda/dispatch.hpp"

namespace convbank::detail::cuda {

namespace {

enum class Family { kDirect, kGemm, kGemm2, kWinograd, kNarrow, kSplitK };

struct Choice {
  Family family;
  GemmTile tile;
  const char* name;
};

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

Choice choose(const Conv1dParams& p) {
  const std::int64_t cin_g = p.in_channels / p.groups;
  const std::int64_t cout_g = p.out_channels / p.groups;
  if (p.kernel_size == 3 && p.stride == 1 && p.dilation == 1 && cin_g >= 16 && cout_g >= 32) {
    return {Family::kWinograd, GemmTile::k128x128, "conv1d_winograd_f43_ffma"};
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
  if (p.kernel_size == 3 && p.stride == 1 && p.dilation == 1 && cin_g >= 16 && cout_g >= 32) {
    return {Family::kWinograd, GemmTile::k128x128, "conv_transpose1d_winograd_f43_ffma"};
  }
  if (cout_g <= 4 && conv_transpose1d_splitk_supported(p)) {
    return {Family::kSplitK, GemmTile::k128x128, "conv_transpose1d_polyphase_splitk"};
  }
  if (conv_transpose1d_gemm_v2_supported(p)) {
    const std::int64_t q0 = p.padding / p.stride;
    const std::int64_t cols = (p.out_frames - 1 + p.padding) / p.stride - q0 + 1;
    const GemmTile tile = pick_tile_v2(p.stride, cols, p.batch * p.groups);
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

void check_launch(const char* kernel, const std::string& shape) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA: kernel ") + kernel + " failed to launch for " + shape + ": " +
                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

const char* conv1d_kernel_name(const Conv1dParams& p) {
  return choose(p).name;
}
const char* conv_transpose1d_kernel_name(const ConvTranspose1dParams& p) {
  return choose(p).name;
}

void conv1d(const Conv1dParams& p, TensorView<const float> input, const float* weight,
            const float* bias, TensorView<float> output, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Choice c = choose(p);
  switch (c.family) {
    case Family::kWinograd:
      launch_conv1d_winograd(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kGemm:
      launch_conv1d_gemm(p, input, weight, bias, output, s, c.tile, c.name);
      break;
    case Family::kGemm2:
      launch_conv1d_gemm_v2(p, input, weight, bias, output, s, c.tile, c.name);
      break;
    case Family::kDirect:
    case Family::kNarrow:
    case Family::kSplitK:
      launch_conv1d_direct(p, input, weight, bias, output, s, c.name);
      break;
  }
}

void conv_transpose1d(const ConvTranspose1dParams& p, TensorView<const float> input,
                      const float* weight, const float* bias, TensorView<float> output,
                      void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Choice c = choose(p);
  switch (c.family) {
    case Family::kWinograd:
      launch_conv_transpose1d_winograd(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kGemm:
      launch_conv_transpose1d_gemm(p, input, weight, bias, output, s, c.tile, c.name);
      break;
    case Family::kDirect:
      launch_conv_transpose1d_direct(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kNarrow:
      launch_conv_transpose1d_narrow(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kSplitK:
      launch_conv_transpose1d_splitk(p, input, weight, bias, output, s, c.name);
      break;
    case Family::kGemm2:
      launch_conv_transpose1d_gemm_v2(p, input, weight, bias, output, s, c.tile, c.name);
      break;
  }
}

}  // namespace convbank::detail::cuda
