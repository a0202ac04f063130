// FFMA GEMM v2: the implicit GEMM for shape families whose operands have a linear index map,
// so the loaders carry almost no index arithmetic (the v1 kernel in conv_gemm.cu decodes
// (channel, tap) per element with divisions; that cost as much as the FFMAs on pointwise
// shapes).
//
//   C[i][n] = sum_r A[i][r] * B[r][n],   r = ci * T + m  (input channel ci, tap m)
//   A[i][r] = wg[i * a_is + r * a_rs]
//   B[r][n] = xg[ci * x_cs + pos],  pos = n * ns + m * ms + off, zero outside [0, in_frames)
//
// Conv1d (zeros padding): i = out channel, A = w[co][ci][k] row-major (a_is = R, a_rs = 1),
//   pos = t * stride + m * dilation - pad_left.
// ConvTranspose1d with one output channel per group, dilation 1, K a multiple of the stride P
//   (decoders, e.g. STFT synthesis): i = phase, n = q - q0, A[ph][(ci, m)] = w[ci][0][ph + m P]
//   = wg[ph + r * P] (a_is = 1, a_rs = P), pos = q0 + n - m; output t = (q0 + n) P + ph - pad.
//   Every (phase, tap) is a real weight: no zero weight ever multiplies an input.
//
// Block tile BM x 128, reduction step 8, each thread an 8x8 (or 4x8) register block (2 x 2 or
// 1 x 2 groups of 4x4, conflict-free float4 fragment reads). Two cores feed it:
// - the pipelined core (default on sm_80+): cp.async copies global -> shared, kStages = 4 steps
//   deep, zero-filled out of range, fragments double-buffered in registers (H200, same run:
//   tcn_pointwise 0.95 vs 1.12 ms, dec_stft512 0.28 vs 0.32, enc_stft512 0.37 vs 0.45);
// - the register core (CONVBANK_CUDA_GEMM2_CORE=0, or below sm_80): the next step's global
//   loads are issued before this step's FFMAs (register prefetch, two shared buffers).
// Both use one barrier per step. Each thread's B loads share one reduction row per step, so
// (ci, m) is derived once per step (a float reciprocal, exact for r < 2^22) and A needs no
// division at all.
//
// Split reduction (ConvTranspose1d phase GEMM, sm_90 thread-block clusters): when the output
// tiles alone underfill the GPU (one output channel: rows = stride phases, e.g. STFT synthesis
// with 128 x ~1024 outputs per batch), a cluster of S blocks computes one output tile, each
// block a contiguous slice of the reduction steps. The partial tiles are staged in each block's
// shared memory and every block sums a 1/S share of the tile over the S ranks through
// distributed shared memory, always in rank order (deterministic, no atomics), adds the bias
// and writes its share along time (coalesced). Sums are plain fp32 additions of partials, so a
// NaN/Inf input still reaches exactly the outputs whose sum holds it.
#include <cooperative_groups.h>

#include <cstdlib>

#include "cuda/conv_common.cuh"
#include "cuda/cp_async.cuh"

