// Two questions about the memory-bound kernels, answered on the H200 by kernels that do only the
// part in question (docs/performance.md, log steps 91-92):
//
//   wgmma  How fast do the tensor-core decoder's small register-A wgmmas issue? Per 8-deep step
//          it runs three m64n16k8 products into one accumulator (lo x big, hi x small, hi x big);
//          the same products fit one m64n32k8 (hi x [small | big]) and one m64n16k8 (lo x big).
//          Times one block per multiprocessor of 1 or 2 warpgroups issuing 8-step groups.
//   store  How fast can enc_tasnet's output (16 x 512 rows of 16383 floats, 537 MB) be written
//          when each block owns a run of frame tiles of 64 rows: lanes storing 4-byte words 32
//          frames apart (the encoder's pattern), or the tile staged in a ring in shared memory
//          and written as whole 128-byte lines, the row's unfinished last line carried into the
//          next tile, by the copy engine (cp.async.bulk) or by 16-byte stores.
//          Also blocks of 8-64 rows whose warps split a row's frames (log step 99's probe): fewer
//          rows written at a time, longer runs per row. And one tile of R rows x W frames per
//          block, the blocks ordered with the frame tiles fastest, so that the blocks resident
//          at a time write neighbouring rows (log step 102), by 4-byte words or by float4 stores
//          on each row's 16-byte grid (log step 121). PROBE_FRAMES=16384 writes rows that start
//          on 128-byte lines instead.
//   read   How fast does the copy engine read dec_tasnet's input (16 x 512 rows of 16383 floats)
//          into a ring of stages, as the tensor-core decoder's producer does (bulk tensor copies
//          of "quad rows", 4 channels 16-byte aligned together), with no consumer work: the
//          decoder's box (132 frames x 16 quad rows, 4 copies per 64-channel stage) against
//          longer rows, more rows per box, and fewer or more stages.
//
//   nvcc -O3 -std=c++17 -Isrc -gencode=arch=compute_90a,code=sm_90a scripts/cuda_probes.cu \
//     -o /tmp/probes && /tmp/probes [wgmma] [read] [store]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include "cuda/tma.cuh"  // the decoder's barriers, tensor copies and tensor-map encoder

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- wgmma ------------------------------------------------------------------------------------

