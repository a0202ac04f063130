// Stand-in for the CUDA backend in builds without it (CONVBANK_ENABLE_CUDA=OFF, or AUTO with
// no nvcc). Asking for CUDA is then a run-time error, never an #ifdef in user code.
#include <cstring>
#include <string>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank::detail::cuda {

namespace {
[[noreturn]] void unavailable(const char* what) {
  throw Error(std::string(what) +
              ": this convbank was built without CUDA (configure with "
              "-DCONVBANK_ENABLE_CUDA=ON and a CUDA toolkit to use --device cuda)");
}
}  // namespace

bool built() {
  return false;
}
bool available() {
  return false;
}
void* allocate(std::size_t) {
  unavailable("Tensor on cuda");
}
void deallocate(void*) noexcept {}
void copy_2d(void*, std::size_t, const void*, std::size_t, std::size_t, std::size_t, CopyKind) {
  unavailable("copy to or from cuda");
}
void conv1d(const Conv1dParams&, TensorView<const float>, const float*, const float*,
            TensorView<float>, void*) {
  unavailable("Conv1d on cuda");
}
void conv_transpose1d(const ConvTranspose1dParams&, TensorView<const float>, const float*,
                      const float*, TensorView<float>, void*) {
  unavailable("ConvTranspose1d on cuda");
}
void synchronize(void*) {
  unavailable("synchronize cuda");
}
const char* description() {
  return "not built";
}
StreamOp make_op(StreamOp::Kind kind) noexcept {
  StreamOp op;
  std::memset(static_cast<void*>(&op), 0, sizeof(op));
  op.kind = kind;
  return op;
}
StreamContext* stream_context_create(std::size_t, std::size_t, std::size_t, std::size_t) {
  unavailable("stream on cuda");
}
void stream_context_destroy(StreamContext*) noexcept {}
float* stream_context_pinned_in(StreamContext*) noexcept {
  return nullptr;
}
float* stream_context_pinned_out(StreamContext*) noexcept {
  return nullptr;
}
bool stream_context_run(StreamContext*, const StreamOp*, std::size_t, bool, bool) noexcept {
  return false;
}
std::size_t stream_context_graphs(const StreamContext*) noexcept {
  return 0;
}

}  // namespace convbank::detail::cuda

#include "cuda/dispatch.hpp"

namespace convbank::detail::cuda {
const char* conv1d_kernel_name(const Conv1dParams&) {
  return "none (built without CUDA)";
}
bool wgmma_available() {
  return false;
}
void set_wgmma_policy(WgmmaPolicy) {}
void set_encoder_aligned_policy(WgmmaPolicy) {}
WgmmaPolicy encoder_aligned_policy() {
  return WgmmaPolicy::kNever;
}
void set_encoder_local_policy(WgmmaPolicy) {}
WgmmaPolicy encoder_local_policy() {
  return WgmmaPolicy::kNever;
}
std::pair<int, int> set_encoder_local_tile(int, int) {
  return {0, 0};
}
int set_encoder_local_align(int) {
  return 0;
}
std::uint64_t encoder_local_aligned_launches() {
  return 0;
}
WgmmaPolicy wgmma_policy() {
  return WgmmaPolicy::kNever;
}
const char* conv_transpose1d_kernel_name(const ConvTranspose1dParams&) {
  return "none (built without CUDA)";
}
SsInputCopies ss_input_copies() {
  return {};
}
void set_tap_groups_workspace_cap(std::size_t) {}
std::size_t tap_groups_workspace_cap() {
  return 0;
}
void set_ss_half_policy(WgmmaPolicy) {}
WgmmaPolicy ss_half_policy() {
  return WgmmaPolicy::kNever;
}
std::uint64_t ss_half_launches() {
  return 0;
}
std::uint64_t ss_warp_scale_launches() {
  return 0;
}
void set_pointwise_wgmma_policy(WgmmaPolicy) {}
WgmmaPolicy pointwise_wgmma_policy() {
  return WgmmaPolicy::kNever;
}
std::uint64_t pointwise_wgmma_launches() {
  return 0;
}
void set_decoder_tma(bool) {}
bool decoder_tma() {
  return false;
}
std::uint64_t decoder_tma_launches() {
  return 0;
}
void set_decoder_pair(bool) {}
bool decoder_pair() {
  return false;
}
std::uint64_t decoder_pair_launches() {
  return 0;
}
void set_decoder_wide_policy(WgmmaPolicy) {}
WgmmaPolicy decoder_wide_policy() {
  return WgmmaPolicy::kNever;
}
std::uint64_t decoder_wide_launches() {
  return 0;
}
}  // namespace convbank::detail::cuda
