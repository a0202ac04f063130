// The CUDA side of the streams (include/convbank/stream.hpp): a StreamContext owns one
// cudaStream_t, the pinned host staging and a fixed-capacity cache of CUDA graphs. The
// frame bookkeeping stays in src/core/stream.cpp, shared with the CPU path; it hands over each
// process() as a list of StreamOps, which this file replays (graph), captures, or enqueues.
#include <cuda_runtime.h>

#include <algorithm>
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

// Queues one op on `s`; throws Error (from the convolution dispatch) or returns the error.
cudaError_t enqueue(const StreamOp& op, cudaStream_t s) {
  switch (op.kind) {
    case StreamOp::Kind::kCopy2D:
      return cudaMemcpy2DAsync(op.dst, op.dst_pitch, op.src, op.src_pitch, op.row_bytes, op.rows,
                               to_cuda(op.copy), s);
    case StreamOp::Kind::kZero2D:
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

void enqueue_all(const StreamOp* ops, std::size_t count, cudaStream_t s) {
  for (std::size_t i = 0; i < count; ++i) check(enqueue(ops[i], s), "stream op");
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
      enqueue_all(ops, count, stream);
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
    void* p = nullptr;
    check(cudaHostAlloc(&p, std::max<std::size_t>(1, in_floats) * sizeof(float),
                        cudaHostAllocDefault),
          "cudaHostAlloc");
    ctx->pinned_in = static_cast<float*>(p);
    p = nullptr;
    check(cudaHostAlloc(&p, std::max<std::size_t>(1, out_floats) * sizeof(float),
                        cudaHostAllocDefault),
          "cudaHostAlloc");
    ctx->pinned_out = static_cast<float*>(p);
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
        enqueue_all(ops, count, ctx->stream);
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