namespace convbank::detail::cuda {

namespace {

constexpr int kBK = 8;

struct Gemm2Args {
  const float* x;
  std::int64_t x_bs, x_cs;
  const float* w;
  std::int64_t w_gs;  // weight offset per group
  const float* bias;
  float* y;
  std::int64_t y_bs, y_cs;
  std::int64_t groups, bg_count;
  int cin_g, cout_g;
  int M;  // rows
  std::int64_t N;
  int R, T;
  float inv_T;
  int a_is, a_rs;
  std::int64_t ns, off;
  int ms;
  std::int64_t in_frames, out_frames;
  int P;  // transposed: phases; 0 for Conv1d
  std::int64_t q0, pad;
  int b_kfast;  // B loaded reduction-fastest (large conv strides)
  int vec_store;
  int steps;
  int split;  // reduction slices per output tile (cluster size); 1 without clusters
  std::int64_t row_tiles, col_tiles;
};

// Shared floats of the split-reduction staging: BM x (columns per pass) partials, padded rows.
template <int BM, int BN>
constexpr int red_passes() {
  return BN * (BM + 4) * 4 > 40000 ? 2 : 1;
}

// Epilogue shared by both cores: bias, each output written exactly once; with clusters, the
// split-reduction sum over the ranks through distributed shared memory (smem is free by then).
// (ty, tx): the thread's row and column group inside the tile (rows gi * AGS + ty * 4 + 0..3,
// columns gj * BGS + tx * 4 + 0..3).
template <int BM, int BN, int TM, int TN, bool Transposed, bool Cluster>
__device__ __forceinline__ void gemm2_epilogue(const Gemm2Args& a, float (&acc)[TM][TN],
                                               float* smem, int tid, int ty, int tx, std::int64_t b,
                                               std::int64_t g, int row0, std::int64_t col0,
                                               int slice) {
  constexpr int AG = TM / 4, BG = TN / 4;
  constexpr int AGS = BM / AG, BGS = BN / BG;
  if constexpr (Cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int NT = (BM / TM) * (BN / TN);
    constexpr int PASSES = red_passes<BM, BN>();
    constexpr int RCOLS = BN / PASSES;
    constexpr int LDR = BM + 4;
    const int split = a.split;
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    const float bias = a.bias != nullptr ? __ldg(a.bias + g) : 0.0f;
    float* yrow = a.y + b * a.y_bs + g * a.y_cs;
    float* red = smem;
#pragma unroll
    for (int pass = 0; pass < PASSES; ++pass) {
      // This block's partial tile (its columns of this pass) into its own shared memory.
#pragma unroll
      for (int gj = 0; gj < BG; ++gj) {
        if (PASSES != 1 && gj != pass) continue;
#pragma unroll
        for (int gi = 0; gi < AG; ++gi) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int cl = gj * BGS + tx * 4 + j - pass * RCOLS;
            float4 v;
            v.x = acc[gi * 4 + 0][gj * 4 + j];
            v.y = acc[gi * 4 + 1][gj * 4 + j];
            v.z = acc[gi * 4 + 2][gj * 4 + j];
            v.w = acc[gi * 4 + 3][gj * 4 + j];
            *reinterpret_cast<float4*>(&red[cl * LDR + gi * AGS + ty * 4]) = v;
          }
        }
      }
      cluster.sync();
      // This rank's share of the tile, summed over the ranks in rank order.
      constexpr int E = RCOLS * BM;
      const int e0 = static_cast<int>(static_cast<std::int64_t>(E) * slice / split);
      const int e1 = static_cast<int>(static_cast<std::int64_t>(E) * (slice + 1) / split);
      for (int e = e0 + tid; e < e1; e += NT) {
        const int cl = e / BM, rl = e % BM;
        const int off = cl * LDR + rl;
        float sum = *cluster.map_shared_rank(red + off, 0);
        for (int k = 1; k < split; ++k) sum += *cluster.map_shared_rank(red + off, k);
        const int rowg = row0 + rl;
        const std::int64_t c = col0 + pass * RCOLS + cl;
        const std::int64_t t = (a.q0 + c) * a.P + rowg - a.pad;
        if (rowg < a.M && c < a.N && t >= 0 && t < a.out_frames) yrow[t] = sum + bias;
      }
      cluster.sync();  // every rank has read the partials before they are overwritten
    }
#else
    __trap();  // launched only where cluster launch is supported (sm_90+)
#endif
  } else {
    // Epilogue: bias, each output written exactly once.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int rowg = row0 + (i / 4) * AGS + ty * 4 + (i % 4);
      if (rowg >= a.M) continue;
      const std::int64_t och = Transposed ? g : g * a.cout_g + rowg;
      const float bias = a.bias != nullptr ? __ldg(a.bias + och) : 0.0f;
      float* yrow = a.y + b * a.y_bs + och * a.y_cs;
#pragma unroll
      for (int gj = 0; gj < BG; ++gj) {
        const std::int64_t c = col0 + gj * BGS + tx * 4;
        if (Transposed) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const std::int64_t t = (a.q0 + c + j) * a.P + rowg - a.pad;
            if (c + j < a.N && t >= 0 && t < a.out_frames) yrow[t] = acc[i][gj * 4 + j] + bias;
          }
        } else if (a.vec_store && c + 3 < a.N) {
          float4 v;
          v.x = acc[i][gj * 4 + 0] + bias;
          v.y = acc[i][gj * 4 + 1] + bias;
          v.z = acc[i][gj * 4 + 2] + bias;
          v.w = acc[i][gj * 4 + 3] + bias;
          *reinterpret_cast<float4*>(yrow + c) = v;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (c + j < a.N) yrow[c + j] = acc[i][gj * 4 + j] + bias;
          }
        }
      }
    }
  }
}

