// Pieces shared by the Hopper tensor-core kernels (conv_wgmma.cu, conv_decoder_wgmma.cu,
// conv_encoder_wgmma.cu, conv_pointwise_wgmma.cu): the weight planes' layout, the accumulator
// operand lists, shared-memory matrix descriptors, the 3xTF32 split, the shared-memory-operand
// wgmma and the wgmma group fences. The device functions exist only where the sm_90a features do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace convbank::detail::cuda {

// Offset of reduction row r, column n in a plane of `cols` columns (floats): K-major core
// matrices of 8 columns x 4 reduction rows (128 B), the two of an 8-deep step next to each
// other, then the column groups, then the steps.
__host__ __device__ __forceinline__ int plane_offset(int r, int n, int cols) {
  return ((r >> 3) * (cols / 8) + (n >> 3)) * 64 + ((r >> 2) & 1) * 32 + (n & 7) * 4 + (r & 3);
}
// The same for fp16 planes, in halves: core matrices of 8 columns x 8 reduction rows (128 B),
// the two of a 16-deep step next to each other.
__host__ __device__ __forceinline__ int half_plane_offset(int r, int n, int cols) {
  return ((r >> 4) * (cols / 8) + (n >> 3)) * 128 + ((r >> 3) & 1) * 64 + (n & 7) * 8 + (r & 7);
}

// The 32 accumulators of an m64n64 wgmma: asm placeholders %0 .. %31 and operands d[0 .. 31].
#define CONVBANK_WGMMA_D32                                                                     \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define CONVBANK_WGMMA_D32_OPERANDS(d)                                                            \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// The 64 accumulators of an m64n128 wgmma: asm placeholders %0 .. %63 and operands d[0 .. 63].
#define CONVBANK_WGMMA_D64                                                                     \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define CONVBANK_WGMMA_D64_OPERANDS(d)                                                            \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Shared-memory matrix descriptor, no swizzle: core matrices of 8 rows x 16 bytes; lbo bytes
// between core matrices along the reduction, sbo bytes along the rows.
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr, std::uint32_t lbo,
                                                   std::uint32_t sbo) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<std::uint64_t>(lbo >> 4) << 16) |
         (static_cast<std::uint64_t>(sbo >> 4) << 32);
}

// x = big + small on the tensor cores, which read a tf32 operand's top 19 bits and ignore the
// other 13: big is x rounded to nearest (ties away from zero) and cleared below, small the exact
// rest with half a tf32 ulp added, so that the tensor cores see it rounded to nearest too. In
// integer form that is 4 instructions; cvt.rna.tf32.f32 is 4 on sm_90 (it tests for Inf and NaN),
// twice plus the subtraction made 9, most of the input split's work. Non-finite x, and finite x
// whose big part rounds to Inf (within half a tf32 ulp of FLT_MAX), give a non-finite rest (a
// non-finite product, so the kernels' fallback runs); false then.
__device__ __forceinline__ bool split_tf32(float x, std::uint32_t& big, std::uint32_t& small) {
  big = (__float_as_uint(x) + 0x1000u) & 0xFFFFE000u;
  const float rest = x - __uint_as_float(big);
  small = __float_as_uint(rest) + 0x1000u;
  return fabsf(rest) < INFINITY;
}

// d (+)= A * B with both operands in shared memory (descriptors, both K-major), m64n128 and one
// reduction step: k8 of tf32, or (kHalf) k16 of fp16, into fp32 accumulators; scale_d = 0
// overwrites d (the first product of a chunk).
template <bool kHalf>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], std::uint64_t a, std::uint64_t b,
                                         int scale_d) {
  if constexpr (kHalf) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" CONVBANK_WGMMA_D64
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : CONVBANK_WGMMA_D64_OPERANDS(d)
        : "l"(a), "l"(b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" CONVBANK_WGMMA_D64
        "}, %64, %65, p, 1, 1;\n}\n"
        : CONVBANK_WGMMA_D64_OPERANDS(d)
        : "l"(a), "l"(b), "r"(scale_d));
  }
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy shared-memory writes (the weight planes) become visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmmas.
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The weight planes: K-major core matrices 128 B apart along the reduction and 256 B apart
// along the columns.
__device__ __forceinline__ std::uint64_t b_desc(std::uint32_t addr) {
  return smem_desc(addr, 128, 256);
}

// wgmma reads its A registers asynchronously and the compiler does not know: an empty asm that
// "modifies" them after the wait keeps them from being reused before.
template <int M>
__device__ __forceinline__ void pin_operands(std::uint32_t (&hi)[M][4], std::uint32_t (&lo)[M][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(hi[m][i]), "+r"(lo[m][i])::"memory");
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace convbank::detail::cuda
