// Conv1dStream, ConvTranspose1dStream, StreamChain: the carried state, the frame bookkeeping
// that makes streamed output equal offline output, and dispatch to the backend's real-time
// (workspace, single-thread) entries. docs/streaming.md derives the formulas used here.
#include "convbank/stream.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/backend.hpp"
#include "cpu/workspace.hpp"

namespace convbank {

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return -floor_div(-a, b);
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

void check_prepare_args(const char* who, std::int64_t max_frames, std::int64_t batch,
                        Device device) {
  if (max_frames < 1) {
    throw Error(std::string(who) + ": max_frames must be >= 1, got " + str(max_frames));
  }
  if (batch < 1) throw Error(std::string(who) + ": batch must be >= 1, got " + str(batch));
  if (device == Device::kCuda && !detail::cuda::available()) {
    throw Error(
        std::string(who) + ": prepare(..., Device::kCuda) needs a CUDA device, but " +
        (detail::cuda::built() ? "none is available" : "this convbank was built without CUDA") +
        "; prepare with Device::kCpu");
  }
}

bool view_ok(const TensorView<const float>& v, std::int64_t batch, std::int64_t channels) {
  return v.device() == Device::kCpu && v.data() != nullptr && v.batch() == batch &&
         v.channels() == channels;
}

bool out_ok(const TensorView<float>& v, std::int64_t batch, std::int64_t channels,
            std::int64_t frames) {
  if (frames == 0) return v.batch() == batch && v.channels() == channels;
  return v.device() == Device::kCpu && v.data() != nullptr && v.batch() == batch &&
         v.channels() == channels && v.frames() >= frames;
}

// Drops the first `consumed` frames of every row of a (batch, channels, capacity) buffer that
// holds `held` frames per row.
void shift_rows(Tensor& buffer, std::int64_t consumed, std::int64_t held) {
  if (consumed <= 0 || held <= consumed) return;
  TensorView<float> v = buffer.view();
  for (std::int64_t b = 0; b < v.batch(); ++b) {
    for (std::int64_t c = 0; c < v.channels(); ++c) {
      float* row = v.channel(b, c);
      std::memmove(row, row + consumed, static_cast<std::size_t>(held - consumed) * sizeof(float));
    }
  }
}

// Copies in[..., first:first+count] to buffer[..., at:at+count].
void append_rows(Tensor& buffer, TensorView<const float> in, std::int64_t first, std::int64_t count,
                 std::int64_t at) {
  if (count <= 0) return;
  TensorView<float> v = buffer.view();
  for (std::int64_t b = 0; b < v.batch(); ++b) {
    for (std::int64_t c = 0; c < v.channels(); ++c) {
      std::memcpy(v.channel(b, c) + at, in.channel(b, c) + first,
                  static_cast<std::size_t>(count) * sizeof(float));
    }
  }
}

void zero_rows(Tensor& buffer, std::int64_t b_first, std::int64_t b_last, std::int64_t from,
               std::int64_t count) {
  if (count <= 0) return;
  TensorView<float> v = buffer.view();
  for (std::int64_t b = b_first; b < b_last; ++b) {
    for (std::int64_t c = 0; c < v.channels(); ++c) {
      std::fill(v.channel(b, c) + from, v.channel(b, c) + from + count, 0.0f);
    }
  }
}

using detail::cuda::CopyKind;
using detail::cuda::StreamOp;

// Graphs a stream (or chain) prepared for CUDA can hold: one per distinct op list, i.e. per
// chunk length and stride phase (docs/streaming.md). Beyond it, new op lists run uncaptured.
constexpr std::size_t kCudaGraphCache = 64;

// The CUDA resources of a stream or chain prepared for Device::kCuda: the context (cudaStream_t,
// pinned staging, graph cache, in src/cuda) and the op lists, all sized in prepare().
struct CudaRuntime {
  detail::cuda::StreamContext* ctx = nullptr;
  std::vector<StreamOp> ops;  // the call being recorded
  std::size_t count = 0;
  std::vector<StreamOp> pre;  // zero fills queued by reset(), run before the next call
  std::size_t pre_count = 0;
  bool failed = false;

  CudaRuntime(std::size_t max_ops, std::size_t max_pre) : ops(max_ops), pre(max_pre) {}
  ~CudaRuntime() { detail::cuda::stream_context_destroy(ctx); }
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  void open(std::size_t in_floats, std::size_t out_floats) {
    ctx = detail::cuda::stream_context_create(in_floats, out_floats, kCudaGraphCache, ops.size());
  }
  float* pinned_in() const noexcept { return detail::cuda::stream_context_pinned_in(ctx); }
  float* pinned_out() const noexcept { return detail::cuda::stream_context_pinned_out(ctx); }

