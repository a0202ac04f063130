// libFuzzer target for the safetensors reader: every input must parse or throw convbank::Error,
// and everything a parsed file offers (info, data, tensor) must then work or throw
// convbank::Error. Any other exception escapes to std::terminate, which libFuzzer reports as a
// crash, as it does for sanitizer findings.
//
//   scripts/fuzz-safetensors.sh 180
#include <cstddef>
#include <cstdint>

#include "convbank/error.hpp"
#include "convbank/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto st = convbank::io::Safetensors::parse(data, size, "fuzz");
    for (const auto& key : st.keys()) {
      const convbank::io::SafetensorsInfo& info = st.info(key);
      try {
        // A size that disagrees with the validated shape is a bug even without a crash.
        if (st.data(key).size() != static_cast<std::size_t>(info.numel)) __builtin_trap();
        if (st.tensor(key).numel() != info.numel) __builtin_trap();
      } catch (const convbank::Error&) {
        // Integer dtypes and ranks a Tensor cannot hold are refused by name.
      }
    }
  } catch (const convbank::Error&) {
  }
  return 0;
}