__device__ __forceinline__ std::uint64_t bdesc(std::uint32_t addr) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | (std::uint64_t{128 >> 4} << 16) |
         (std::uint64_t{256 >> 4} << 32);
}
__device__ __forceinline__ void wg16(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wg32(float (&d)[8], float (&e)[8], const std::uint32_t (&a)[4],
                                     std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(e[0]), "+f"(e[1]), "+f"(e[2]), "+f"(e[3]), "+f"(e[4]), "+f"(e[5]),
        "+f"(e[6]), "+f"(e[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <int R>
__device__ __forceinline__ void keep(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// kMode 0: 3 x m64n16k8 per step into one accumulator (the decoder today); 1: m64n32k8 +
// m64n16k8; 2: 3 x m64n16k8 into two accumulators, steps alternating.
template <int kMode>
__global__ void __launch_bounds__(256, 1) wgmma_probe(float* out, int iters) {
  __shared__ __align__(128) float b[2 * 8 * 8 * 16];
  for (int i = threadIdx.x; i < 2 * 8 * 8 * 16; i += blockDim.x) {
    b[i] = __uint_as_float(0x3f800000u + ((i * 2654435761u) & 0x7fe000u));
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  std::uint32_t hi[8][4], lo[8][4];
#pragma unroll
  for (int u = 0; u < 8; ++u) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      hi[u][i] = 0x3f800000u + (((threadIdx.x * 31 + u * 7 + i) * 40503u) & 0x7fe000u);
      lo[u][i] = 0x33800000u + (((threadIdx.x * 17 + u * 5 + i) * 40503u) & 0x7fe000u);
    }
  }
  float d0[8] = {}, d1[8] = {}, d2[8] = {};
  const std::uint32_t base = smem_u32(b);
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      if constexpr (kMode == 1) {
        const std::uint32_t s = base + u * 4 * 256;  // 32 columns: small 0..15, big 16..31
        wg32(d0, d1, hi[u], bdesc(s));
        wg16(d2, lo[u], bdesc(s + 512));  // an accumulator of its own (sharing d1: C7511)
      } else {
        const std::uint32_t s = base + u * 2 * 256, sm = s + 8 * 2 * 256;
        float(&d)[8] = (kMode == 2 && (u & 1)) ? d1 : d0;
        wg16(d, lo[u], bdesc(s));
        wg16(d, hi[u], bdesc(sm));
        wg16(d, hi[u], bdesc(s));
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    keep(d0);
    keep(d1);
    keep(d2);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
#pragma unroll
      for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(hi[u][i]), "+r"(lo[u][i])::"memory");
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += d0[i] + d1[i] + d2[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// ---- store ------------------------------------------------------------------------------------

constexpr int kTile = 128;  // frames per tile
constexpr int kRing = 192;  // ring floats per row: a carried line (32) + a tile (128), 32 spare
constexpr int kRows = 8;    // rows per warp; 8 warps, 64 rows per block

struct StoreArgs {
  float* y;
  long rows, frames;
  int segs, seg_tiles;
};

__device__ __forceinline__ float value(long row, long f) {
  return static_cast<float>(f) + 0.25f * static_cast<float>(row & 1023);
}

// 64 rows per block, the tile staged in a ring: kMode 1 writes its lines by the copy engine, 2
// by 16-byte stores. (The encoder's own pattern, 4-byte stores of frames lane + 32 j, is
// store_rows_probe<64> below.)
template <int kMode>
__global__ void __launch_bounds__(256, 4) store_probe(StoreArgs a) {
  extern __shared__ __align__(128) float ring_all[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long item = blockIdx.x;
  const long rt = item / a.segs;
  const int seg = static_cast<int>(item - rt * a.segs);
  const long row0 = rt * 64 + warp * kRows;
  const long t_begin = long{seg} * a.seg_tiles * kTile;
  const long t_end = min(a.frames, t_begin + long{a.seg_tiles} * kTile);
  if (t_begin >= t_end) return;
  float* ring = ring_all + warp * kRows * kRing;
  // Lane c < kRows keeps row c's state: its ring rotation (frame f at (f + rot) % kRing, so that
  // a 128-byte line of the output is a 128-byte line of the ring), the run's first and last line
  // boundary, and the frame its stored lines reach; the other lanes read it by shuffles.
  const int cl = lane & (kRows - 1);
  const long my_base = (row0 + cl) * a.frames;
  const int my_rot = static_cast<int>(my_base % kRing);
  const int my_first = static_cast<int>(t_begin + ((32 - (my_base + t_begin) % 32) % 32));
  const int my_last = static_cast<int>(t_end - (my_base + t_end) % 32);
  int my_p = my_first;
  for (long T = t_begin; T < t_end; T += kTile) {
    float v[kRows][4];
#pragma unroll
    for (int c = 0; c < kRows; ++c) {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[c][j] = value(row0 + c, T + lane + 32 * j);
    }
    if constexpr (kMode == 1) {
      if (lane < kRows) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    }
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kRows; ++c) {
      const int rot = __shfl_sync(~0u, my_rot, c), pf = __shfl_sync(~0u, my_first, c),
                pl = __shfl_sync(~0u, my_last, c);
      float* yr = a.y + (row0 + c) * a.frames;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int f = static_cast<int>(T) + lane + 32 * j;
        if (f >= t_end) continue;
        if (f < pf || f >= pl) {
          yr[f] = v[c][j];  // a line shared with the neighbouring run
        } else {
          ring[c * kRing + (f + rot) % kRing] = v[c][j];
        }
      }
    }
    if constexpr (kMode == 1) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncwarp();
    const long tile_end = min(T + kTile, t_end);
    const int my_e = static_cast<int>(min(tile_end - (my_base + tile_end) % 32, long{my_last}));
    if constexpr (kMode == 1) {
      if (lane < kRows && my_e > my_p) {
        const int pos = (my_p + my_rot) % kRing;
        const int n = my_e - my_p, n1 = min(n, kRing - pos);
        const float* src = ring + lane * kRing;
        float* dst = a.y + my_base + my_p;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
                     "r"(smem_u32(src + pos)), "r"(n1 * 4)
                     : "memory");
        if (n1 < n) {
          asm volatile(
              "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst + n1),
              "r"(smem_u32(src)), "r"((n - n1) * 4)
              : "memory");
        }
      }
      if (lane < kRows) asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    } else {
#pragma unroll
      for (int c = 0; c < kRows; ++c) {
        const int p = __shfl_sync(~0u, my_p, c), e = __shfl_sync(~0u, my_e, c),
                  rot = __shfl_sync(~0u, my_rot, c);
        float* yr = a.y + (row0 + c) * a.frames + p;
        for (int i = lane; i < (e - p) / 4; i += 32) {
          const int q = (p + rot + 4 * i) % kRing;
          __stcs(reinterpret_cast<float4*>(yr + 4 * i),
                 *reinterpret_cast<const float4*>(ring + c * kRing + q));
        }
      }
    }
    my_p = max(my_p, my_e);
  }
  if constexpr (kMode == 1) {
    if (lane < kRows) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  }
}

// 4-byte stores, frames lane + 32 j (the encoder's pattern), R rows per block: R / 8 warps
// across rows, 64 / R warps along time, so that a block step writes R rows x (8192 / R) frames;
// a block walks `seg_tiles` such steps of its rows.
template <int R>
__global__ void __launch_bounds__(256, 4) store_rows_probe(StoreArgs a) {
  constexpr int kWt = 64 / R;  // warps along time
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long item = blockIdx.x;
  const long rt = item / a.segs;
  const int seg = static_cast<int>(item - rt * a.segs);
  const long row0 = rt * R + (warp / kWt) * kRows;
  const long step = long{kWt} * kTile;
  const long t_begin = long{seg} * a.seg_tiles * step + (warp % kWt) * kTile;
  const long t_end = min(a.frames, long{seg + 1} * a.seg_tiles * step);
  for (long T = t_begin; T < t_end; T += step) {
#pragma unroll
    for (int c = 0; c < kRows; ++c) {
      float* yr = a.y + (row0 + c) * a.frames;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long f = T + lane + 32 * j;
        if (f < t_end) yr[f] = value(row0 + c, f);
      }
    }
  }
}

// 4-byte stores, frames lane + 32 j, one tile of R rows x W frames per block (not persistent),
// the blocks in row-group-major order with the frame tiles fastest: the blocks resident at any
// time write a few hundred neighbouring rows, not all 8192 (the other patterns' blocks each own
// rows and walk them).
template <int R, int W>
__global__ void __launch_bounds__(256) store_local_probe(StoreArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long tiles = (a.frames + W - 1) / W;
  const long rg = blockIdx.x / tiles;
  const long t0 = (blockIdx.x - rg * tiles) * W;
  const bool full = t0 + W <= a.frames;
#pragma unroll
  for (int c = warp; c < R; c += 8) {
    const long row = rg * R + c;
    float* yr = a.y + row * a.frames + t0;
#pragma unroll
    for (int j = 0; j < W / 32; ++j) {
      const long f = lane + 32 * j;
      if (full || t0 + f < a.frames) yr[f] = value(row, t0 + f);
    }
  }
}

// 16-byte stores, one tile of R rows x W frames per block in store_local_probe's order, the
// tiles of a row laid on its 16-byte grid: a row's tile k covers frames A + k W .. A + (k + 1) W,
// A (0-3) the row's first frame on a 16-byte boundary; lane l of a warp stores frames
// 4 l .. 4 l + 3 of its 128 as one float4 (a warp 512 contiguous bytes). Tile 0 also writes the
// row's A head frames, the last tile the tail that does not fill a float4, by 4-byte stores
// (log step 121: does the misaligned 4-byte pattern, not the tile order, cost the gap to a flat
// write?).
template <int R, int W>
__global__ void __launch_bounds__(256) store_local4_probe(StoreArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long tiles = (a.frames + W - 1) / W + 1;  // one more: the grid's shift pushes frames on
  const long rg = blockIdx.x / tiles;
  const long k = blockIdx.x - rg * tiles;
  for (int c = warp; c < R; c += 8) {
    const long row = rg * R + c;
    float* yr = a.y + row * a.frames;
    const int head = static_cast<int>((4 - (row * a.frames) % 4) % 4);
    const long t0 = head + k * W;
    if (k == 0 && lane < head && lane < a.frames) yr[lane] = value(row, lane);
#pragma unroll
    for (int j = 0; j < W / 128; ++j) {
      const long f = t0 + 128 * j + 4 * lane;
      if (f + 3 < a.frames) {
        *reinterpret_cast<float4*>(yr + f) =
            make_float4(value(row, f), value(row, f + 1), value(row, f + 2), value(row, f + 3));
      } else {
        for (long g = f; g < min(f + 4, a.frames); ++g) yr[g] = value(row, g);
      }
    }
  }
}

// ---- read -------------------------------------------------------------------------------------

namespace cb = convbank::detail::cuda;

struct ReadArgs {
  long x_cs, frames;
  int batch, channels;  // channels per batch item, a multiple of 4 * rows
  int tile;             // frames per tile; a copy reads tile + 4 (its 16-byte lead)
  int rows;             // quad rows per box
  int stage_channels;   // channels per stage: 4 boxes of `rows` quad rows each, or more
  int stages;
  long tiles, tiles_per_b;
};

// A producer thread and one consumer warp that only waits for each stage and hands it back.
__global__ void __launch_bounds__(64, 1)
    read_probe(ReadArgs a, const __grid_constant__ CUtensorMap map, float* sink) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const std::uint32_t base = (smem_u32(smem_raw) + 127) & ~127u;
  const int box_bytes = (a.tile + 4) * a.rows * 4;
  const int boxes = a.stage_channels / (4 * a.rows) * 4;
  const int stage_bytes = boxes * box_bytes;
  const std::uint32_t full0 = base + a.stages * stage_bytes, empty0 = full0 + 8 * a.stages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      cb::mbar_init(full0 + 8 * s, 1);
      cb::mbar_init(empty0 + 8 * s, 1);
    }
    cb::mbar_fence_init();
  }
  __syncthreads();
  const int per_tile = a.channels / a.stage_channels;
  int slot = 0;
  std::uint32_t phase = 0;
  if (threadIdx.x == 32) {
    for (long t = blockIdx.x; t < a.tiles; t += gridDim.x) {
      const int b = static_cast<int>(t / a.tiles_per_b);
      const int qb = static_cast<int>((t - b * a.tiles_per_b) * a.tile) - 1;
      for (int k = 0; k < per_tile; ++k) {
        cb::mbar_wait(empty0 + 8 * slot, phase ^ 1);
        const std::uint32_t full = full0 + 8 * slot, dst = base + slot * stage_bytes;
        cb::mbar_expect(full, stage_bytes);
        for (int i = 0; i < boxes; ++i) {
          const int u = i & 3, r0 = k * (a.stage_channels / 4) + (i >> 2) * a.rows;
          const int c0 = static_cast<int>(u * a.x_cs) + qb;
          cb::tensor_copy_input(dst + i * box_bytes, map, 1, c0 - (c0 & 3), r0, 0, b, full);
        }
        if (++slot == a.stages) {
          slot = 0;
          phase ^= 1;
        }
      }
    }
  } else if (threadIdx.x < 32) {
    float s = 0.0f;
    for (long t = blockIdx.x; t < a.tiles; t += gridDim.x) {
      for (int k = 0; k < per_tile; ++k) {
        cb::mbar_wait(full0 + 8 * slot, phase);
        s += reinterpret_cast<const float*>(smem_raw + (base - smem_u32(smem_raw)) +
                                            slot * stage_bytes)[threadIdx.x];
        __syncwarp();
        if (threadIdx.x == 0) cb::mbar_arrive(empty0 + 8 * slot);
        if (++slot == a.stages) {
          slot = 0;
          phase ^= 1;
        }
      }
    }
    if (s == 123.0f) *sink = s;  // keeps the reads; never true on the zero-filled input
  }
}