  void push(const StreamOp& op) noexcept {
    if (count < ops.size()) {
      ops[count++] = op;
    } else {
      failed = true;
    }
  }
  bool run_pre() noexcept {
    bool ok = true;
    if (pre_count > 0) {
      ok = ctx != nullptr &&
           detail::cuda::stream_context_run(ctx, pre.data(), pre_count, false, false);
    }
    pre_count = 0;
    return ok;
  }
  void push_pre(const StreamOp& op) noexcept {
    if (pre_count == pre.size() && !run_pre()) failed = true;
    pre[pre_count++] = op;
  }
  // Runs what reset() queued, then the recorded call (graph replay or capture when
  // use_graph), and waits for this stream only.
  bool submit(bool use_graph) noexcept {
    bool ok = run_pre() && !failed;
    ok = ok && detail::cuda::stream_context_run(ctx, ops.data(), count, use_graph, true);
    count = 0;
    failed = false;
    return ok;
  }
};

StreamOp copy_op(float* dst, std::int64_t dst_pitch, const float* src, std::int64_t src_pitch,
                 std::int64_t frames, std::int64_t rows, CopyKind kind) noexcept {
  StreamOp op = detail::cuda::make_op(StreamOp::Kind::kCopy2D);
  op.copy = kind;
  op.dst = dst;
  op.dst_pitch = static_cast<std::size_t>(dst_pitch) * sizeof(float);
  op.src = src;
  op.src_pitch = static_cast<std::size_t>(src_pitch) * sizeof(float);
  op.row_bytes = static_cast<std::size_t>(frames) * sizeof(float);
  op.rows = static_cast<std::size_t>(rows);
  return op;
}

StreamOp zero_op(float* dst, std::int64_t dst_pitch, std::int64_t frames,
                 std::int64_t rows) noexcept {
  StreamOp op = detail::cuda::make_op(StreamOp::Kind::kZero2D);
  op.dst = dst;
  op.dst_pitch = static_cast<std::size_t>(dst_pitch) * sizeof(float);
  op.row_bytes = static_cast<std::size_t>(frames) * sizeof(float);
  op.rows = static_cast<std::size_t>(rows);
  return op;
}

// Where a stage's new frames come from: a host view (CPU), pinned staging (CUDA, copied host
// to device) or a device buffer (CUDA, a previous stage); a null view means zeros (padding).
// On CUDA the rows (b, c) must be evenly pitched: batch stride = channels * channel stride.
struct Source {
  TensorView<const float> view;
  CopyKind kind = CopyKind::kDeviceToDevice;
};

// Packs a host view into dense pinned rows, and back.
void pack_rows(TensorView<const float> in, float* dst) noexcept {
  const std::int64_t n = in.frames();
  for (std::int64_t b = 0; b < in.batch(); ++b) {
    for (std::int64_t c = 0; c < in.channels(); ++c) {
      std::memcpy(dst + (b * in.channels() + c) * n, in.channel(b, c),
                  static_cast<std::size_t>(n) * sizeof(float));
    }
  }
}
void unpack_rows(const float* src, std::int64_t frames, TensorView<float> out) noexcept {
  for (std::int64_t b = 0; b < out.batch(); ++b) {
    for (std::int64_t c = 0; c < out.channels(); ++c) {
      std::memcpy(out.channel(b, c), src + (b * out.channels() + c) * frames,
                  static_cast<std::size_t>(frames) * sizeof(float));
    }
  }
}

// One process() or flush() of a stream or chain prepared for CUDA: stages the host input in
// pinned memory, lets `record` queue the device work (it returns the frames it writes to
// `dev_out`), copies them back through pinned memory, and waits for this stream only. Calls
// with input replay (or capture) a graph; flush (no input) runs uncaptured.
template <class Record>
Status cuda_call(CudaRuntime& rt, const TensorView<const float>* in, const Tensor& dev_out,
                 TensorView<float> out, std::int64_t* frames_out, Record&& record) noexcept {
  Source src;
  if (in != nullptr) {
    const std::int64_t n = in->frames();
    pack_rows(*in, rt.pinned_in());
    src.view = TensorView<const float>(rt.pinned_in(), in->shape(), in->channels() * n, n);
    src.kind = CopyKind::kHostToDevice;
  }
  const std::int64_t produced = record(src);
  if (produced > 0) {
    rt.push(copy_op(rt.pinned_out(), produced, dev_out.data(), dev_out.shape().frames, produced,
                    out.batch() * out.channels(), CopyKind::kDeviceToHost));
  }
  if (!rt.submit(in != nullptr)) return Status::kBackendFailure;
  if (produced > 0) unpack_rows(rt.pinned_out(), produced, out);
  *frames_out = produced;
  return Status::kOk;
}

// The device side of one stage: weights mirrored on the device, two history buffers (the
// carried frames move from one to the other, as overlapping copies are not allowed) and the
// stage's output buffer.
struct DeviceStage {
  Tensor weight;
  Tensor bias;
  Tensor history[2];
  int current = 0;
  Tensor out;

  template <class Layer>
  void allocate(const Layer& layer, Shape history_shape, Shape out_shape) {
    weight = layer.weight().to(Device::kCuda);
    bias = layer.options().bias ? layer.bias().to(Device::kCuda) : Tensor();
    history[0] = Tensor::zeros(history_shape, Device::kCuda);
    history[1] = Tensor::zeros(history_shape, Device::kCuda);
    current = 0;
    out = Tensor::zeros(out_shape, Device::kCuda);
  }
  void release() { *this = DeviceStage(); }
  float* buffer() const noexcept { return const_cast<float*>(history[current].data()); }
  const float* bias_or_null() const noexcept { return bias.empty() ? nullptr : bias.data(); }
};

// Shared by both stage kinds: the carried frames of a (batch, channels, capacity) history,
// held on the host (rt == nullptr) or on the device.
struct History {
  CudaRuntime* rt = nullptr;
  Tensor* host = nullptr;
  DeviceStage* dev = nullptr;
  std::int64_t batch = 0, channels = 0, capacity = 0;

