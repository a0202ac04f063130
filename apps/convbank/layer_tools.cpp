// convbank conv1d / conv-transpose1d: one layer over .npy tensors, for parity checks against
// PyTorch (np.save the input, weight and bias; compare the output with the module's).
//
// Layer sizes come from the weight's shape, so the command line only carries what PyTorch's
// constructor takes beyond them. The output is written to a temporary file next to it and
// renamed at the end: a failed run leaves no output file, and an input is never overwritten.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "app_util.hpp"
#include "commands.hpp"
#include "convbank/convbank.hpp"

namespace convbank::app {

namespace {

namespace fs = std::filesystem;

struct LayerArgs {
  std::string input;
  std::string weight;
  std::string bias;
  std::string output;
  std::int64_t stride = 1;
  std::string padding = "0";  // Conv1d: a number, "same" or "valid"
  std::int64_t transpose_padding = 0;
  std::int64_t output_padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  std::string padding_mode = "zeros";
  std::string device = "cpu";
  int threads = 0;
  std::string chunk;  // empty: offline forward(); "N" or "random:SEED:MIN:MAX": stream
};

// --chunk: fixed chunks of N frames, or lengths drawn uniformly from [MIN, MAX] by a seeded
// generator (reproducible, and deliberately not multiples of the stride).
struct ChunkPlan {
  bool random = false;
  std::uint64_t seed = 0;
  std::int64_t min = 0;
  std::int64_t max = 0;
};

std::int64_t parse_count(const std::string& text, const std::string& what) {
  std::int64_t value = 0;
  bool ok = !text.empty() && text.size() <= 18;
  for (char ch : text) {
    ok = ok && ch >= '0' && ch <= '9';
    value = ok ? value * 10 + (ch - '0') : value;
  }
  if (!ok) throw Error("--chunk: " + what + " must be a non-negative integer, got '" + text + "'");
  return value;
}

ChunkPlan parse_chunk(const std::string& text) {
  ChunkPlan plan;
  if (text.rfind("random:", 0) == 0) {
    std::vector<std::string> parts;
    std::size_t at = 7;
    while (true) {
      const std::size_t colon = text.find(':', at);
      parts.push_back(text.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
    if (parts.size() != 3) {
      throw Error("--chunk must be N or random:SEED:MIN:MAX, got '" + text + "'");
    }
    plan.random = true;
    plan.seed = static_cast<std::uint64_t>(parse_count(parts[0], "SEED"));
    plan.min = parse_count(parts[1], "MIN");
    plan.max = parse_count(parts[2], "MAX");
  } else {
    plan.min = plan.max = parse_count(text, "N");
  }
  if (plan.min < 1 || plan.max < plan.min) {
    throw Error("--chunk '" + text + "': chunk lengths must satisfy 1 <= MIN <= MAX");
  }
  return plan;
}

// Runs the whole input through a stream of `layer` in the planned chunks, then flushes; the
// concatenated output has the offline output's shape (and rank).
template <class Stream, class Layer>
Tensor run_streamed(const Layer& layer, const Tensor& input, const ChunkPlan& plan, Device device) {
  const Shape out_shape = layer.output_shape(input.shape());  // the offline checks and errors
  // The app owns the layer for its whole run: an aliasing shared_ptr without ownership.
  Stream stream(std::shared_ptr<const Layer>(std::shared_ptr<const Layer>(), &layer));
  stream.prepare(plan.max, input.shape().batch, device);
  Tensor output(out_shape);
  if (input.rank() == 2) output.set_rank(2);
  Tensor chunk_out(Shape{out_shape.batch, out_shape.channels,
                         std::max(stream.max_output_frames(plan.max), stream.max_flush_frames())});
  std::mt19937_64 rng(plan.seed);
  std::uniform_int_distribution<std::int64_t> length(plan.min, plan.max);
  std::int64_t written = 0;
  auto take = [&](std::int64_t frames) {
    if (written + frames > out_shape.frames) {
      throw Error("stream produced more frames than the offline output (" +
                  std::to_string(out_shape.frames) + ")");
    }
    copy(TensorView<const float>(chunk_out.view()).slice_frames(0, frames),
         output.view().slice_frames(written, frames));
    written += frames;
  };
  for (std::int64_t at = 0; at < input.shape().frames;) {
    const std::int64_t n =
        std::min(plan.random ? length(rng) : plan.max, input.shape().frames - at);
    std::int64_t frames = 0;
    if (stream.process(input.view().slice_frames(at, n), chunk_out.view(), &frames) !=
        Status::kOk) {
      throw Error("stream process() rejected a chunk of " + std::to_string(n) + " frames");
    }
    take(frames);
    at += n;
  }
  std::int64_t frames = 0;
  if (stream.flush(chunk_out.view(), &frames) != Status::kOk) throw Error("stream flush() failed");
  take(frames);
  if (written != out_shape.frames) {
    throw Error("stream produced " + std::to_string(written) + " frames, offline produces " +
                std::to_string(out_shape.frames));
  }
  return output;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void check_common(const LayerArgs& a) {
  if (a.groups < 1) throw Error("--groups must be >= 1, got " + std::to_string(a.groups));
  if (a.threads < 0) throw Error("--threads must be >= 0, got " + std::to_string(a.threads));
  if (!a.chunk.empty()) parse_chunk(a.chunk);
}

// The rank-3 weight, whose shape gives the layer's channels and kernel size.
Tensor load_weight(const std::string& path, const char* layout) {
  io::NpyArray w = io::read_npy_array(path);
  if (w.shape.size() != 3) {
    throw Error("--weight '" + path + "' has shape " + shape_text(w.shape) + " (rank " +
                std::to_string(w.shape.size()) + "); the weight must have rank 3: " + layout);
  }
  Tensor t(Shape{w.shape[0], w.shape[1], w.shape[2]});
  std::copy(w.data.begin(), w.data.end(), t.data());
  return t;
}

Tensor load_bias(const std::string& path, std::int64_t out_channels) {
  io::NpyArray b = io::read_npy_array(path);
  if (b.shape.size() != 1 || b.shape[0] != out_channels) {
    throw Error("--bias '" + path + "' has shape " + shape_text(b.shape) +
                "; expected (out_channels,) = (" + std::to_string(out_channels) +
                ",) to match the weight");
  }
  Tensor t(Shape{1, 1, out_channels});
  std::copy(b.data.begin(), b.data.end(), t.data());
  return t;
}

Tensor load_input(const std::string& path) {
  const std::vector<std::int64_t> shape = io::read_npy_shape(path);
  if (shape.size() != 2 && shape.size() != 3) {
    throw Error("--input '" + path + "' has shape " + shape_text(shape) + " (rank " +
                std::to_string(shape.size()) +
                "); expected rank 2 (channels, frames) or 3 (batch, channels, frames)");
  }
  return io::read_npy(path);
}

// in_channels (Conv1d) or out_channels (ConvTranspose1d) = weight.shape[1] * groups.
std::int64_t grouped_channels(std::int64_t per_group, std::int64_t groups) {
  if (per_group > 0 && groups > std::numeric_limits<std::int64_t>::max() / per_group) {
    throw Error("--groups " + std::to_string(groups) + " times the weight's " +
                std::to_string(per_group) + " channels per group overflows");
  }
  return per_group * groups;
}

// Runs `forward` with the input on `device`, returning the output on the host.
template <class Layer>
Tensor run_layer(const Layer& layer, const Tensor& input, Device device) {
  if (device == Device::kCpu) return layer.forward(input);
  return layer.forward(input.to(device)).to(Device::kCpu);
}

int run_conv1d(const LayerArgs& a) {
  refuse_overwrite(a.output, "--output",
                   {{"--input", a.input}, {"--weight", a.weight}, {"--bias", a.bias}});
  check_common(a);
  TemporaryOutput output(a.output, "--output");
  const Device device = parse_device(a.device);
  Conv1dOptions o;
  o.stride = a.stride;
  o.padding = Padding::parse(a.padding, "--padding");
  o.dilation = a.dilation;
  o.groups = a.groups;
  o.padding_mode = parse_padding_mode(a.padding_mode, "--padding-mode");
  o.bias = !a.bias.empty();
  set_num_threads(a.threads);

  const Tensor weight =
      load_weight(a.weight, "(out_channels, in_channels / groups, kernel_size) as nn.Conv1d");
  o.out_channels = weight.shape().batch;
  o.in_channels = grouped_channels(weight.shape().channels, a.groups);
  o.kernel_size = weight.shape().frames;
  Conv1d layer(o);
  layer.set_weight(weight);
  if (o.bias) layer.set_bias(load_bias(a.bias, o.out_channels));

  const Tensor input = load_input(a.input);
  if (!a.chunk.empty()) {
    output.write(run_streamed<Conv1dStream>(layer, input, parse_chunk(a.chunk), device));
  } else {
    output.write(run_layer(layer, input, device));
  }
  return 0;
}

int run_conv_transpose1d(const LayerArgs& a) {
  refuse_overwrite(a.output, "--output",
                   {{"--input", a.input}, {"--weight", a.weight}, {"--bias", a.bias}});
  check_common(a);
  TemporaryOutput output(a.output, "--output");
  const Device device = parse_device(a.device);
  ConvTranspose1dOptions o;
  o.stride = a.stride;
  o.padding = a.transpose_padding;
  o.output_padding = a.output_padding;
  o.dilation = a.dilation;
  o.groups = a.groups;
  o.bias = !a.bias.empty();
  set_num_threads(a.threads);

  const Tensor weight = load_weight(
      a.weight, "(in_channels, out_channels / groups, kernel_size) as nn.ConvTranspose1d");
  o.in_channels = weight.shape().batch;
  o.out_channels = grouped_channels(weight.shape().channels, a.groups);
  o.kernel_size = weight.shape().frames;
  ConvTranspose1d layer(o);
  layer.set_weight(weight);
  if (o.bias) layer.set_bias(load_bias(a.bias, o.out_channels));

  const Tensor input = load_input(a.input);
  if (!a.chunk.empty()) {
    output.write(run_streamed<ConvTranspose1dStream>(layer, input, parse_chunk(a.chunk), device));
  } else {
    output.write(run_layer(layer, input, device));
  }
  return 0;
}

// Options both subcommands share.
void add_common_options(CLI::App* sub, LayerArgs& a, const char* weight_layout) {
  sub->add_option("--input", a.input,
                  "Input .npy (float32 or float64): (channels, frames) or (batch, channels, "
                  "frames); the output has the same rank")
      ->required();
  sub->add_option("--weight", a.weight,
                  std::string("Weight .npy, rank 3, in PyTorch's layout ") + weight_layout +
                      "; it sets the channels and kernel size")
      ->required();
  sub->add_option("--bias", a.bias, "Bias .npy of shape (out_channels,); no bias when omitted");
  sub->add_option("--output", a.output,
                  "Output .npy (float32), written only when the run succeeds; must not be one "
                  "of the inputs")
      ->required();
  sub->add_option("--stride", a.stride, "Stride")->capture_default_str();
  sub->add_option("--dilation", a.dilation, "Spacing between kernel taps")->capture_default_str();
  sub->add_option("--groups", a.groups, "Number of channel groups")->capture_default_str();
  sub->add_option("--device", a.device,
                  "Where to run: cpu or cuda (cuda needs a build with the CUDA backend)")
      ->capture_default_str();
  sub->add_option("--threads", a.threads, "CPU threads; 0 means one per hardware thread")
      ->capture_default_str();
  sub->add_option("--chunk", a.chunk,
                  "Stream the input through the layer's stream API instead of one forward(): "
                  "chunks of N frames, or 'random:SEED:MIN:MAX' for seeded random lengths in "
                  "[MIN, MAX]; then flush. The output equals the offline one (zeros, reflect or "
                  "replicate padding)");
}

}  // namespace

void add_layer_tools(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands) {
  auto conv = std::make_shared<LayerArgs>();
  CLI::App* c = app.add_subcommand(
      "conv1d", "Run one nn.Conv1d layer on a .npy tensor (weights from .npy files)");
  add_common_options(c, *conv, "(out_channels, in_channels / groups, kernel_size)");
  c->add_option("--padding", conv->padding,
                "Frames of padding on each side, 'same' (stride 1 only) or 'valid'")
      ->capture_default_str();
  c->add_option("--padding-mode", conv->padding_mode,
                "How padding is filled: zeros, reflect, replicate or circular")
      ->capture_default_str();
  commands.emplace_back(c, [conv] { return run_conv1d(*conv); });

  auto transpose = std::make_shared<LayerArgs>();
  CLI::App* t = app.add_subcommand(
      "conv-transpose1d",
      "Run one nn.ConvTranspose1d layer on a .npy tensor (weights from .npy files)");
  add_common_options(t, *transpose, "(in_channels, out_channels / groups, kernel_size)");
  t->add_option("--padding", transpose->transpose_padding,
                "Frames removed from each side of the full output, as PyTorch's padding")
      ->capture_default_str();
  t->add_option("--output-padding", transpose->output_padding,
                "Frames added to the right of the output; must be smaller than stride or "
                "dilation")
      ->capture_default_str();
  commands.emplace_back(t, [transpose] { return run_conv_transpose1d(*transpose); });
}

}  // namespace convbank::app
