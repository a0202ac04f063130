// Conv1dStream, ConvTranspose1dStream, StreamChain: the carried state, the frame bookkeeping
// that makes streamed output equal offline output, and dispatch to the backend's real-time
// (workspace, single-thread) entries. docs/streaming.md derives the formulas used here.
#include "convbank/stream.hpp"

#include <algorithm>
#include <cstring>
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
  if (device != Device::kCpu) {
    throw Error(std::string(who) +
                ": streaming on CUDA tensors is not implemented yet; prepare the stream with "
                "Device::kCpu (the same layer can still run forward() on CUDA tensors)");
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Conv1dStream
//
// The buffer holds the padded signal's frames [consumed, received): left padding is written at
// reset, right padding is appended by flush, so the backend sees no padding at all and output
// frame t reads buffer frames t' * stride + k * dilation, exactly as offline.

struct Conv1dStream::State {
  std::shared_ptr<const Conv1d> layer;
  detail::Conv1dParams p;  // shape fields; frames set per call
  std::int64_t span = 1;   // dilation * (K - 1) + 1
  std::int64_t pad_left = 0;
  std::int64_t pad_right = 0;
  std::int64_t max_frames = 0;
  std::int64_t capacity = 0;
  Tensor buffer;              // (batch, in_channels, capacity)
  Tensor workspace;           // backend scratch
  std::int64_t buffered = 0;  // frames held in buffer
  std::int64_t skip = 0;      // input frames no output reads (stride > span)
  std::int64_t received = 0;  // unpadded input frames since reset
  bool finished = false;

  std::int64_t outputs_for(std::int64_t held) const {
    return held >= span ? (held - span) / p.stride + 1 : 0;
  }

  // Appends `count` frames of `in` from `first` (nullptr = zeros) and emits every output frame
  // they complete into `out`.
  std::int64_t run(const TensorView<const float>* in, std::int64_t first, std::int64_t count,
                   TensorView<float> out) noexcept {
    const std::int64_t drop = std::min(skip, count);
    skip -= drop;
    if (in != nullptr) {
      append_rows(buffer, *in, first + drop, count - drop, buffered);
    } else {
      zero_rows(buffer, 0, p.batch, buffered, count - drop);
    }
    buffered += count - drop;
    const std::int64_t produced = outputs_for(buffered);
    if (produced == 0) return 0;
    detail::Conv1dParams q = p;
    q.pad_left = q.pad_right = 0;
    q.in_frames = buffered;
    q.out_frames = produced;
    const TensorView<const float> x(buffer.data(), Shape{p.batch, p.in_channels, buffered},
                                    p.in_channels * capacity, capacity);
    const float* bias = layer->options().bias ? layer->bias().data() : nullptr;
    detail::cpu::conv1d_workspace(q, x, layer->weight().data(), bias, out.slice_frames(0, produced),
                                  workspace.data());
    const std::int64_t consumed = produced * p.stride;
    if (consumed <= buffered) {
      shift_rows(buffer, consumed, buffered);
      buffered -= consumed;
    } else {
      skip = consumed - buffered;
      buffered = 0;
    }
    return produced;
  }
};

Conv1dStream::Conv1dStream(std::shared_ptr<const Conv1d> layer) : s_(std::make_unique<State>()) {
  if (!layer) throw Error("Conv1dStream: layer is null");
  const Conv1dOptions& o = layer->options();
  if (o.padding_mode != PaddingMode::kZeros &&
      (layer->padding_left() > 0 || layer->padding_right() > 0)) {
    throw Error("Conv1dStream: padding_mode '" + to_string(o.padding_mode) +
                "' cannot stream: it fills the padding from the signal's far end (circular) or "
                "mirrors frames that have not arrived yet (reflect, replicate); use "
                "padding_mode zeros, or forward() on the whole signal");
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
}

Conv1dStream::~Conv1dStream() = default;
Conv1dStream::Conv1dStream(Conv1dStream&&) noexcept = default;
Conv1dStream& Conv1dStream::operator=(Conv1dStream&&) noexcept = default;

void Conv1dStream::prepare(std::int64_t max_frames, std::int64_t batch, Device device) {
  check_prepare_args("Conv1dStream", max_frames, batch, device);
  State& s = *s_;
  s.max_frames = max_frames;
  s.p.batch = batch;
  // Between calls at most max(pad_left, span - 1) frames wait; then a chunk or the right pad.
  s.capacity = std::max(s.pad_left, s.span - 1) + std::max(max_frames, s.pad_right);
  s.buffer = Tensor::zeros(Shape{batch, s.p.in_channels, s.capacity});
  s.workspace = Tensor::zeros(
      Shape{1, 1, std::max<std::int64_t>(1, detail::cpu::conv1d_workspace_floats(s.p))});
  reset();
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
  return s.outputs_for(s.buffered + input_frames - std::min(s.skip, input_frames));
}

std::int64_t Conv1dStream::max_output_frames(std::int64_t input_frames) const noexcept {
  const State& s = *s_;
  if (input_frames < 1) return 0;
  return s.outputs_for(std::max(s.pad_left, s.span - 1) + input_frames);
}

std::int64_t Conv1dStream::max_flush_frames() const noexcept {
  const State& s = *s_;
  return s.outputs_for(std::max(s.pad_left, s.span - 1) + s.pad_right);
}

std::int64_t Conv1dStream::latency_frames() const noexcept {
  return s_->span - 1 - s_->pad_left;
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
  s.received += n;
  *frames_out = s.run(&in, 0, n, out);
  return Status::kOk;
}

Status Conv1dStream::flush(TensorView<float> out, std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  if (!prepared() || s_->finished || frames_out == nullptr) return Status::kInvalidArgument;
  State& s = *s_;
  // An empty stream has no offline counterpart (forward() needs >= 1 frame): it emits nothing.
  const std::int64_t expected =
      s.received == 0 ? 0 : s.outputs_for(s.buffered + s.pad_right - std::min(s.skip, s.pad_right));
  if (!out_ok(out, s.p.batch, s.p.out_channels, expected)) return Status::kInvalidArgument;
  s.finished = true;
  if (expected > 0) *frames_out = s.run(nullptr, 0, s.pad_right, out);
  return Status::kOk;
}

void Conv1dStream::reset() noexcept {
  State& s = *s_;
  if (s.max_frames == 0) return;
  zero_rows(s.buffer, 0, s.p.batch, 0, s.pad_left);
  s.buffered = s.pad_left;
  s.skip = 0;
  s.received = 0;
  s.finished = false;
}

Status Conv1dStream::reset(std::int64_t batch_index) noexcept {
  State& s = *s_;
  if (!prepared() || batch_index < 0 || batch_index >= s.p.batch) return Status::kInvalidArgument;
  zero_rows(s.buffer, batch_index, batch_index + 1, 0, s.buffered);
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
    const TensorView<const float> x(inputs.data(), Shape{p.batch, p.in_channels, held},
                                    p.in_channels * capacity, capacity);
    const float* bias = layer->options().bias ? layer->bias().data() : nullptr;
    detail::cpu::conv_transpose1d_workspace(q, x, layer->weight().data(), bias,
                                            out.slice_frames(0, count), workspace.data());
    emitted = end;
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
  s.max_frames = max_frames;
  s.p.batch = batch;
  s.capacity = s.history + max_frames;
  s.inputs = Tensor::zeros(Shape{batch, s.p.in_channels, s.capacity});
  s.workspace = Tensor::zeros(
      Shape{1, 1, std::max<std::int64_t>(1, detail::cpu::conv_transpose1d_workspace_floats(s.p))});
  reset();
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
  append_rows(s.inputs, in, 0, n, s.held);
  s.held += n;
  s.received += n;
  s.emit(s.frontier(s.received), out);
  const std::int64_t keep = std::min(s.history, s.held);
  shift_rows(s.inputs, s.held - keep, s.held);
  s.held = keep;
  *frames_out = produced;
  return Status::kOk;
}

Status ConvTranspose1dStream::flush(TensorView<float> out, std::int64_t* frames_out) noexcept {
  if (frames_out != nullptr) *frames_out = 0;
  if (!prepared() || s_->finished || frames_out == nullptr) return Status::kInvalidArgument;
  State& s = *s_;
  const std::int64_t end = s.received == 0 ? 0 : std::max(s.emitted, s.offline_frames(s.received));
  if (!out_ok(out, s.p.batch, s.p.out_channels, end - s.emitted)) {
    return Status::kInvalidArgument;
  }
  s.finished = true;
  *frames_out = end - s.emitted;
  s.emit(end, out);
  return Status::kOk;
}

void ConvTranspose1dStream::reset() noexcept {
  State& s = *s_;
  s.held = 0;
  s.received = 0;
  s.emitted = 0;
  s.finished = false;
}

Status ConvTranspose1dStream::reset(std::int64_t batch_index) noexcept {
  State& s = *s_;
  if (!prepared() || batch_index < 0 || batch_index >= s.p.batch) return Status::kInvalidArgument;
  zero_rows(s.inputs, batch_index, batch_index + 1, 0, s.held);
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
  // in_max: the most frames a stage receives in one process(); flush_in: the most it receives
  // while the chain flushes (the previous stage's last process() output plus its flush).
  std::int64_t in_max = max_frames;
  std::int64_t flush_in = 0;
  for (std::size_t k = 0; k < s.stages.size(); ++k) {
    Stage& stage = s.stages[k];
    visit_stage(stage, [&](auto& st) {
      st.prepare(std::max<std::int64_t>(1, std::max(in_max, flush_in)), batch, device);
      const std::int64_t out_max = st.max_output_frames(in_max);
      const std::int64_t out_flush =
          (flush_in > 0 ? st.max_output_frames(flush_in) : 0) + st.max_flush_frames();
      if (k + 1 < s.stages.size()) {
        s.buffers.push_back(Tensor::zeros(Shape{
            batch, st.out_channels(), std::max<std::int64_t>(1, std::max(out_max, out_flush))}));
      }
      in_max = std::max<std::int64_t>(1, out_max);
      flush_in = out_flush;
    });
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