template <int BM, int BN, int TM, int TN, bool Transposed, bool KFast, bool Cluster>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), (BM / TM) * (BN / TN) >= 256 ? 2 : 4)
    conv_gemm_v2_kernel(Gemm2Args a) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int AL = kBK * BM / NT;
  constexpr int BL = kBK * BN / NT;
  static_assert(AL * NT == kBK * BM && BL * NT == kBK * BN, "tile / thread mismatch");
  static_assert(NT % 32 == 0 && BN % 32 == 0, "warp mapping");
  constexpr int LDA = BM + 4;
  constexpr int LDB = BN + 4;
  constexpr int AG = TM / 4, BG = TN / 4;
  constexpr int AGS = BM / AG, BGS = BN / BG;
  constexpr int kPipe = 2 * kBK * (LDA + LDB);
  // Split reduction: partials staged as red[column][row] (rows = phases, contiguous in time).
  constexpr int PASSES = red_passes<BM, BN>();
  constexpr int RCOLS = BN / PASSES;
  constexpr int LDR = BM + 4;
  constexpr int kRed = Cluster ? RCOLS * LDR : 0;
  static_assert(!Cluster || (Transposed && (PASSES == 1 || PASSES == TN / 4)), "split layout");
  __shared__ __align__(16) float smem[kPipe > kRed ? kPipe : kRed];
  auto As = reinterpret_cast<float(*)[kBK][LDA]>(smem);
  auto Bs = reinterpret_cast<float(*)[kBK][LDB]>(smem + 2 * kBK * LDA);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int tx = tid % (BN / TN);
  const int ty = tid / (BN / TN);

  // Per-slot coordinates inside the tile (fixed for the whole kernel).
  // A: Conv1d reduction-fastest (rows are contiguous in r), transposed row-fastest.
  auto a_kk = [&](int l) {
    const int e = tid + l * NT;
    return Transposed ? e / BM : e % kBK;
  };
  auto a_row = [&](int l) {
    const int e = tid + l * NT;
    return Transposed ? e % BM : e / kBK;
  };
  // B: n-fast: kk = warp + (NT / 32) * (l / (BN / 32)), n = lane + 32 * (l % (BN / 32));
  //    k-fast: kk = tid % 8, n = tid / 8 + l * NT / 8.
  auto b_kk = [&](int l) { return KFast ? (tid & 7) : warp + (NT / 32) * (l / (BN / 32)); };
  auto b_n = [&](int l) { return KFast ? (tid >> 3) + l * (NT / 8) : lane + 32 * (l % (BN / 32)); };

  for (std::int64_t bg = blockIdx.z; bg < a.bg_count; bg += gridDim.z) {
    const std::int64_t b = bg / a.groups;
    const std::int64_t g = bg - b * a.groups;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    const float* wg = a.w + g * a.w_gs;
    for (std::int64_t rt = blockIdx.y; rt < a.row_tiles; rt += gridDim.y) {
      const int row0 = static_cast<int>(rt * BM);
      // Clusters: consecutive x blocks (one cluster) share a column tile, one slice each.
      const int split = Cluster ? a.split : 1;
      const int slice = Cluster ? static_cast<int>(blockIdx.x % split) : 0;
      const int step_begin = static_cast<int>(static_cast<std::int64_t>(a.steps) * slice / split);
      const int step_end =
          static_cast<int>(static_cast<std::int64_t>(a.steps) * (slice + 1) / split);
      for (std::int64_t ct = blockIdx.x / split; ct < a.col_tiles; ct += gridDim.x / split) {
        const std::int64_t col0 = ct * BN;
        float acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
        float ra[AL], rb[BL];
        // B positions of this tile: pos = pt + n_local * ns + m * ms. When every position the
        // tile can touch lies inside the input (and every column exists), loads skip the checks.
        const std::int64_t pt = col0 * a.ns + a.off;
        const int nlim = static_cast<int>(min(static_cast<std::int64_t>(BN), a.N - col0));
        const std::int64_t mspan = static_cast<std::int64_t>(a.T - 1) * a.ms;
        const bool interior = nlim == BN && pt + min(mspan, std::int64_t{0}) >= 0 &&
                              pt + (BN - 1) * a.ns + max(mspan, std::int64_t{0}) < a.in_frames;

        auto load = [&](int step) {
          const int r0 = step * kBK;
#pragma unroll
          for (int l = 0; l < AL; ++l) {
            const int r = r0 + a_kk(l);
            const int rowg = row0 + a_row(l);
            ra[l] = (r < a.R && rowg < a.M) ? __ldg(wg + rowg * a.a_is + r * a.a_rs) : 0.0f;
          }
#pragma unroll
          for (int l = 0; l < BL; ++l) {
            const int r = r0 + b_kk(l);
            int ci = r, m = 0;
            if (a.T != 1) {
              ci = __float2int_rz((static_cast<float>(r) + 0.5f) * a.inv_T);
              m = r - ci * a.T;
            }
            const int nl = b_n(l);
            const std::int64_t pos = pt + (nl * static_cast<int>(a.ns) + m * a.ms);
            float v = 0.0f;
            if (interior) {
              if (r < a.R) v = __ldg(xg + ci * a.x_cs + pos);
            } else if (r < a.R && nl < nlim &&
                       static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames)) {
              v = __ldg(xg + ci * a.x_cs + pos);
            }
            rb[l] = v;
          }
        };
        auto store = [&](int buf) {
#pragma unroll
          for (int l = 0; l < AL; ++l) As[buf][a_kk(l)][a_row(l)] = ra[l];
#pragma unroll
          for (int l = 0; l < BL; ++l) Bs[buf][b_kk(l)][b_n(l)] = rb[l];
        };

        load(step_begin);
        store(0);
        __syncthreads();
        for (int step = step_begin; step < step_end; ++step) {
          const int buf = (step - step_begin) & 1;
          const bool more = step + 1 < step_end;
          if (more) load(step + 1);
#pragma unroll
          for (int kk = 0; kk < kBK; ++kk) {
            float av[TM], bv[TN];
#pragma unroll
            for (int gi = 0; gi < AG; ++gi) {
              const float4 v = *reinterpret_cast<const float4*>(&As[buf][kk][gi * AGS + ty * 4]);
              av[gi * 4 + 0] = v.x;
              av[gi * 4 + 1] = v.y;
              av[gi * 4 + 2] = v.z;
              av[gi * 4 + 3] = v.w;
            }
#pragma unroll
            for (int gj = 0; gj < BG; ++gj) {
              const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][kk][gj * BGS + tx * 4]);
              bv[gj * 4 + 0] = v.x;
              bv[gj * 4 + 1] = v.y;
              bv[gj * 4 + 2] = v.z;
              bv[gj * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
              for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
          }
          if (more) store(buf ^ 1);
          __syncthreads();
        }

        gemm2_epilogue<BM, BN, TM, TN, Transposed, Cluster>(a, acc, smem, tid, ty, tx, b, g, row0,
                                                            col0, slice);
        __syncthreads();  // the next tile of this block reuses the shared buffers
      }
    }
  }
}

