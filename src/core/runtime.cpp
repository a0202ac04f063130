#include "convbank/runtime.hpp"

#include <atomic>
#include <cstdint>
#include <string>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank {

void set_num_threads(int threads) {
  if (threads < 0)
    throw Error("set_num_threads: threads must be >= 0, got " + std::to_string(threads));
  detail::cpu::set_num_threads(threads);
}

namespace {
constexpr std::int64_t kDefaultWorkingSetFrames = std::int64_t{1} << 22;
// Relaxed: a setting read once per forward(), not a synchronization point.
std::atomic<std::int64_t> g_working_set_frames{kDefaultWorkingSetFrames};
}  // namespace

void set_working_set_frames(std::int64_t frames) {
  if (frames < 0) {
    throw Error("set_working_set_frames: frames must be >= 0, got " + std::to_string(frames));
  }
  g_working_set_frames.store(frames == 0 ? kDefaultWorkingSetFrames : frames,
                             std::memory_order_relaxed);
}

std::int64_t working_set_frames() {
  return g_working_set_frames.load(std::memory_order_relaxed);
}

int num_threads() {
  return detail::cpu::num_threads();
}

bool cuda_built() {
  return detail::cuda::built();
}

bool cuda_available() {
  return detail::cuda::available();
}

std::string build_info() {
  return std::string("convbank ") + CONVBANK_VERSION + " (cpu: " + detail::cpu::description() +
         "; cuda: " + detail::cuda::description() + ")";
}

}  // namespace convbank
