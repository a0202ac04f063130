// The CUDA side of the streams (include/convbank/stream.hpp): a StreamContext owns one
// cudaStream_t, the pinned host staging and a fixed-capacity cache of CUDA graphs. The
// frame bookkeeping stays in src/core/stream.cpp, shared with the CPU path; it hands over each
// process() as a list of StreamOps, which this file replays (graph), captures, or enqueues.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "convbank/error.hpp"
#include "core/backend.hpp"

namespace convbank::detail::cuda {

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorName(status) + " (" +
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

// Row copies and fills as kernels. A graph's memcpy node goes through a copy engine and costs
// several microseconds of setup whatever its size, and a stream call has up to four of them (in,
// two history shifts, out), which was most of the per-chunk latency. A kernel node reads the
// pinned input and writes the pinned output directly (the staging is mapped into the device's
// address space) and keeps the whole graph on the SMs. Pitches are in floats.
__global__ void copy_rows_kernel(float* __restrict__ dst, std::size_t dst_pitch,
                                 const float* __restrict__ src, std::size_t src_pitch,
                                 std::size_t row_floats, std::size_t rows) {
  for (std::size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < row_floats;
         i += std::size_t{gridDim.x} * blockDim.x) {
      dst[r * dst_pitch + i] = src[r * src_pitch + i];
    }
  }
}

__global__ void zero_rows_kernel(float* __restrict__ dst, std::size_t dst_pitch,
                                 std::size_t row_floats, std::size_t rows) {
  for (std::size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < row_floats;
         i += std::size_t{gridDim.x} * blockDim.x) {
      dst[r * dst_pitch + i] = 0.0f;
    }
  }
}

dim3 rows_grid(std::size_t row_floats, std::size_t rows, unsigned threads) {
  const std::size_t x = std::min<std::size_t>((row_floats + threads - 1) / threads, 1024);
  const std::size_t y = std::min<std::size_t>(rows, 65535);
  return dim3(static_cast<unsigned>(std::max<std::size_t>(x, 1)),
              static_cast<unsigned>(std::max<std::size_t>(y, 1)));
}