__global__ void write4(float4* y, long n4, float v) {
  for (long i = blockIdx.x * long{blockDim.x} + threadIdx.x; i < n4;
       i += long{gridDim.x} * blockDim.x)
    y[i] = make_float4(v, v, v, v);
}

float median_ms(const std::function<void()>& f, int runs = 20) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> ms;
  for (int i = 0; i < runs; ++i) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

// Arguments name the probes to run (wgmma, read, store); none runs all three.
int main(int argc, char** argv) {
  auto wanted = [&](const char* name) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], name) == 0) return true;
    }
    return false;
  };
  int sms = 0, clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("multiprocessors %d, clock %.2f GHz (attribute)\n", sms, clock_khz * 1e-6);

  // wgmma: cycles per 8-step group of one warpgroup, and per group with two warpgroups sharing a
  // multiprocessor (the decoder's block).
  if (wanted("wgmma")) {
    float* out = nullptr;
    CHECK(cudaMalloc(&out, sizeof(float) * sms * 256));
    const int iters = 4000;
    const char* names[3] = {"3 x m64n16k8, one accumulator", "m64n32k8 + m64n16k8",
                            "3 x m64n16k8, two accumulators"};
    std::printf(
        "\n| wgmma per 8-step group | warpgroups per SM | ns per group and SM | cycles "
        "|\n|---|---|---|---|\n");
    for (int mode = 0; mode < 3; ++mode) {
      for (int wg = 1; wg <= 2; ++wg) {
        auto run = [&] {
          if (mode == 0) wgmma_probe<0><<<sms, 128 * wg>>>(out, iters);
          if (mode == 1) wgmma_probe<1><<<sms, 128 * wg>>>(out, iters);
          if (mode == 2) wgmma_probe<2><<<sms, 128 * wg>>>(out, iters);
        };
        const float ms = median_ms(run, 10);
        const double ns = ms * 1e6 / (double(iters) * wg);
        std::printf("| %s | %d | %.1f | %.0f |\n", names[mode], wg, ns, ns * clock_khz * 1e-6);
      }
    }
    CHECK(cudaFree(out));
  }

  // read: dec_tasnet's input through the copy engine.
  if (wanted("read")) {
    const int batch = 16, channels = 512;
    const long frames = 16383, x_cs = frames, n = long{batch} * channels * frames;
    float* x = nullptr;
    float* sink = nullptr;
    CHECK(cudaMalloc(&x, sizeof(float) * n));
    CHECK(cudaMalloc(&sink, sizeof(float)));
    CHECK(cudaMemset(x, 0, sizeof(float) * n));
    const cb::TensorMapEncode encode = cb::tensor_map_encoder();
    if (encode == nullptr) {
      std::printf("no tensor-map encoder\n");
      return 1;
    }
    std::printf(
        "\n| copy-engine reads, %d x %d rows of %ld floats | ms | TB/s |\n|---|---:|---:|\n", batch,
        channels, frames);
    struct Variant {
      int tile, rows, stage_channels, stages;
      const char* what;
    };
    const Variant variants[] = {
        {128, 16, 64, 4, "132 x 16 quad rows, 4 per 64-channel stage, 4 stages (the decoder's)"},
        {128, 16, 64, 2, "the same, 2 stages"},
        {128, 16, 64, 6, "the same, 6 stages"},
        {128, 8, 64, 4, "132 x 8 quad rows, 8 per 64-channel stage, 4 stages"},
        {128, 32, 128, 3, "132 x 32 quad rows, 4 per 128-channel stage, 3 stages"},
        {252, 16, 64, 3, "256 x 16 quad rows, 4 per 64-channel stage, 3 stages"},
        {252, 16, 64, 2, "256 x 16 quad rows, 2 stages"},
    };
    for (const Variant& v : variants) {
      CUtensorMap map{};
      const cuuint64_t dims[4] = {static_cast<cuuint64_t>(4 * x_cs),
                                  static_cast<cuuint64_t>(channels / 4), 1,
                                  static_cast<cuuint64_t>(batch)};
      const cuuint64_t strides[3] = {static_cast<cuuint64_t>(4 * x_cs) * 4,
                                     static_cast<cuuint64_t>(channels * x_cs) * 4,
                                     static_cast<cuuint64_t>(channels * x_cs) * 4};
      const cuuint32_t box[4] = {static_cast<cuuint32_t>(v.tile + 4),
                                 static_cast<cuuint32_t>(v.rows), 1, 1};
      const cuuint32_t steps[4] = {1, 1, 1, 1};
      if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, x, dims, strides, box, steps,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        std::printf("| %s | map refused | |\n", v.what);
        continue;
      }
      const long tiles_per_b = (frames + v.tile - 1) / v.tile;
      ReadArgs a{};
      a.x_cs = x_cs;
      a.frames = frames;
      a.batch = batch;
      a.channels = channels;
      a.tile = v.tile;
      a.rows = v.rows;
      a.stage_channels = v.stage_channels;
      a.stages = v.stages;
      a.tiles = batch * tiles_per_b;
      a.tiles_per_b = tiles_per_b;
      const std::size_t smem =
          128 + static_cast<std::size_t>(v.stages) * 4 * (v.stage_channels / 4) * (v.tile + 4) * 4 +
          16 * v.stages;
      if (cudaFuncSetAttribute(read_probe, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)) != cudaSuccess ||
          smem > 227 * 1024) {
        cudaGetLastError();
        std::printf("| %s | too much shared memory | |\n", v.what);
        continue;
      }
      const float ms = median_ms([&] { read_probe<<<sms, 64, smem>>>(a, map, sink); });
      const double bytes = double(n) * 4 * (v.tile + 4) / v.tile;
      std::printf("| %s | %.3f | %.2f |\n", v.what, ms, bytes / ms * 1e-9);
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(sink));
  }

  // store: enc_tasnet's output.
  if (wanted("store")) {
    // PROBE_FRAMES=16384: rows on 16-byte boundaries.
    const char* pf = std::getenv("PROBE_FRAMES");
    const long rows = 16 * 512, frames = pf != nullptr ? std::atol(pf) : 16383, n = rows * frames;
    float* y = nullptr;
    CHECK(cudaMalloc(&y, sizeof(float) * (n + 64)));
    const double bytes = double(n) * 4;
    std::printf("\n| store pattern, %ld rows of %ld frames | ms | TB/s |\n|---|---:|---:|\n", rows,
                frames);
    const float m = median_ms([&] { CHECK(cudaMemsetAsync(y, 0, bytes)); });
    std::printf("| cudaMemsetAsync | %.3f | %.2f |\n", m, bytes / m * 1e-9);
    const float w4 =
        median_ms([&] { write4<<<sms * 8, 512>>>(reinterpret_cast<float4*>(y), n / 4, 1.0f); });
    std::printf("| float4 grid-stride | %.3f | %.2f |\n", w4, bytes / w4 * 1e-9);
    const std::size_t smem = sizeof(float) * 8 * kRows * kRing;
    CHECK(cudaFuncSetAttribute(store_probe<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CHECK(cudaFuncSetAttribute(store_probe<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const long t_tiles = (frames + kTile - 1) / kTile;
    const char* names[3] = {"4-byte words, frames lane + 32 j", "ring, copy engine lines",
                            "ring, 16-byte stores of lines"};
    std::vector<float> host(n);
    // Runs a pattern once on a poisoned output and counts the values it did not write right.
    auto wrong_values = [&](const auto& run) {
      CHECK(cudaMemset(y, 0xff, bytes));
      run();
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(host.data(), y, bytes, cudaMemcpyDeviceToHost));
      long bad = 0;
      for (long r = 0; r < rows; ++r) {
        for (long f = 0; f < frames; ++f) {
          const float want = static_cast<float>(f) + 0.25f * static_cast<float>(r & 1023);
          bad += host[r * frames + f] != want;
        }
      }
      return bad;
    };
    for (int segs : {1, 2, 4, 8}) {
      StoreArgs a{y, rows, frames, segs, static_cast<int>((t_tiles + segs - 1) / segs)};
      const long blocks = rows / 64 * segs;
      for (int mode = 0; mode < 3; ++mode) {
        auto run = [&] {
          if (mode == 0) store_rows_probe<64><<<blocks, 256>>>(a);
          if (mode == 1) store_probe<1><<<blocks, 256, smem>>>(a);
          if (mode == 2) store_probe<2><<<blocks, 256, smem>>>(a);
        };
        const long bad = wrong_values(run);
        const float ms = median_ms(run);
        std::printf("| %s, %d runs per row (%ld blocks) | %.3f | %.2f |%s\n", names[mode], segs,
                    blocks, ms, bytes / ms * 1e-9, bad ? " WRONG" : "");
        if (bad) std::printf("  %ld wrong values\n", bad);
      }
    }
    // Fewer rows per block, warps along time (the encoder's 4-byte pattern otherwise; 64 rows
    // are the first row of each run count above).
    for (int rows_per_block : {8, 16, 32}) {
      const long step = 8192 / rows_per_block;
      const long steps = (frames + step - 1) / step;
      for (int segs : {1, 2, 4}) {
        StoreArgs a{y, rows, frames, segs, static_cast<int>((steps + segs - 1) / segs)};
        const long blocks = rows / rows_per_block * segs;
        auto run = [&] {
          if (rows_per_block == 8) store_rows_probe<8><<<blocks, 256>>>(a);
          if (rows_per_block == 16) store_rows_probe<16><<<blocks, 256>>>(a);
          if (rows_per_block == 32) store_rows_probe<32><<<blocks, 256>>>(a);
        };
        const long bad = wrong_values(run);
        const float ms = median_ms(run);
        std::printf(
            "| 4-byte words, %d rows per block, %d runs per row (%ld blocks) | %.3f | %.2f |%s\n",
            rows_per_block, segs, blocks, ms, bytes / ms * 1e-9, bad ? " WRONG" : "");
      }
    }
    // One tile per block, frame tiles fastest: 4-byte words (store_local_probe), or aligned
    // 16-byte stores on each row's 16-byte grid (store_local4_probe, one more tile per row).
    const StoreArgs la{y, rows, frames, 0, 0};
    auto local = [&](auto r, auto w, auto vec) {
      constexpr int R = decltype(r)::value, W = decltype(w)::value;
      constexpr bool kVec = decltype(vec)::value;
      const long blocks = rows / R * ((frames + W - 1) / W + (kVec ? 1 : 0));
      auto run = [&] {
        if constexpr (kVec) {
          store_local4_probe<R, W><<<blocks, 256>>>(la);
        } else {
          store_local_probe<R, W><<<blocks, 256>>>(la);
        }
      };
      const long bad = wrong_values(run);
      const float ms = median_ms(run);
      std::printf(
          "| %s, one %d x %d tile per block, frame tiles fastest (%ld blocks) | %.3f "
          "| %.2f |%s\n",
          kVec ? "aligned float4" : "4-byte words", R, W, blocks, ms, bytes / ms * 1e-9,
          bad ? " WRONG" : "");
    };
    using std::integral_constant;
    using Words = std::false_type;
    using Float4 = std::true_type;
    local(integral_constant<int, 64>{}, integral_constant<int, 128>{}, Words{});
    local(integral_constant<int, 64>{}, integral_constant<int, 256>{}, Words{});
    local(integral_constant<int, 32>{}, integral_constant<int, 256>{}, Words{});
    local(integral_constant<int, 16>{}, integral_constant<int, 512>{}, Words{});
    local(integral_constant<int, 8>{}, integral_constant<int, 1024>{}, Words{});
    local(integral_constant<int, 8>{}, integral_constant<int, 128>{}, Words{});
    local(integral_constant<int, 32>{}, integral_constant<int, 1024>{}, Words{});
    local(integral_constant<int, 32>{}, integral_constant<int, 1024>{}, Float4{});
    local(integral_constant<int, 32>{}, integral_constant<int, 512>{}, Float4{});
    local(integral_constant<int, 32>{}, integral_constant<int, 256>{}, Float4{});
    local(integral_constant<int, 16>{}, integral_constant<int, 512>{}, Float4{});
    local(integral_constant<int, 64>{}, integral_constant<int, 512>{}, Float4{});
    local(integral_constant<int, 8>{}, integral_constant<int, 1024>{}, Float4{});
    local(integral_constant<int, 8>{}, integral_constant<int, 128>{}, Float4{});
    CHECK(cudaFree(y));
  }
  return 0;
}