// ---- pipelined core (sm_80+): cp.async multi-stage shared-memory pipeline ----------------------
//
// The same operand maps and tiles, fed by cp.async (LDGSTS): each step's A and B tiles go from
// global straight to shared memory, kStages - 1 steps ahead of the FFMAs, with no staging
// registers; out-of-range operands are zero-filled by the copy (src-size 0), exactly the zeros
// the register core writes. B rows that are contiguous along the columns (pointwise Conv1d,
// the phase GEMM's x[c, q - m]) move as 16-byte copies where aligned and in range. Each warp
// computes a 16 x 64 (or 32 x 64) sub-tile: lanes 4 (rows) x 8 (columns), so a warp's fragment
// reads touch 4 and 8 distinct float4 (one shared-memory wavefront each); fragments are
// double-buffered in registers across the 8 reduction rows of a step.
constexpr int kStages = 4;

template <int BM, int BN, int TM, int TN, bool Transposed, bool KFast, bool Cluster>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), (BM / TM) * (BN / TN) >= 256 ? 2 : 4)
    conv_gemm_v2_pipe_kernel(Gemm2Args a) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int AL = kBK * BM / NT;
  constexpr int BL = kBK * BN / NT;
  constexpr int BV = kBK * BN / 4 / NT;  // 16-byte B vectors per thread (contiguous rows)
  static_assert(AL * NT == kBK * BM && BL * NT == kBK * BN && BV * NT * 4 == kBK * BN,
                "tile / thread mismatch");
  static_assert(NT % BM == 0 && NT % 32 == 0 && BN == 128 && TN == 8, "thread mapping");
  constexpr int LDA = BM + 4;
  constexpr int LDB = BN + 4;
  constexpr int AG = TM / 4, BG = TN / 4;
  constexpr int AGS = BM / AG, BGS = BN / BG;
  constexpr int kStageA = kBK * LDA, kStageB = kBK * LDB;
  constexpr int kPipe = kStages * (kStageA + kStageB);
  constexpr int PASSES = red_passes<BM, BN>();
  constexpr int RCOLS = BN / PASSES;
  constexpr int kRed = Cluster ? RCOLS * (BM + 4) : 0;
  static_assert(!Cluster || (Transposed && (PASSES == 1 || PASSES == TN / 4)), "split layout");
  __shared__ __align__(16) float smem[kPipe > kRed ? kPipe : kRed];
  float* const As = smem;
  float* const Bs = smem + kStages * kStageA;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // Warps tile the block as (BM / TM / 4) x 2; lanes within a warp as 4 (rows) x 8 (columns).
  const int tx = (warp & 1) * 8 + (lane & 7);
  const int ty = (warp >> 1) * 4 + (lane >> 3);

  // A slots: Conv1d (A rows contiguous in r): kk = tid % 8, row = tid / 8 + l * NT / 8;
  //          transposed (A columns contiguous in the row): kk = tid / BM + l * NT / BM,
  //          row = tid % BM.
  auto a_kk = [&](int l) { return Transposed ? tid / BM + l * (NT / BM) : (tid & 7); };
  auto a_row = [&](int l) { return Transposed ? tid % BM : (tid >> 3) + l * (NT / 8); };
  // B slots: k-fast: kk = tid % 8, n = tid / 8 + l * NT / 8; n-fast: row kk = tid / 32 +
  // v * NT / 32, columns lane * 4 + 0..3 (contiguous: one 16-byte copy) or, for strided
  // columns, lane + 32 j.
  const bool b_contig = a.ns == 1;

  for (std::int64_t bg = blockIdx.z; bg < a.bg_count; bg += gridDim.z) {
    const std::int64_t b = bg / a.groups;
    const std::int64_t g = bg - b * a.groups;
    const float* xg = a.x + b * a.x_bs + g * a.cin_g * a.x_cs;
    const float* wg = a.w + g * a.w_gs;
    for (std::int64_t rt = blockIdx.y; rt < a.row_tiles; rt += gridDim.y) {
      const int row0 = static_cast<int>(rt * BM);
      const int split = Cluster ? a.split : 1;
      const int slice = Cluster ? static_cast<int>(blockIdx.x % split) : 0;
      const int step_begin = static_cast<int>(static_cast<std::int64_t>(a.steps) * slice / split);
      const int step_end =
          static_cast<int>(static_cast<std::int64_t>(a.steps) * (slice + 1) / split);
      const int nsteps = step_end - step_begin;
      for (std::int64_t ct = blockIdx.x / split; ct < a.col_tiles; ct += gridDim.x / split) {
        const std::int64_t col0 = ct * BN;
        const std::int64_t pt = col0 * a.ns + a.off;
        const int nlim = static_cast<int>(min(static_cast<std::int64_t>(BN), a.N - col0));

        // Issues the copies of reduction step `step` into pipeline stage `st`.
        auto load = [&](int step, int st) {
          const int r0 = step * kBK;
          float* as = As + st * kStageA;
          float* bs = Bs + st * kStageB;
#pragma unroll
          for (int l = 0; l < AL; ++l) {
            const int r = r0 + a_kk(l);
            const int rowg = row0 + a_row(l);
            const bool ok = r < a.R && rowg < a.M;
            const float* src = ok ? wg + (rowg * a.a_is + r * a.a_rs) : wg;
            cp_async4(smem_addr(as + a_kk(l) * LDA + a_row(l)), src, ok);
          }
          if constexpr (KFast) {
            const int kk = tid & 7;
            const int r = r0 + kk;
            int ci = r, m = 0;
            if (a.T != 1) {
              ci = __float2int_rz((static_cast<float>(r) + 0.5f) * a.inv_T);
              m = r - ci * a.T;
            }
            const float* xr = xg + ci * a.x_cs;
            const std::int64_t pm = pt + static_cast<std::int64_t>(m) * a.ms;
#pragma unroll
            for (int l = 0; l < BL; ++l) {
              const int nl = (tid >> 3) + l * (NT / 8);
              const std::int64_t pos = pm + static_cast<std::int64_t>(nl) * a.ns;
              const bool ok =
                  r < a.R && nl < nlim &&
                  static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames);
              cp_async4(smem_addr(bs + kk * LDB + nl), ok ? xr + pos : xg, ok);
            }
          } else {
#pragma unroll
            for (int v = 0; v < BV; ++v) {
              const int kk = (tid >> 5) + v * (NT / 32);
              const int r = r0 + kk;
              int ci = r, m = 0;
              if (a.T != 1) {
                ci = __float2int_rz((static_cast<float>(r) + 0.5f) * a.inv_T);
                m = r - ci * a.T;
              }
              const bool rok = r < a.R;
              const float* xr = xg + (rok ? ci * a.x_cs : 0);
              const std::int64_t pm = pt + static_cast<std::int64_t>(m) * a.ms;
              float* brow = bs + kk * LDB;
              if (b_contig) {
                const int n0 = lane * 4;
                const std::int64_t pos = pm + n0;
                const float* src = xr + pos;
                if (rok && n0 + 3 < nlim && pos >= 0 && pos + 3 < a.in_frames &&
                    (reinterpret_cast<std::uintptr_t>(src) & 15) == 0) {
                  cp_async16(smem_addr(brow + n0), src);
                } else {
#pragma unroll
                  for (int j = 0; j < 4; ++j) {
                    const bool ok = rok && n0 + j < nlim &&
                                    static_cast<std::uint64_t>(pos + j) <
                                        static_cast<std::uint64_t>(a.in_frames);
                    cp_async4(smem_addr(brow + n0 + j), ok ? src + j : xg, ok);
                  }
                }
              } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                  const int nl = lane + 32 * j;
                  const std::int64_t pos = pm + static_cast<std::int64_t>(nl) * a.ns;
                  const bool ok =
                      rok && nl < nlim &&
                      static_cast<std::uint64_t>(pos) < static_cast<std::uint64_t>(a.in_frames);
                  cp_async4(smem_addr(brow + nl), ok ? xr + pos : xg, ok);
                }
              }
            }
          }
        };

        float acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
          if (s < nsteps) load(step_begin + s, s);
          cp_async_commit();
        }
        for (int i = 0; i < nsteps; ++i) {
          cp_async_wait<kStages - 2>();
          __syncthreads();  // step i landed for every thread; stage (i - 1) % kStages is free
          {
            const int nx = i + kStages - 1;
            if (nx < nsteps) load(step_begin + nx, nx % kStages);
            cp_async_commit();
          }
          const int st = i % kStages;
          const float* as = As + st * kStageA + ty * 4;
          const float* bs = Bs + st * kStageB + tx * 4;
          float av[2][TM], bv[2][TN];
          auto frag = [&](int kk, int p) {
#pragma unroll
            for (int gi = 0; gi < AG; ++gi) {
              const float4 v = *reinterpret_cast<const float4*>(as + kk * LDA + gi * AGS);
              av[p][gi * 4 + 0] = v.x;
              av[p][gi * 4 + 1] = v.y;
              av[p][gi * 4 + 2] = v.z;
              av[p][gi * 4 + 3] = v.w;
            }
#pragma unroll
            for (int gj = 0; gj < BG; ++gj) {
              const float4 v = *reinterpret_cast<const float4*>(bs + kk * LDB + gj * BGS);
              bv[p][gj * 4 + 0] = v.x;
              bv[p][gj * 4 + 1] = v.y;
              bv[p][gj * 4 + 2] = v.z;
              bv[p][gj * 4 + 3] = v.w;
            }
          };
          frag(0, 0);
#pragma unroll
          for (int kk = 0; kk < kBK; ++kk) {
            if (kk + 1 < kBK) frag(kk + 1, (kk + 1) & 1);  // next row's fragments in flight
            const int p = kk & 1;
#pragma unroll
            for (int i2 = 0; i2 < TM; ++i2)
#pragma unroll
              for (int j = 0; j < TN; ++j) acc[i2][j] = fmaf(av[p][i2], bv[p][j], acc[i2][j]);
          }
        }
        cp_async_wait<0>();
        __syncthreads();  // the epilogue's cluster staging reuses the pipeline's shared memory

        gemm2_epilogue<BM, BN, TM, TN, Transposed, Cluster>(a, acc, smem, tid, ty, tx, b, g, row0,
                                                            col0, slice);
        __syncthreads();  // the next tile of this block reuses the shared buffers
      }
    }
  }
}