// Queues one op on `s`; throws Error (from the convolution dispatch) or returns the error.
// `kernel_copies`: row copies and fills as kernels (all pointers device-accessible), else as
// cudaMemcpy2DAsync / cudaMemset2DAsync.
cudaError_t enqueue(const StreamOp& op, cudaStream_t s, bool kernel_copies) {
  constexpr unsigned kThreads = 256;
  switch (op.kind) {
    case StreamOp::Kind::kCopy2D:
      if (kernel_copies) {
        const std::size_t n = op.row_bytes / sizeof(float);
        copy_rows_kernel<<<rows_grid(n, op.rows, kThreads), kThreads, 0, s>>>(
            static_cast<float*>(op.dst), op.dst_pitch / sizeof(float),
            static_cast<const float*>(op.src), op.src_pitch / sizeof(float), n, op.rows);
        return cudaGetLastError();
      }
      return cudaMemcpy2DAsync(op.dst, op.dst_pitch, op.src, op.src_pitch, op.row_bytes, op.rows,
                               to_cuda(op.copy), s);
    case StreamOp::Kind::kZero2D:
      if (kernel_copies) {
        const std::size_t n = op.row_bytes / sizeof(float);
        zero_rows_kernel<<<rows_grid(n, op.rows, kThreads), kThreads, 0, s>>>(
            static_cast<float*>(op.dst), op.dst_pitch / sizeof(float), n, op.rows);
        return cudaGetLastError();
      }
      return cudaMemset2DAsync(op.dst, op.dst_pitch, 0, op.row_bytes, op.rows, s);
    case StreamOp::Kind::kConv1d: {
      const Conv1dParams& p = op.conv;
      const TensorView<const float> in(op.in, Shape{p.batch, p.in_channels, p.in_frames},
                                       op.in_batch_stride, op.in_channel_stride, Device::kCuda);
      const TensorView<float> out(op.out, Shape{p.batch, p.out_channels, p.out_frames},
                                  op.out_batch_stride, op.out_channel_stride, Device::kCuda);
      conv1d(p, in, op.weight, op.bias, out, s);
      return cudaSuccess;
    }
    case StreamOp::Kind::kConvTranspose1d: {
      const ConvTranspose1dParams& p = op.transpose;
      const TensorView<const float> in(op.in, Shape{p.batch, p.in_channels, p.in_frames},
                                       op.in_batch_stride, op.in_channel_stride, Device::kCuda);
      const TensorView<float> out(op.out, Shape{p.batch, p.out_channels, p.out_frames},
                                  op.out_batch_stride, op.out_channel_stride, Device::kCuda);
      conv_transpose1d(p, in, op.weight, op.bias, out, s);
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidValue;
}

void enqueue_all(const StreamOp* ops, std::size_t count, cudaStream_t s, bool kernel_copies) {
  for (std::size_t i = 0; i < count; ++i) check(enqueue(ops[i], s, kernel_copies), "stream op");
}

// CONVBANK_CUDA_STREAM_COPIES=memcpy selects the copy-engine path, for A/B latency measurements
// (docs/streaming.md); anything else, or unset, the kernel path.
bool kernel_copies_requested() {
  const char* v = std::getenv("CONVBANK_CUDA_STREAM_COPIES");
  return v == nullptr || std::strcmp(v, "memcpy") != 0;
}

}  // namespace

StreamOp make_op(StreamOp::Kind kind) noexcept {
  StreamOp op;
  std::memset(static_cast<void*>(&op), 0, sizeof(op));
  op.kind = kind;
  return op;
}

struct StreamContext {
  struct Entry {
    std::vector<StreamOp> ops;  // capacity max_ops, the first `count` are the key
    std::size_t count = 0;
    cudaGraphExec_t exec = nullptr;
  };
  cudaStream_t stream = nullptr;
  float* pinned_in = nullptr;
  float* pinned_out = nullptr;
  std::size_t max_ops = 0;
  bool kernel_copies = true;
  std::vector<Entry> cache;  // all slots allocated up front
  std::size_t used = 0;

  ~StreamContext() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (Entry& e : cache) {
      if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
    }
    if (pinned_in != nullptr) cudaFreeHost(pinned_in);
    if (pinned_out != nullptr) cudaFreeHost(pinned_out);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  const Entry* find(const StreamOp* ops, std::size_t count) const noexcept {
    for (std::size_t i = 0; i < used; ++i) {
      const Entry& e = cache[i];
      if (e.count == count && std::memcmp(e.ops.data(), ops, count * sizeof(StreamOp)) == 0) {
        return &e;
      }
    }
    return nullptr;
  }

  // Captures `ops` into the next free slot; returns it, or nullptr when the cache is full or
  // the op list is too long for a slot.
  const Entry* capture(const StreamOp* ops, std::size_t count) {
    if (used == cache.size() || count > max_ops) return nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      enqueue_all(ops, count, stream, kernel_copies);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t st = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(st, "cudaGraphInstantiate");
    Entry& e = cache[used++];
    std::memcpy(static_cast<void*>(e.ops.data()), ops, count * sizeof(StreamOp));
    e.count = count;
    e.exec = exec;
    return &e;
  }
};

StreamContext* stream_context_create(std::size_t in_floats, std::size_t out_floats,
                                     std::size_t graphs, std::size_t max_ops) {
  auto* ctx = new StreamContext;
  try {
    check(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // Mapped, so that kernels read and write the staging directly. Under unified addressing
    // (every 64-bit platform CUDA supports) the device pointer is the host pointer; if it were
    // not, the ops (which carry host pointers) go through the copy engines instead.
    const auto alloc_mapped = [&](std::size_t floats) {
      void* p = nullptr;
      check(
          cudaHostAlloc(&p, std::max<std::size_t>(1, floats) * sizeof(float), cudaHostAllocMapped),
          "cudaHostAlloc");
      void* d = nullptr;
      if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess || d != p) {
        cudaGetLastError();
        ctx->kernel_copies = false;
      }
      return static_cast<float*>(p);
    };
    ctx->kernel_copies = kernel_copies_requested();
    ctx->pinned_in = alloc_mapped(in_floats);
    ctx->pinned_out = alloc_mapped(out_floats);
    ctx->max_ops = max_ops;
    ctx->cache.resize(graphs);
    for (auto& e : ctx->cache) e.ops.resize(max_ops);
  } catch (...) {
    delete ctx;
    throw;
  }
  return ctx;
}

void stream_context_destroy(StreamContext* ctx) noexcept {
  delete ctx;
}

float* stream_context_pinned_in(StreamContext* ctx) noexcept {
  return ctx->pinned_in;
}
float* stream_context_pinned_out(StreamContext* ctx) noexcept {
  return ctx->pinned_out;
}

bool stream_context_run(StreamContext* ctx, const StreamOp* ops, std::size_t count, bool use_graph,
                        bool wait) noexcept {
  try {
    if (count > 0) {
      const StreamContext::Entry* e = nullptr;
      if (use_graph) {
        e = ctx->find(ops, count);
        if (e == nullptr) e = ctx->capture(ops, count);
      }
      if (e != nullptr) {
        check(cudaGraphLaunch(e->exec, ctx->stream), "cudaGraphLaunch");
      } else {
        enqueue_all(ops, count, ctx->stream, ctx->kernel_copies);
      }
    }
    if (wait) check(cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize");
    return true;
  } catch (...) {
    return false;
  }
}

std::size_t stream_context_graphs(const StreamContext* ctx) noexcept {
  return ctx->used;
}

}  // namespace convbank::detail::cuda
