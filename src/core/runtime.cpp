#include "convbank/runtime.hpp"

#include <string>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank {

void set_num_threads(int threads) {
  if (threads < 0)
    throw Error("set_num_threads: threads must be >= 0, got " + std::to_string(threads));
  detail::cpu::set_num_threads(threads);
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