  // Copies src's frames [first, first + count) (zeros when src has no data) to frame `at`.
  void append(const Source& src, std::int64_t first, std::int64_t count,
              std::int64_t at) const noexcept {
    if (count <= 0) return;
    if (rt == nullptr) {
      if (src.view.data() != nullptr) {
        append_rows(*host, src.view, first, count, at);
      } else {
        zero_rows(*host, 0, batch, at, count);
      }
      return;
    }
    float* dst = dev->buffer() + at;
    if (src.view.data() != nullptr) {
      rt->push(copy_op(dst, capacity, src.view.data() + first, src.view.channel_stride(), count,
                       batch * channels, src.kind));
    } else {
      rt->push(zero_op(dst, capacity, count, batch * channels));
    }
  }
  // Drops the first `consumed` of `held` frames.
  void shift(std::int64_t consumed, std::int64_t held) const noexcept {
    if (consumed <= 0 || held <= consumed) return;
    if (rt == nullptr) {
      shift_rows(*host, consumed, held);
      return;
    }
    const int next = dev->current ^ 1;
    rt->push(copy_op(dev->history[next].data(), capacity, dev->buffer() + consumed, capacity,
                     held - consumed, batch * channels, CopyKind::kDeviceToDevice));
    dev->current = next;
  }
  // Zeroes frames [from, from + count) of batch elements [b_first, b_last), before the next
  // call on the device.
  void zero(std::int64_t b_first, std::int64_t b_last, std::int64_t from,
            std::int64_t count) const noexcept {
    if (count <= 0) return;
    if (rt == nullptr) {
      zero_rows(*host, b_first, b_last, from, count);
      return;
    }
    rt->push_pre(zero_op(dev->buffer() + b_first * channels * capacity + from, capacity, count,
                         (b_last - b_first) * channels));
  }
  TensorView<const float> view(std::int64_t frames) const noexcept {
    const float* data = rt == nullptr ? host->data() : dev->buffer();
    return TensorView<const float>(data, Shape{batch, channels, frames}, channels * capacity,
                                   capacity, rt == nullptr ? Device::kCpu : Device::kCuda);
  }
};

// Streams zeros in chunks of each length, `calls` times, then resets (see warm_up()).
template <class Stream>
void warm_up_lengths(Stream& st, const char* who, const std::vector<std::int64_t>& lengths,
                     std::int64_t batch, std::int64_t max_frames, std::int64_t calls) {
  for (const std::int64_t n : lengths) {
    if (n < 1 || n > max_frames) {
      throw Error(std::string(who) + "::warm_up: length " + str(n) + " is not in [1, " +
                  str(max_frames) + "]");
    }
    const Tensor in = Tensor::zeros(Shape{batch, st.in_channels(), n});
    Tensor out(Shape{batch, st.out_channels(), std::max<std::int64_t>(1, st.max_output_frames(n))});
    for (std::int64_t i = 0; i < calls; ++i) {
      std::int64_t frames = 0;
      if (st.process(in.view(), out.view(), &frames) != Status::kOk) {
        throw Error(std::string(who) + "::warm_up: process() failed");
      }
    }
    st.reset();
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Conv1dStream
//
// The buffer holds the padded signal's frames [consumed, received): left padding is written at
// reset, right padding is appended by flush, so the backend sees no padding at all and output
// frame t reads buffer frames t' * stride + k * dilation, exactly as offline.
//
// Reflect and replicate padding: the left padding's slots are filled once the frames they copy
// have arrived (frames 1..padding_left for reflect, frame 0 for replicate); until then no output
// is computed. The last frames the right padding copies (padding_right + 1 for reflect, 1 for
// replicate) are kept in `tail`, as the history may have dropped them (stride), and flush
// appends the padding built from them. On CUDA the input arrives through the host, so the
// padding is built there too: from `head` (the first frames received) and `tail`, into the
// pinned staging, and copied into the device history with the call's other work. A chain's
// stages take their input on the device, so there only a Conv1dStream of its own pads this way.

struct Conv1dStream::State {
  std::shared_ptr<const Conv1d> layer;
  detail::Conv1dParams p;  // shape fields; frames set per call
  std::int64_t span = 1;   // dilation * (K - 1) + 1
  std::int64_t pad_left = 0;
  std::int64_t pad_right = 0;
  PaddingMode mode = PaddingMode::kZeros;  // zeros, reflect or replicate
  bool left_pending = false;               // the left padding still waits for the frames it copies
  Tensor tail;   // (batch, in_channels, keep): the last frames received, newest last
  Tensor right;  // (batch, in_channels, pad_right): flush's right padding
  Tensor head;   // CUDA: (batch, in_channels, left_needs()): the first frames received
  std::int64_t max_frames = 0;
  std::int64_t capacity = 0;
  Tensor buffer;              // (batch, in_channels, capacity)
  Tensor workspace;           // backend scratch
  std::int64_t buffered = 0;  // frames held in buffer
  std::int64_t skip = 0;      // input frames no output reads (stride > span)
  std::int64_t received = 0;  // unpadded input frames since reset
  bool finished = false;
  // CUDA (prepare(..., Device::kCuda)): the runtime (own_rt, or the chain's) and device state.
  std::unique_ptr<CudaRuntime> own_rt;
  DeviceStage dev;
  History hist;

  std::int64_t outputs_for(std::int64_t held) const {
    return held >= span ? (held - span) / p.stride + 1 : 0;
  }
  bool copies_padding() const { return mode != PaddingMode::kZeros; }
  // Frames `tail` keeps for the right padding: pad_right + 1 (reflect), 1 (replicate), 0 (zeros).
  std::int64_t keep() const {
    return mode == PaddingMode::kReflect ? pad_right + 1 : copies_padding() ? 1 : 0;
  }
  // Frames received before the left padding can be filled.
  std::int64_t left_needs() const { return mode == PaddingMode::kReflect ? pad_left + 1 : 1; }
  // The most frames the buffer holds between calls: the left padding and, while reflect's waits,
  // up to pad_left received frames; afterwards at most span - 1.
  std::int64_t waiting_max() const {
    return std::max(pad_left + (mode == PaddingMode::kReflect ? pad_left : 0), span - 1);
  }
  // CUDA: frames per row of the pinned input staging: a chunk, then the left padding built on
  // the host (at a fixed place, so that the calls that fill it replay one graph); or flush's
  // right padding.
  std::int64_t staged_frames() const {
    return copies_padding() ? std::max(max_frames + pad_left, pad_right) : max_frames;
  }

  // Allocates for chunks of 1..frames frames, on the host (rt == nullptr) or the device.
  void allocate(std::int64_t frames, std::int64_t batch, CudaRuntime* rt) {
    if (rt != nullptr && copies_padding() && rt != own_rt.get()) {
      throw Error("Conv1dStream: padding_mode '" + to_string(mode) +
                  "' streams on CUDA in a Conv1dStream of its own, not in a StreamChain prepared "
                  "for CUDA (its stages take their input on the device); use padding_mode zeros "
                  "in the chain, or prepare the chain for the CPU");
    }
    max_frames = frames;
    p.batch = batch;
    // Between calls at most waiting_max() frames wait; then a chunk or the right pad.
    capacity = waiting_max() + std::max(frames, pad_right);
    const Shape shape{batch, p.in_channels, capacity};
    hist = History{rt, &buffer, &dev, batch, p.in_channels, capacity};
    if (rt == nullptr) {
      dev.release();
      buffer = Tensor::zeros(shape);
      workspace = Tensor::zeros(
          Shape{1, 1, std::max<std::int64_t>(1, detail::cpu::conv1d_workspace_floats(p))});
      head = Tensor();
    } else {
      buffer = Tensor();
      workspace = Tensor();
      head = copies_padding() && pad_left > 0
                 ? Tensor::zeros(Shape{batch, p.in_channels, left_needs()})
                 : Tensor();
      const std::int64_t out_frames = std::max<std::int64_t>(
          1, outputs_for(waiting_max() + frames) + outputs_for(waiting_max() + pad_right));
      dev.allocate(*layer, shape, Shape{batch, p.out_channels, out_frames});
    }
    tail = copies_padding() ? Tensor::zeros(Shape{batch, p.in_channels, keep()}) : Tensor();
    right = copies_padding() && pad_right > 0
                ? Tensor::zeros(Shape{batch, p.in_channels, pad_right})
                : Tensor();
  }

  // Appends `count` frames of `src` from `first` and emits every output frame they complete
  // into `out` (a device view on CUDA). The same bookkeeping on both devices.
  std::int64_t run(const Source& src, std::int64_t first, std::int64_t count,
                   TensorView<float> out) noexcept {
    // finish() appends the right padding with `finished` set: the padding is not signal.
    if (copies_padding() && !finished) {
      remember_tail(src.view, first, count);
      if (left_pending && !head.empty()) remember_head(src.view, first, count);
    }
    const std::int64_t drop = std::min(skip, count);
    skip -= drop;
    hist.append(src, first + drop, count - drop, buffered);
    buffered += count - drop;
    if (left_pending) {
      if (received < left_needs()) return 0;
      if (hist.rt == nullptr) {
        fill_left();
      } else {
        fill_left_device();
      }
    }
    const std::int64_t produced = outputs_for(buffered);
    if (produced == 0) return 0;
    detail::Conv1dParams q = p;
    q.pad_left = q.pad_right = 0;
    q.in_frames = buffered;
    q.out_frames = produced;
    const TensorView<const float> x = hist.view(buffered);
    if (hist.rt == nullptr) {
      const float* bias = layer->options().bias ? layer->bias().data() : nullptr;
      detail::cpu::conv1d_workspace(q, x, layer->weight().data(), bias,
                                    out.slice_frames(0, produced), workspace.data());
    } else {
      StreamOp op = detail::cuda::make_op(StreamOp::Kind::kConv1d);
      op.conv = q;
      op.in = x.data();
      op.in_batch_stride = x.batch_stride();
      op.in_channel_stride = x.channel_stride();
      op.out = out.data();
      op.out_batch_stride = out.batch_stride();
      op.out_channel_stride = out.channel_stride();
      op.weight = dev.weight.data();
      op.bias = dev.bias_or_null();
      hist.rt->push(op);
    }
    const std::int64_t consumed = produced * p.stride;
    if (consumed <= buffered) {
      hist.shift(consumed, buffered);
      buffered -= consumed;
    } else {
      skip = consumed - buffered;
      buffered = 0;
    }
    return produced;
  }

  // Keeps the last `keep` of the frames received so far (host views: the caller's on the CPU,
  // the pinned staging on CUDA).
  void remember_tail(TensorView<const float> in, std::int64_t first, std::int64_t count) noexcept {
    const std::int64_t keep = this->keep(), fresh = std::min(count, keep);
    TensorView<float> t = tail.view();
    for (std::int64_t b = 0; b < t.batch(); ++b) {
      for (std::int64_t c = 0; c < t.channels(); ++c) {
        float* row = t.channel(b, c);
        std::memmove(row, row + fresh, static_cast<std::size_t>(keep - fresh) * sizeof(float));
        std::memcpy(row + keep - fresh, in.channel(b, c) + first + count - fresh,
                    static_cast<std::size_t>(fresh) * sizeof(float));
      }
    }
  }
  // CUDA: keeps the frames of the chunk just received (the last `count` of `received`) that are
  // among the first left_needs().
  void remember_head(TensorView<const float> in, std::int64_t first, std::int64_t count) noexcept {
    const std::int64_t from = received - count;
    append_rows(head, in, first, std::min(count, left_needs() - from), from);
  }
  // One row's left padding dst[0 .. pad_left) from its first frames, as F.pad fills it.
  void left_pad_row(const float* first, float* dst) const noexcept {
    for (std::int64_t j = 1; j <= pad_left; ++j) {
      dst[pad_left - j] = mode == PaddingMode::kReflect ? first[j] : first[0];
    }
  }
  // The left padding from the received frames at buffer[pad_left...].
  void fill_left() noexcept {
    left_pending = false;
    TensorView<float> v = buffer.view();
    for (std::int64_t b = 0; b < v.batch(); ++b) {
      for (std::int64_t c = 0; c < v.channels(); ++c) {
        float* row = v.channel(b, c);
        left_pad_row(row + pad_left, row);
      }
    }
  }
  // CUDA: the left padding built from `head` in the pinned staging past the largest chunk, and
  // copied into the history's first pad_left frames (no output has consumed them yet).
  void fill_left_device() noexcept {
    left_pending = false;
    const std::int64_t rows = p.batch * p.in_channels;
    float* pad = hist.rt->pinned_in() + rows * max_frames;
    const TensorView<const float> h = head.view();
    for (std::int64_t b = 0; b < p.batch; ++b) {
      for (std::int64_t c = 0; c < p.in_channels; ++c) {
        left_pad_row(h.channel(b, c), pad + (b * p.in_channels + c) * pad_left);
      }
    }
    hist.rt->push(
        copy_op(dev.buffer(), capacity, pad, pad_left, pad_left, rows, CopyKind::kHostToDevice));
  }
  // The right padding from the last frames received, as F.pad fills it.
  void fill_right() noexcept {
    TensorView<float> r = right.view();
    const TensorView<const float> t = tail.view();
    for (std::int64_t b = 0; b < r.batch(); ++b) {
      for (std::int64_t c = 0; c < r.channels(); ++c) {
        const float* last = t.channel(b, c) + keep() - 1;
        float* row = r.channel(b, c);
        for (std::int64_t j = 1; j <= pad_right; ++j) {
          row[j - 1] = mode == PaddingMode::kReflect ? last[-j] : *last;
        }
      }
    }
  }
  // Whether flush() can pad the stream as forward() would: reflect needs more frames than
  // either padding (PyTorch's rule), and the left padding must have been filled.
  bool flush_possible() const noexcept {
    if (received == 0 || !copies_padding()) return true;
    return !left_pending &&
           (mode != PaddingMode::kReflect || (received > pad_left && received > pad_right));
  }

  // process() after validation.
  std::int64_t step(const Source& src, std::int64_t n, TensorView<float> out) noexcept {
    received += n;
    return run(src, 0, n, out);
  }
  std::int64_t flush_frames() const noexcept {
    return received == 0 ? 0 : outputs_for(buffered + pad_right - std::min(skip, pad_right));
  }
  // flush() after validation.
  std::int64_t finish(TensorView<float> out) noexcept {
    const std::int64_t expected = flush_frames();
    finished = true;
    if (expected <= 0) return 0;
    if (!copies_padding() || pad_right == 0) return run(Source{}, 0, pad_right, out);
    fill_right();
    if (hist.rt == nullptr) return run(Source{right.view()}, 0, pad_right, out);
    // CUDA: through the pinned staging, which a flush has to itself.
    float* pinned = hist.rt->pinned_in();
    pack_rows(right.view(), pinned);
    const TensorView<const float> staged(pinned, right.shape(), p.in_channels * pad_right,
                                         pad_right);
    return run(Source{staged, CopyKind::kHostToDevice}, 0, pad_right, out);
  }
};

Conv1dStream::Conv1dStream(std::shared_ptr<const Conv1d> layer) : s_(std::make_unique<State>()) {
  if (!layer) throw Error("Conv1dStream: layer is null");
  const Conv1dOptions& o = layer->options();
  const bool padded = layer->padding_left() > 0 || layer->padding_right() > 0;
  if (o.padding_mode == PaddingMode::kCircular && padded) {
    throw Error(
        "Conv1dStream: padding_mode 'circular' cannot stream: it fills the start with "
        "the end of the whole signal; use padding_mode zeros, reflect or replicate, or "
        "forward() on the whole signal");
  }
  s_->layer = std::move(layer);
  detail::Conv1dParams& p = s_->p;
  p.in_channels = o.in_channels;
  p.out_channels = o.out_channels;
  p.kernel_size = o.kernel_size;
  p.stride = o.stride;
  p.dilation = o.dilation;
  p.groups = o.groups;
  s_->pad_left = s_->layer->padding_left();
  s_->pad_right = s_->layer->padding_right();
  s_->span = o.dilation * (o.kernel_size - 1) + 1;
  if (padded) s_->mode = o.padding_mode;
}

Conv1dStream::~Conv1dStream() = default;
Conv1dStream::Conv1dStream(Conv1dStream&&) noexcept = default;
Conv1dStream& Conv1dStream::operator=(Conv1dStream&&) noexcept = default;

void Conv1dStream::prepare(std::int64_t max_frames, std::int64_t batch, Device device) {
  check_prepare_args("Conv1dStream", max_frames, batch, device);
  State& s = *s_;
  s.max_frames = 0;
  s.own_rt.reset();
  if (device == Device::kCuda) s.own_rt = std::make_unique<CudaRuntime>(8, 2 * (batch + 1));
  s.allocate(max_frames, batch, s.own_rt.get());
  if (s.own_rt) {
    s.own_rt->open(static_cast<std::size_t>(batch * s.p.in_channels * s.staged_frames()),
                   static_cast<std::size_t>(s.dev.out.numel()));
  }
  reset();
}

void Conv1dStream::warm_up(const std::vector<std::int64_t>& lengths) {
  if (!s_->own_rt) return;
  warm_up_lengths(*this, "Conv1dStream", lengths, s_->p.batch, s_->max_frames,
                  std::min<std::int64_t>(s_->p.stride + 2, 64));
}

std::size_t Conv1dStream::cuda_graphs() const noexcept {
  return s_->own_rt && s_->own_rt->ctx ? detail::cuda::stream_context_graphs(s_->own_rt->ctx) : 0;
}

bool Conv1dStream::prepared() const noexcept {
  return s_ && s_->max_frames > 0;
}
std::int64_t Conv1dStream::max_frames() const noexcept {
  return s_->max_frames;
}
std::int64_t Conv1dStream::batch() const noexcept {
  return s_->p.batch;
}
std::int64_t Conv1dStream::in_channels() const noexcept {
  return s_->p.in_channels;
}
std::int64_t Conv1dStream::out_channels() const noexcept {
  return s_->p.out_channels;
}
const Conv1d& Conv1dStream::layer() const noexcept {
  return *s_->layer;
}

std::int64_t Conv1dStream::next_output_frames(std::int64_t input_frames) const noexcept {
  const State& s = *s_;
  if (input_frames < 1 || s.finished) return 0;
  if (s.left_pending && s.received + input_frames < s.left_needs()) return 0;
  return s.outputs_for(s.buffered + input_frames - std::min(s.skip, input_frames));
}

std::int64_t Conv1dStream::max_output_frames(std::int64_t input_frames) const noexcept {
  const State& s = *s_;
  if (input_frames < 1) return 0;
  return s.outputs_for(s.waiting_max() + input_frames);
}

std::int64_t Conv1dStream::max_flush_frames() const noexcept {
  const State& s = *s_;
  return s.outputs_for(s.waiting_max() + s.pad_right);
}

std::int64_t Conv1dStream::latency_frames() const noexcept {
  const State& s = *s_;
  // Reflect: the left padding waits for frame pad_left too.
  return s.mode == PaddingMode::kReflect ? std::max(s.span - 1 - s.pad_left, s.pad_left)
                                         : s.span - 1 - s.pad_left;
}

Status Conv1dStream::process(TensorView<const float> in, TensorView<float> out,
                             std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  if (!prepared() || s_->finished || frames_out == nullptr) return Status::kInvalidArgument;
  State& s = *s_;
  const std::int64_t n = in.frames();
  if (!view_ok(in, s.p.batch, s.p.in_channels) || n < 1 || n > s.max_frames) {
    return Status::kInvalidArgument;
  }
  if (!out_ok(out, s.p.batch, s.p.out_channels, next_output_frames(n))) {
    return Status::kInvalidArgument;
  }
  if (s.own_rt) {
    return cuda_call(*s.own_rt, &in, s.dev.out, out, frames_out,
                     [&](const Source& src) { return s.step(src, n, s.dev.out.view()); });
  }
  *frames_out = s.step(Source{in}, n, out);
  return Status::kOk;
}

Status Conv1dStream::flush(TensorView<float> out, std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  if (!prepared() || s_->finished || frames_out == nullptr) return Status::kInvalidArgument;
  State& s = *s_;
  // An empty stream has no offline counterpart (forward() needs >= 1 frame): it emits nothing.
  if (!out_ok(out, s.p.batch, s.p.out_channels, s.flush_frames()) || !s.flush_possible()) {
    return Status::kInvalidArgument;
  }
  if (s.own_rt) {
    return cuda_call(*s.own_rt, nullptr, s.dev.out, out, frames_out,
                     [&](const Source&) { return s.finish(s.dev.out.view()); });
  }
  *frames_out = s.finish(out);
  return Status::kOk;
}

void Conv1dStream::reset() noexcept {
  State& s = *s_;
  if (s.max_frames == 0) return;
  s.dev.current = 0;  // a fresh stream replays the same graphs as the first one did
  s.hist.zero(0, s.p.batch, 0, s.pad_left);
  s.buffered = s.pad_left;
  s.skip = 0;
  s.received = 0;
  s.finished = false;
  s.left_pending = s.copies_padding() && s.pad_left > 0;
  if (s.copies_padding()) zero_rows(s.tail, 0, s.p.batch, 0, s.keep());
}

Status Conv1dStream::reset(std::int64_t batch_index) noexcept {
  State& s = *s_;
  if (!prepared() || batch_index < 0 || batch_index >= s.p.batch) return Status::kInvalidArgument;
  s.hist.zero(batch_index, batch_index + 1, 0, s.buffered);
  if (s.copies_padding()) zero_rows(s.tail, batch_index, batch_index + 1, 0, s.keep());
  if (!s.head.empty()) zero_rows(s.head, batch_index, batch_index + 1, 0, s.left_needs());
  return Status::kOk;
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose1dStream
//
// Full (untrimmed) output frame u = i * stride + k * dilation receives input i. After n inputs,
// frames u < n * stride are final; the offline output is frames u in [padding, padding + T(n))
// with T(n) = (n - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1. Frames
// below min(n * stride - padding, T(n)) (trimmed coordinates) can therefore be emitted: they
// are final and inside the output however the stream ends. The backend computes them from the
// kept inputs with an adjusted `padding` (the offset of the first emitted frame).

struct ConvTranspose1dStream::State {
  std::shared_ptr<const ConvTranspose1d> layer;
  detail::ConvTranspose1dParams p;
  std::int64_t reach = 0;    // dilation * (K - 1)
  std::int64_t history = 0;  // inputs kept between calls
  std::int64_t max_frames = 0;
  std::int64_t capacity = 0;
  Tensor inputs;  // (batch, in_channels, capacity): the last `held` inputs
  Tensor workspace;
  std::int64_t held = 0;
  std::int64_t received = 0;
  std::int64_t emitted = 0;
  bool finished = false;
  std::unique_ptr<CudaRuntime> own_rt;
  DeviceStage dev;
  History hist;

  std::int64_t offline_frames(std::int64_t n) const {
    return (n - 1) * p.stride - 2 * p.padding + reach + p.output_padding + 1;
  }
  std::int64_t frontier(std::int64_t n) const {
    if (n == 0) return 0;
    return std::max<std::int64_t>(0, std::min(n * p.stride - p.padding, offline_frames(n)));
  }

  // Inputs [received - held, received) are in the buffer; emits frames [emitted, end).
  void emit(std::int64_t end, TensorView<float> out) noexcept {
    const std::int64_t count = end - emitted;
    if (count <= 0) return;
    const std::int64_t first_input = received - held;
    detail::ConvTranspose1dParams q = p;
    q.in_frames = held;
    q.padding = emitted + p.padding - first_input * p.stride;
    q.out_frames = count;
    const TensorView<const float> x = hist.view(held);
    if (hist.rt == nullptr) {
      const float* bias = layer->options().bias ? layer->bias().data() : nullptr;
      detail::cpu::conv_transpose1d_workspace(q, x, layer->weight().data(), bias,
                                              out.slice_frames(0, count), workspace.data());
    } else {
      StreamOp op = detail::cuda::make_op(StreamOp::Kind::kConvTranspose1d);
      op.transpose = q;
      op.in = x.data();
      op.in_batch_stride = x.batch_stride();
      op.in_channel_stride = x.channel_stride();
      op.out = out.data();
      op.out_batch_stride = out.batch_stride();
      op.out_channel_stride = out.channel_stride();
      op.weight = dev.weight.data();
      op.bias = dev.bias_or_null();
      hist.rt->push(op);
    }
    emitted = end;
  }

  void allocate(std::int64_t frames, std::int64_t batch, CudaRuntime* rt) {
    max_frames = frames;
    p.batch = batch;
    capacity = history + frames;
    const Shape shape{batch, p.in_channels, capacity};
    hist = History{rt, &inputs, &dev, batch, p.in_channels, capacity};
    if (rt == nullptr) {
      dev.release();
      inputs = Tensor::zeros(shape);
      workspace = Tensor::zeros(Shape{
          1, 1, std::max<std::int64_t>(1, detail::cpu::conv_transpose1d_workspace_floats(p))});
    } else {
      inputs = Tensor();
      workspace = Tensor();
      const std::int64_t flush =
          std::max<std::int64_t>(0, reach + p.output_padding + 1 - p.stride - p.padding);
      dev.allocate(
          *layer, shape,
          Shape{batch, p.out_channels, std::max<std::int64_t>(1, frames * p.stride + flush)});
    }
  }

  // process() after validation; returns the frames written to `out`.
  std::int64_t step(const Source& src, std::int64_t n, TensorView<float> out) noexcept {
    const std::int64_t produced = frontier(received + n) - emitted;
    hist.append(src, 0, n, held);
    held += n;
    received += n;
    emit(frontier(received), out);
    const std::int64_t keep = std::min(history, held);
    hist.shift(held - keep, held);
    held = keep;
    return produced;
  }
  std::int64_t flush_end() const noexcept {
    return received == 0 ? 0 : std::max(emitted, offline_frames(received));
  }
  // flush() after validation.
  std::int64_t finish(TensorView<float> out) noexcept {
    const std::int64_t end = flush_end();
    const std::int64_t frames = end - emitted;
    finished = true;
    emit(end, out);
    return frames;
  }
};

ConvTranspose1dStream::ConvTranspose1dStream(std::shared_ptr<const ConvTranspose1d> layer)
    : s_(std::make_unique<State>()) {
  if (!layer) throw Error("ConvTranspose1dStream: layer is null");
  const ConvTranspose1dOptions& o = layer->options();
  s_->layer = std::move(layer);
  detail::ConvTranspose1dParams& p = s_->p;
  p.in_channels = o.in_channels;
  p.out_channels = o.out_channels;
  p.kernel_size = o.kernel_size;
  p.stride = o.stride;
  p.dilation = o.dilation;
  p.groups = o.groups;
  p.padding = o.padding;
  p.output_padding = o.output_padding;
  s_->reach = o.dilation * (o.kernel_size - 1);
  // Enough for the earliest unemitted frame in every case (docs/streaming.md).
  s_->history = ceil_div(s_->reach + o.padding, o.stride) + 1;
}

ConvTranspose1dStream::~ConvTranspose1dStream() = default;
ConvTranspose1dStream::ConvTranspose1dStream(ConvTranspose1dStream&&) noexcept = default;
ConvTranspose1dStream& ConvTranspose1dStream::operator=(ConvTranspose1dStream&&) noexcept = default;

void ConvTranspose1dStream::prepare(std::int64_t max_frames, std::int64_t batch, Device device) {
  check_prepare_args("ConvTranspose1dStream", max_frames, batch, device);
  State& s = *s_;
  s.max_frames = 0;
  s.own_rt.reset();
  if (device == Device::kCuda) s.own_rt = std::make_unique<CudaRuntime>(8, 2 * (batch + 1));
  s.allocate(max_frames, batch, s.own_rt.get());
  if (s.own_rt) {
    s.own_rt->open(static_cast<std::size_t>(batch * s.p.in_channels * max_frames),
                   static_cast<std::size_t>(s.dev.out.numel()));
  }
  reset();
}

void ConvTranspose1dStream::warm_up(const std::vector<std::int64_t>& lengths) {
  if (!s_->own_rt) return;
  warm_up_lengths(*this, "ConvTranspose1dStream", lengths, s_->p.batch, s_->max_frames, 3);
}

std::size_t ConvTranspose1dStream::cuda_graphs() const noexcept {
  return s_->own_rt && s_->own_rt->ctx ? detail::cuda::stream_context_graphs(s_->own_rt->ctx) : 0;
}

bool ConvTranspose1dStream::prepared() const noexcept {
  return s_ && s_->max_frames > 0;
}
std::int64_t ConvTranspose1dStream::max_frames() const noexcept {
  return s_->max_frames;
}
std::int64_t ConvTranspose1dStream::batch() const noexcept {
  return s_->p.batch;
}
std::int64_t ConvTranspose1dStream::in_channels() const noexcept {
  return s_->p.in_channels;
}
std::int64_t ConvTranspose1dStream::out_channels() const noexcept {
  return s_->p.out_channels;
}
const ConvTranspose1d& ConvTranspose1dStream::layer() const noexcept {
  return *s_->layer;
}

std::int64_t ConvTranspose1dStream::next_output_frames(std::int64_t input_frames) const noexcept {
  const State& s = *s_;
  if (input_frames < 1 || s.finished) return 0;
  return s.frontier(s.received + input_frames) - s.emitted;
}

std::int64_t ConvTranspose1dStream::max_output_frames(std::int64_t input_frames) const noexcept {
  return input_frames < 1 ? 0 : input_frames * s_->p.stride;
}

std::int64_t ConvTranspose1dStream::max_flush_frames() const noexcept {
  const State& s = *s_;
  return std::max<std::int64_t>(0, s.reach + s.p.output_padding + 1 - s.p.stride - s.p.padding);
}

std::int64_t ConvTranspose1dStream::latency_frames() const noexcept {
  const State& s = *s_;
  return std::max<std::int64_t>(
      0, ceil_div(s.p.stride - 1 + s.p.padding - s.reach - s.p.output_padding, s.p.stride));
}

Status ConvTranspose1dStream::process(TensorView<const float> in, TensorView<float> out,
                                      std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  if (!prepared() || s_->finished || frames_out == nullptr) return Status::kInvalidArgument;
  State& s = *s_;
  const std::int64_t n = in.frames();
  if (!view_ok(in, s.p.batch, s.p.in_channels) || n < 1 || n > s.max_frames) {
    return Status::kInvalidArgument;
  }
  const std::int64_t produced = next_output_frames(n);
  if (!out_ok(out, s.p.batch, s.p.out_channels, produced)) return Status::kInvalidArgument;
  if (s.own_rt) {
    return cuda_call(*s.own_rt, &in, s.dev.out, out, frames_out,
                     [&](const Source& src) { return s.step(src, n, s.dev.out.view()); });
  }
  *frames_out = s.step(Source{in}, n, out);
  return Status::kOk;
}

Status ConvTranspose1dStream::flush(TensorView<float> out, std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  if (!prepared() || s_->finished || frames_out == nullptr) return Status::kInvalidArgument;
  State& s = *s_;
  if (!out_ok(out, s.p.batch, s.p.out_channels, s.flush_end() - s.emitted)) {
    return Status::kInvalidArgument;
  }
  if (s.own_rt) {
    return cuda_call(*s.own_rt, nullptr, s.dev.out, out, frames_out,
                     [&](const Source&) { return s.finish(s.dev.out.view()); });
  }
  *frames_out = s.finish(out);
  return Status::kOk;
}

void ConvTranspose1dStream::reset() noexcept {
  State& s = *s_;
  s.dev.current = 0;
  s.held = 0;
  s.received = 0;
  s.emitted = 0;
  s.finished = false;
}

Status ConvTranspose1dStream::reset(std::int64_t batch_index) noexcept {
  State& s = *s_;
  if (!prepared() || batch_index < 0 || batch_index >= s.p.batch) return Status::kInvalidArgument;
  s.hist.zero(batch_index, batch_index + 1, 0, s.held);
  return Status::kOk;
}

// ---------------------------------------------------------------------------------------------
// StreamChain

namespace {

using Stage = std::variant<Conv1dStream, ConvTranspose1dStream>;

template <class F>
decltype(auto) visit_stage(Stage& stage, F&& f) {
  return std::visit(std::forward<F>(f), stage);
}
template <class F>
decltype(auto) visit_stage(const Stage& stage, F&& f) {
  return std::visit(std::forward<F>(f), stage);
}

}  // namespace

struct StreamChain::State {
  std::unique_ptr<CudaRuntime> rt;  // CUDA: the chain's stream, staging and graphs
  std::vector<Stage> stages;
  std::vector<Tensor> buffers;  // output of stage k, for k < last
  std::int64_t max_frames = 0;
  std::int64_t batch = 0;
  std::int64_t flush_frames = 0;
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
};

StreamChain::StreamChain() : s_(std::make_unique<State>()) {}
StreamChain::~StreamChain() = default;
StreamChain::StreamChain(StreamChain&&) noexcept = default;
StreamChain& StreamChain::operator=(StreamChain&&) noexcept = default;

namespace {
template <class Stream, class Layer>
void add_stage(std::vector<Stage>& stages, std::int64_t& in_ch, std::int64_t& out_ch,
               std::shared_ptr<const Layer> layer, const char* kind) {
  if (!layer) throw Error(std::string("StreamChain: ") + kind + " layer is null");
  const std::int64_t cin = layer->options().in_channels;
  if (!stages.empty() && cin != out_ch) {
    throw Error("StreamChain: stage " + str(static_cast<std::int64_t>(stages.size())) + " (" +
                kind + ") has in_channels = " + str(cin) +
                " but the previous stage has out_channels = " + str(out_ch));
  }
  if (stages.empty()) in_ch = cin;
  stages.emplace_back(std::in_place_type<Stream>, std::move(layer));
  out_ch = std::get<Stream>(stages.back()).out_channels();
}
}  // namespace

StreamChain& StreamChain::add(std::shared_ptr<const Conv1d> layer) {
  add_stage<Conv1dStream>(s_->stages, s_->in_channels, s_->out_channels, std::move(layer),
                          "Conv1d");
  s_->max_frames = 0;
  return *this;
}

StreamChain& StreamChain::add(std::shared_ptr<const ConvTranspose1d> layer) {
  add_stage<ConvTranspose1dStream>(s_->stages, s_->in_channels, s_->out_channels, std::move(layer),
                                   "ConvTranspose1d");
  s_->max_frames = 0;
  return *this;
}

std::size_t StreamChain::size() const noexcept {
  return s_->stages.size();
}

void StreamChain::prepare(std::int64_t max_frames, std::int64_t batch, Device device) {
  check_prepare_args("StreamChain", max_frames, batch, device);
  State& s = *s_;
  if (s.stages.empty()) throw Error("StreamChain: prepare() on a chain without stages");
  s.max_frames = 0;
  s.buffers.clear();
  s.rt.reset();
  // On CUDA the stages record into the chain's runtime and pass frames through their device
  // output buffers; only the first input and the last output cross to the host.
  const std::size_t n_stages = s.stages.size();
  if (device == Device::kCuda) {
    s.rt = std::make_unique<CudaRuntime>(8 * n_stages + 2, 2 * n_stages * (batch + 1));
  }
  // in_max: the most frames a stage receives in one process(); flush_in: the most it receives
  // while the chain flushes (the previous stage's last process() output plus its flush).
  std::int64_t in_max = max_frames;
  std::int64_t flush_in = 0;
  for (std::size_t k = 0; k < n_stages; ++k) {
    Stage& stage = s.stages[k];
    visit_stage(stage, [&](auto& st) {
      const std::int64_t frames = std::max<std::int64_t>(1, std::max(in_max, flush_in));
      if (s.rt) {
        st.s_->max_frames = 0;
        st.s_->own_rt.reset();
        st.s_->allocate(frames, batch, s.rt.get());
        st.reset();
      } else {
        st.prepare(frames, batch, device);
      }
      const std::int64_t out_max = st.max_output_frames(in_max);
      const std::int64_t out_flush =
          (flush_in > 0 ? st.max_output_frames(flush_in) : 0) + st.max_flush_frames();
      if (k + 1 < n_stages && !s.rt) {
        s.buffers.push_back(Tensor::zeros(Shape{
            batch, st.out_channels(), std::max<std::int64_t>(1, std::max(out_max, out_flush))}));
      }
      in_max = std::max<std::int64_t>(1, out_max);
      flush_in = out_flush;
    });
  }
  if (s.rt) {
    const std::int64_t out_floats =
        visit_stage(s.stages.back(), [](const auto& st) { return st.s_->dev.out.numel(); });
    s.rt->open(static_cast<std::size_t>(batch * s.in_channels * max_frames),
               static_cast<std::size_t>(out_floats));
  }
  s.flush_frames = flush_in;
  s.batch = batch;
  s.max_frames = max_frames;
}

bool StreamChain::prepared() const noexcept {
  return s_->max_frames > 0;
}
std::int64_t StreamChain::in_channels() const noexcept {
  return s_->in_channels;
}
std::int64_t StreamChain::out_channels() const noexcept {
  return s_->out_channels;
}

std::int64_t StreamChain::next_output_frames(std::int64_t input_frames) const noexcept {
  std::int64_t n = input_frames;
  for (const Stage& stage : s_->stages) {
    if (n < 1) return 0;
    n = visit_stage(stage, [&](const auto& st) { return st.next_output_frames(n); });
  }
  return n;
}

std::int64_t StreamChain::max_output_frames(std::int64_t input_frames) const noexcept {
  std::int64_t n = input_frames;
  for (const Stage& stage : s_->stages) {
    if (n < 1) return 0;
    n = visit_stage(stage, [&](const auto& st) { return st.max_output_frames(n); });
  }
  return n;
}

void StreamChain::warm_up(const std::vector<std::int64_t>& lengths) {
  if (!s_->rt) return;
  // The stride phases cycle within the product of the Conv1d strides.
  std::int64_t calls = 2;
  for (const Stage& stage : s_->stages) {
    visit_stage(stage, [&](const auto& st) {
      if constexpr (std::is_same_v<std::decay_t<decltype(st)>, Conv1dStream>) {
        calls = std::min<std::int64_t>(calls * st.layer().options().stride, 64);
      }
    });
  }
  warm_up_lengths(*this, "StreamChain", lengths, s_->batch, s_->max_frames, calls + 1);
}

std::size_t StreamChain::cuda_graphs() const noexcept {
  return s_->rt && s_->rt->ctx ? detail::cuda::stream_context_graphs(s_->rt->ctx) : 0;
}

std::int64_t StreamChain::max_flush_frames() const noexcept {
  return s_->flush_frames;
}

std::int64_t StreamChain::latency_frames() const noexcept {
  // Chain-input frames per frame entering stage k: num / den.
  std::int64_t num = 1, den = 1, total = 0;
  for (const Stage& stage : s_->stages) {
    visit_stage(stage, [&](const auto& st) {
      total += ceil_div(st.latency_frames() * num, den);
      const std::int64_t stride = st.layer().options().stride;
      if constexpr (std::is_same_v<std::decay_t<decltype(st)>, Conv1dStream>) {
        num *= stride;
      } else {
        den *= stride;
      }
    });
  }
  return total;
}

Status StreamChain::process(TensorView<const float> in, TensorView<float> out,
                            std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  State& s = *s_;
  if (!prepared() || frames_out == nullptr) return Status::kInvalidArgument;
  const std::int64_t n = in.frames();
  if (!view_ok(in, s.batch, s.in_channels) || n < 1 || n > s.max_frames) {
    return Status::kInvalidArgument;
  }
  // Checked up front, so that no stage advances when a later one would refuse.
  if (!out_ok(out, s.batch, s.out_channels, next_output_frames(n))) {
    return Status::kInvalidArgument;
  }
  if (s.rt) {
    for (const Stage& stage : s.stages) {
      if (visit_stage(stage, [](const auto& st) { return st.s_->finished; })) {
        return Status::kInvalidArgument;  // flushed: reset() first, as on the CPU
      }
    }
    const Tensor& dev_out =
        visit_stage(s.stages.back(), [](auto& st) -> const Tensor& { return st.s_->dev.out; });
    return cuda_call(*s.rt, &in, dev_out, out, frames_out, [&](const Source& first) {
      Source src = first;
      std::int64_t frames = n;
      for (Stage& stage : s.stages) {
        if (frames < 1) return std::int64_t{0};
        visit_stage(stage, [&](auto& st) {
          Tensor& o = st.s_->dev.out;
          frames = st.s_->step(src, frames, o.view());
          src = Source{o.view().slice_frames(0, frames), CopyKind::kDeviceToDevice};
        });
      }
      return frames;
    });
  }
  TensorView<const float> cur = in;
  for (std::size_t k = 0; k < s.stages.size(); ++k) {
    if (cur.frames() < 1) return Status::kOk;
    const bool last = k + 1 == s.stages.size();
    TensorView<float> dst = last ? out : s.buffers[k].view();
    std::int64_t produced = 0;
    const Status st =
        visit_stage(s.stages[k], [&](auto& stream) { return stream.process(cur, dst, &produced); });
    if (st != Status::kOk) return st;
    if (last) *frames_out = produced;
    cur = dst.slice_frames(0, produced);
  }
  return Status::kOk;
}

Status StreamChain::flush(TensorView<float> out, std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  State& s = *s_;
  if (!prepared() || frames_out == nullptr) return Status::kInvalidArgument;
  if (!out_ok(out, s.batch, s.out_channels, s.flush_frames)) return Status::kInvalidArgument;
  if (s.rt) {
    // A stage that is already finished (an earlier flush) refuses, as on the CPU.
    bool finished = false;
    for (const Stage& stage : s.stages) {
      visit_stage(stage, [&](const auto& st) { finished = finished || st.s_->finished; });
    }
    if (finished) return Status::kInvalidArgument;
    const Tensor& dev_out =
        visit_stage(s.stages.back(), [](auto& st) -> const Tensor& { return st.s_->dev.out; });
    return cuda_call(*s.rt, nullptr, dev_out, out, frames_out, [&](const Source&) {
      Source src;
      std::int64_t frames = 0;
      for (Stage& stage : s.stages) {
        visit_stage(stage, [&](auto& st) {
          Tensor& o = st.s_->dev.out;
          const std::int64_t produced = frames > 0 ? st.s_->step(src, frames, o.view()) : 0;
          const std::int64_t flushed =
              st.s_->finish(o.view().slice_frames(produced, o.shape().frames - produced));
          frames = produced + flushed;
          src = Source{o.view().slice_frames(0, frames), CopyKind::kDeviceToDevice};
        });
      }
      return frames;
    });
  }
  // Stage k first processes what stage k - 1 flushed, then flushes itself.
  TensorView<const float> cur;
  std::int64_t cur_frames = 0;
  for (std::size_t k = 0; k < s.stages.size(); ++k) {
    const bool last = k + 1 == s.stages.size();
    TensorView<float> dst = last ? out : s.buffers[k].view();
    std::int64_t produced = 0;
    std::int64_t flushed = 0;
    const Status st = visit_stage(s.stages[k], [&](auto& stream) {
      if (cur_frames > 0) {
        const Status a = stream.process(cur.slice_frames(0, cur_frames), dst, &produced);
        if (a != Status::kOk) return a;
      }
      return stream.flush(dst.slice_frames(produced, dst.frames() - produced), &flushed);
    });
    if (st != Status::kOk) return st;
    cur = dst;
    cur_frames = produced + flushed;
  }
  *frames_out = cur_frames;
  return Status::kOk;
}

void StreamChain::reset() noexcept {
  for (Stage& stage : s_->stages) visit_stage(stage, [](auto& st) { st.reset(); });
}

Status StreamChain::reset(std::int64_t batch_index) noexcept {
  if (!prepared() || batch_index < 0 || batch_index >= s_->batch) return Status::kInvalidArgument;
  for (Stage& stage : s_->stages) visit_stage(stage, [&](auto& st) { st.reset(batch_index); });
  return Status::kOk;
}

}  // namespace convbank
