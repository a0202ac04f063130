// Asynchronous global -> shared copies (cp.async, sm_80+) shared by the pipelined kernels. Below
// sm_80 they degrade to plain loads and stores, so the same kernel code compiles everywhere.
#pragma once

#include <cuda_runtime.h>

namespace convbank::detail::cuda {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 4 bytes; zero-filled (nothing read) when !valid.
__device__ __forceinline__ void cp_async4(unsigned dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
#else
  *reinterpret_cast<float*>(__cvta_shared_to_generic(dst)) = valid ? __ldg(src) : 0.0f;
#endif
}

// 16 bytes, both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async16(unsigned dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
#else
  *reinterpret_cast<float4*>(__cvta_shared_to_generic(dst)) =
      __ldg(reinterpret_cast<const float4*>(src));
#endif
}

// ... zero-filled (nothing read) when !valid.
__device__ __forceinline__ void cp_async16(unsigned dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  *reinterpret_cast<float4*>(__cvta_shared_to_generic(dst)) =
      valid ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of this thread's commit groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace convbank::detail::cuda
