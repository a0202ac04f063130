// Dense float64 linear algebra for computing filter-bank weights (src/core/presets.cpp). A
// private interface so that Eigen stays inside src/cpu/*.cpp: callers pass row-major vectors.
#pragma once

#include <cstdint>
#include <vector>

namespace convbank::cpu {

// The Moore-Penrose pseudo-inverse of the row-major (rows x cols) matrix `a`, returned
// row-major (cols x rows). Singular values at or below 1e-15 * the largest are treated as zero,
// numpy.linalg.pinv's default rcond, so rank-deficient banks get the same answer as NumPy.
// Preconditions: rows, cols >= 1, a.size() == rows * cols, every entry finite.
std::vector<double> pinv(const std::vector<double>& a, std::int64_t rows, std::int64_t cols);

}  // namespace convbank::cpu
