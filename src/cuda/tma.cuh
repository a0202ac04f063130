// Named barriers, transaction barriers (mbarrier) and the bulk copies they count, shared by the
// Hopper kernels whose producers feed shared memory through the copy engine (conv_wgmma.cu,
// conv_decoder_wgmma.cu); and the driver's tensor-map encoder those copies need.
#pragma once

#include <cuda.h>  // CUtensorMap (the encoder itself comes from the driver at run time)
#include <cuda_runtime.h>

#include <cstdint>

namespace convbank::detail::cuda {

__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// bar_arrive where `on`, as one predicated instruction: no branch (between a wgmma's issue and
// its wait, ptxas ends the wgmmas' overlap at a branch).
__device__ __forceinline__ void bar_arrive_if(bool on, int id, int threads) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.arrive %1, %2;\n}\n" ::"r"(
                   static_cast<int>(on)),
               "r"(id), "r"(threads)
               : "memory");
}
// True in every thread of the `threads` on barrier `id` when it is true in any.
__device__ __forceinline__ bool bar_any(int id, int threads, bool v) {
  int r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, %3, p;\n"
      "selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(static_cast<int>(v)), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}

// Transaction barriers (mbarrier) for the bulk copies of the weights and the input: the copy
// engine counts the bytes that land, so that whoever uses them, not the issuing thread, waits.
__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arms the barrier for `bytes` of copies (its one arrival).
__device__ __forceinline__ void mbar_expect(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Copies `bytes` (a multiple of 16, both ends 16-byte aligned), counted on `bar`, which the
// caller has armed for them (one thread).
__device__ __forceinline__ void bulk_copy_counted(std::uint32_t dst, const void* src,
                                                  std::uint32_t bytes, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// Arms the barrier for `bytes` of copies and copies them (one thread).
__device__ __forceinline__ void bulk_copy(std::uint32_t dst, const void* src, std::uint32_t bytes,
                                          std::uint32_t bar) {
  mbar_expect(bar, bytes);
  bulk_copy_counted(dst, src, bytes, bar);
}
// One arrival (a consumer handing a stage back).
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// Copies the box of the input's tensor map at frame c0, channel (or quad row) c1, group c2,
// batch c3, counted on `bar` (one thread); the copy engine zero-fills what lies outside the
// tensor. With parts > 1 the map is 5-d, its second dimension the parts of the box's rows.
__device__ __forceinline__ void tensor_copy_input(std::uint32_t dst, const CUtensorMap& map,
                                                  int parts, int c0, int c1, int c2, int c3,
                                                  std::uint32_t bar) {
  const auto m = reinterpret_cast<std::uint64_t>(&map);
  if (parts > 1) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
        "[%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
        "l"(m), "r"(c0), "r"(0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
        "[%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
        "l"(m), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
  }
}

// cuTensorMapEncodeTiled from the driver, or nullptr where the driver has none (the callers
// then copy another way). Looked up once.
using TensorMapEncode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                     const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline TensorMapEncode tensor_map_encoder() {
  static const TensorMapEncode encode = []() -> TensorMapEncode {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<TensorMapEncode>(fn);
  }();
  return encode;
}

// The input of the copy-engine kernels (the tensor-core decoder, the pointwise kernel) as "quad
// rows": four consecutive channels of a batch item together (4 x x_cs floats, so 16-byte aligned
// whatever the row length when the view's start and batch stride are), a 4-d map of (4 x_cs
// frames, quad row, group, batch) read in boxes of box_frames x box_quads; x_bs a multiple of 4
// floats. 128-byte L2 promotion measured faster than 256 bytes and none (log step 91 in
// docs/performance.md, two device calls of two rounds each: dec_tasnet 0.167 / 0.170 and 0.168 /
// 0.168 ms against 0.171 / 0.172 and 0.169 / 0.169 with 256 bytes; 0.171 / 0.171 with none).
// False where the driver does not accept the map.
inline bool encode_quad_rows(TensorMapEncode encode, CUtensorMap& map, const float* x,
                             std::int64_t x_cs, std::int64_t x_bs, std::int64_t cin_g,
                             std::int64_t groups, std::int64_t batch, int box_frames,
                             int box_quads) {
  const auto u64 = [](std::int64_t v) { return static_cast<cuuint64_t>(v); };
  const cuuint64_t dims[4] = {u64(4 * x_cs), u64(cin_g / 4), u64(groups), u64(batch)};
  const cuuint64_t strides[3] = {u64(4 * x_cs) * sizeof(float), u64(x_cs * cin_g) * sizeof(float),
                                 u64(x_bs) * sizeof(float)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_frames),
                             static_cast<cuuint32_t>(box_quads), 1, 1},
                   steps[4] = {1, 1, 1, 1};
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<float*>(x), dims, strides, box,
                steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace convbank::detail::cuda
