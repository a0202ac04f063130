// CUDA backend: device memory, copies and device discovery. The convolutions are in
// conv_dispatch.cu (host dispatch) and conv_*.cu (kernels).
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank::detail::cuda {

namespace {

void check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error("CUDA: " + what + " failed: " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
  }
}

cudaMemcpyKind to_cuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

}  // namespace

// A memory pool of our own for the kernels' stream-ordered workspaces (Workspace in
// conv_common.cuh: split weight planes and the like), per device, that keeps what it has (the
// default pool would hand memory back at every synchronization, and its settings belong to the
// application).
cudaMemPool_t workspace_pool() {
  constexpr int kMaxDevices = 64;
  static cudaMemPool_t pools[kMaxDevices] = {};
  static std::once_flag once[kMaxDevices];
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (device < 0 || device >= kMaxDevices) throw Error("CUDA: device index out of range");
  std::call_once(once[device], [device] {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    check(cudaMemPoolCreate(&pools[device], &props), "cudaMemPoolCreate");
    std::uint64_t keep = ~std::uint64_t{0};
    check(cudaMemPoolSetAttribute(pools[device], cudaMemPoolAttrReleaseThreshold, &keep),
          "cudaMemPoolSetAttribute");
  });
  return pools[device];
}

bool built() {
  return true;
}

bool available() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later checks start clean
    return false;
  }
  return count > 0;
}

void* allocate(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  return p;
}

void deallocate(void* ptr) noexcept {
  cudaFree(ptr);
}

void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
             std::size_t row_bytes, std::size_t rows, CopyKind kind) {
  check(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, row_bytes, rows, to_cuda(kind)),
        "cudaMemcpy2D of " + std::to_string(rows) + " rows of " + std::to_string(row_bytes) +
            " bytes");
}

// conv1d / conv_transpose1d live in conv_dispatch.cu.

void synchronize(void* stream) {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

const char* description() {
  return "CUDA runtime " CONVBANK_CUDA_VERSION_STRING;
}

}  // namespace convbank::detail::cuda