// Core of the GEMM v2 family: the cp.async pipelined core (sm_80+, the default) or the register
// prefetch core. Benchmarking knob: CONVBANK_CUDA_GEMM2_CORE=0 forces the register core
// (read once).
bool use_pipe_core() {
  static const bool pipe = [] {
    const char* v = std::getenv("CONVBANK_CUDA_GEMM2_CORE");
    if (v != nullptr && std::atoi(v) == 0) return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 8;
  }();
  return pipe;
}

template <int BM, int BN, int TM, int TN, bool Transposed>
void launch_tile(Gemm2Args a, cudaStream_t stream, const char* name, const LaunchShape& shape) {
  constexpr int NT = (BM / TM) * (BN / TN);
  a.row_tiles = (a.M + BM - 1) / BM;
  a.col_tiles = (a.N + BN - 1) / BN;
  if constexpr (Transposed) {
    if (a.split > 1) {
      // One cluster of `split` blocks per column tile (grid x a multiple of the cluster size).
      const std::int64_t split = a.split;
      const dim3 grid(static_cast<unsigned>(grid_dim(a.col_tiles, kMaxGridX / split) * split),
                      grid_dim(a.row_tiles, kMaxGridYZ), grid_dim(a.bg_count, kMaxGridYZ));
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = grid;
      cfg.blockDim = dim3(NT);
      cfg.dynamicSmemBytes = 0;
      cfg.stream = stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = static_cast<unsigned>(split);
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      const cudaError_t st =
          use_pipe_core()
              ? cudaLaunchKernelEx(&cfg,
                                   conv_gemm_v2_pipe_kernel<BM, BN, TM, TN, true, false, true>, a)
              : cudaLaunchKernelEx(&cfg, conv_gemm_v2_kernel<BM, BN, TM, TN, true, false, true>, a);
      if (st != cudaSuccess) {
        cudaGetLastError();  // clear it; report it with the kernel and the shape
        throw Error(std::string("CUDA: kernel ") + name + " failed to launch for " + shape.text() +
                    ": " + cudaGetErrorName(st) + " (" + cudaGetErrorString(st) + ")");
      }
      check_launch(name, shape);
      return;
    }
  }
  const dim3 grid(grid_dim(a.col_tiles, kMaxGridX), grid_dim(a.row_tiles, kMaxGridYZ),
                  grid_dim(a.bg_count, kMaxGridYZ));
  if (use_pipe_core()) {
    if (!Transposed && a.b_kfast) {
      conv_gemm_v2_pipe_kernel<BM, BN, TM, TN, Transposed, !Transposed, false>
          <<<grid, NT, 0, stream>>>(a);
    } else {
      conv_gemm_v2_pipe_kernel<BM, BN, TM, TN, Transposed, false, false>
          <<<grid, NT, 0, stream>>>(a);
    }
  } else if (!Transposed && a.b_kfast) {
    conv_gemm_v2_kernel<BM, BN, TM, TN, Transposed, !Transposed, false><<<grid, NT, 0, stream>>>(a);
  } else {
    conv_gemm_v2_kernel<BM, BN, TM, TN, Transposed, false, false><<<grid, NT, 0, stream>>>(a);
  }
  check_launch(name, shape);
}

