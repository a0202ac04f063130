#include "cpu/linalg.hpp"

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>

namespace convbank::cpu {

std::vector<double> pinv(const std::vector<double>& a, std::int64_t rows, std::int64_t cols) {
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor> m(a.data(), rows, cols);
  // An SVD rather than a complete orthogonal decomposition: its cut-off is on singular values,
  // which is how NumPy decides rank, so rank-deficient banks (a window with a zero tap) agree.
  // BDCSVD falls back to Jacobi for small matrices and stays fast for K in the hundreds.
  const Eigen::BDCSVD<Eigen::MatrixXd> svd(m, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::VectorXd& s = svd.singularValues();
  const double cutoff = 1e-15 * (s.size() > 0 ? s.maxCoeff() : 0.0);
  Eigen::VectorXd inverse = Eigen::VectorXd::Zero(s.size());
  for (Eigen::Index i = 0; i < s.size(); ++i) {
    if (s(i) > cutoff) inverse(i) = 1.0 / s(i);
  }
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  Eigen::Map<RowMajor> result(out.data(), cols, rows);
  result.noalias() = svd.matrixV() * inverse.asDiagonal() * svd.matrixU().transpose();
  return out;
}

}  // namespace convbank::cpu
