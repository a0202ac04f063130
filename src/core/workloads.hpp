// The GPU benchmark shapes of shared/workloads.md, shared by convbank-bench-cuda and the
// full-size GPU tests (`convbank bench`, which uses only the public API, and
// scripts/bench_cpu.py keep their own copies). Columns as in workloads.md: batch, in -> out
// channels, input frames, K, stride, padding, dilation, groups.
#pragma once

#include <cstdint>

#include "convbank/conv.hpp"

namespace convbank::detail {

struct Workload {
  const char* name;
  bool transposed;
  std::int64_t n, cin, cout, frames, k, stride, padding, dilation, groups;
  PaddingMode mode = PaddingMode::kZeros;  // Conv1d only (ConvTranspose1d pads with zeros)
};

inline constexpr Workload kWorkloads[] = {
    {"seedA", false, 32, 64, 128, 131072, 3, 1, 0, 1, 1},
    {"seedB", true, 64, 128, 128, 65536, 3, 1, 0, 1, 1},
    {"enc_tasnet", false, 16, 1, 512, 131072, 16, 8, 0, 1, 1},
    {"dec_tasnet", true, 16, 512, 1, 16383, 16, 8, 0, 1, 1},
    {"enc_stft512", false, 16, 1, 514, 131072, 512, 128, 0, 1, 1},
    {"dec_stft512", true, 16, 514, 1, 1021, 512, 128, 0, 1, 1},
    {"tcn_depthwise", false, 16, 512, 512, 16384, 3, 1, 8, 8, 512},
    {"tcn_pointwise", false, 16, 512, 128, 16384, 1, 1, 0, 1, 1},
    {"up2x", true, 8, 64, 32, 65536, 4, 2, 1, 1, 1},
};

}  // namespace convbank::detail