template <bool Transposed>
void launch_any(const Gemm2Args& a, GemmTile tile, cudaStream_t stream, const char* name,
                const LaunchShape& shape) {
  switch (tile) {
    case GemmTile::k128x128:
      launch_tile<128, 128, 8, 8, Transposed>(a, stream, name, shape);
      break;
    case GemmTile::k64x128:
      launch_tile<64, 128, 8, 8, Transposed>(a, stream, name, shape);
      break;
    case GemmTile::k32x128:
    case GemmTile::k16x128:
      launch_tile<32, 128, 4, 8, Transposed>(a, stream, name, shape);
      break;
  }
}

Gemm2Args common_args(TensorView<const float> x, const float* w, const float* bias,
                      TensorView<float> y) {
  Gemm2Args a{};
  set_views(a, x, w, bias, y);
  a.in_frames = x.frames();
  a.out_frames = y.frames();
  a.split = 1;
  a.vec_store = (reinterpret_cast<std::uintptr_t>(y.data()) % 16 == 0) &&
                y.channel_stride() % 4 == 0 && y.batch_stride() % 4 == 0;
  return a;
}

constexpr std::int64_t kMaxR = 1 << 22;  // the float reciprocal split of r is exact below this

}  // namespace

bool conv1d_gemm_v2_supported(const Conv1dParams& p) {
  const std::int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  const std::int64_t R = cin_g * p.kernel_size;
  const bool zero_pad =
      p.padding_mode == PaddingMode::kZeros || (p.pad_left == 0 && p.pad_right == 0);
  return zero_pad && R >= 32 && R < kMaxR && cout_g * R < (1LL << 31) && p.stride < (1LL << 22) &&
         p.dilation * p.kernel_size < (1LL << 30);
}

int conv_transpose1d_gemm_v2_steps(const ConvTranspose1dParams& p) {
  const std::int64_t R = p.in_channels / p.groups * (p.kernel_size / p.stride);
  return static_cast<int>((R + kBK - 1) / kBK);
}

bool conv_transpose1d_gemm_v2_supported(const ConvTranspose1dParams& p) {
  const std::int64_t cin_g = p.in_channels / p.groups, cout_g = p.out_channels / p.groups;
  if (cout_g != 1 || p.dilation != 1 || p.stride < 32 || p.kernel_size % p.stride != 0) {
    return false;
  }
  const std::int64_t R = cin_g * (p.kernel_size / p.stride);
  return R < kMaxR && cin_g * p.kernel_size < (1LL << 31);
}

void launch_conv1d_gemm_v2(const Conv1dParams& p, TensorView<const float> x, const float* w,
                           const float* bias, TensorView<float> y, cudaStream_t stream,
                           GemmTile tile, const char* name) {
  Gemm2Args a = common_args(x, w, bias, y);
  a.groups = p.groups;
  a.bg_count = p.batch * p.groups;
  a.cin_g = static_cast<int>(p.in_channels / p.groups);
  a.cout_g = static_cast<int>(p.out_channels / p.groups);
  a.T = static_cast<int>(p.kernel_size);
  a.inv_T = 1.0f / static_cast<float>(a.T);
  a.R = a.cin_g * a.T;
  a.M = a.cout_g;
  a.N = p.out_frames;
  a.w_gs = static_cast<std::int64_t>(a.cout_g) * a.R;
  a.a_is = a.R;
  a.a_rs = 1;
  a.ns = p.stride;
  a.ms = static_cast<int>(p.dilation);
  a.off = -p.pad_left;
  a.P = 0;
  a.b_kfast = p.stride >= 4 ? 1 : 0;
  a.steps = (a.R + kBK - 1) / kBK;
  launch_any<false>(a, tile, stream, name, p);
}

void launch_conv_transpose1d_gemm_v2(const ConvTranspose1dParams& p, TensorView<const float> x,
                                     const float* w, const float* bias, TensorView<float> y,
                                     cudaStream_t stream, GemmTile tile, int split,
                                     const char* name) {
  Gemm2Args a = common_args(x, w, bias, y);
  a.groups = p.groups;
  a.bg_count = p.batch * p.groups;
  a.cin_g = static_cast<int>(p.in_channels / p.groups);
  a.cout_g = 1;
  a.P = static_cast<int>(p.stride);
  a.T = static_cast<int>(p.kernel_size / p.stride);
  a.inv_T = 1.0f / static_cast<float>(a.T);
  a.R = a.cin_g * a.T;
  a.M = a.P;
  a.q0 = p.padding / p.stride;
  a.pad = p.padding;
  a.N = (p.out_frames - 1 + p.padding) / p.stride - a.q0 + 1;
  a.w_gs = static_cast<std::int64_t>(a.cin_g) * p.kernel_size;
  a.a_is = 1;
  a.a_rs = a.P;
  a.ns = 1;
  a.ms = -1;
  a.off = a.q0;
  a.b_kfast = 0;
  a.vec_store = 0;
  a.steps = (a.R + kBK - 1) / kBK;
  a.split = split < 1 ? 1 : (split > kMaxSplit ? kMaxSplit : split);
  launch_any<true>(a, tile, stream, name, p);
}

}  // namespace convbank::detail::cuda
