// Helpers shared by the streaming tests: chunk-length sequences, running a stream (or chain)
// over a whole signal, and comparing with the offline forward().
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/error.hpp"
#include "convbank/stream.hpp"
#include "convbank/tensor.hpp"

namespace stream_test {

// Chunk lengths summing to `total`, each in [1, max_frames], drawn from the lengths that stress
// the stride phase (1, stride - 1, stride, stride + 1), primes, max_frames and uniform ones.
inline std::vector<std::int64_t> chunk_lengths(std::int64_t total, std::int64_t max_frames,
                                               std::int64_t stride, std::mt19937_64& rng) {
  const std::int64_t special[] = {1, stride - 1, stride, stride + 1, 2,          3,
                                  5, 7,          11,     13,         max_frames, max_frames - 1};
  std::vector<std::int64_t> out;
  std::int64_t left = total;
  while (left > 0) {
    std::int64_t n = 0;
    if (rng() % 3 == 0) {
      n = std::uniform_int_distribution<std::int64_t>(1, max_frames)(rng);
    } else {
      n = special[rng() % (sizeof(special) / sizeof(special[0]))];
    }
    n = std::clamp<std::int64_t>(n, 1, std::min(max_frames, left));
    out.push_back(n);
    left -= n;
  }
  return out;
}

inline convbank::Tensor random_tensor(convbank::Shape shape, std::mt19937_64& rng,
                                      float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  convbank::Tensor t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
  return t;
}

// Everything a stream returns, concatenated along time.
struct Collected {
  std::vector<std::vector<float>> rows;  // batch * channels rows
  std::int64_t batch = 0, channels = 0;
  void init(std::int64_t b, std::int64_t c) {
    batch = b;
    channels = c;
    rows.assign(static_cast<std::size_t>(b * c), {});
  }
  void append(const convbank::Tensor& out, std::int64_t frames) {
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t c = 0; c < channels; ++c) {
        const float* src = out.view().channel(b, c);
        auto& row = rows[static_cast<std::size_t>(b * channels + c)];
        row.insert(row.end(), src, src + frames);
      }
    }
  }
  std::int64_t frames() const {
    return rows.empty() ? 0 : static_cast<std::int64_t>(rows[0].size());
  }
  convbank::Tensor tensor() const {
    convbank::Tensor t(convbank::Shape{batch, channels, frames()});
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t c = 0; c < channels; ++c) {
        const auto& row = rows[static_cast<std::size_t>(b * channels + c)];
        std::copy(row.begin(), row.end(), t.view().channel(b, c));
      }
    }
    return t;
  }
};

// Feeds frames [first, first + n) of `x` as one chunk; returns the status.
template <class Stream>
convbank::Status feed(Stream& stream, const convbank::Tensor& x, std::int64_t first, std::int64_t n,
                      convbank::Tensor& out, Collected& got, std::int64_t* produced = nullptr) {
  std::int64_t frames = -1;
  const convbank::Status st = stream.process(x.view().slice_frames(first, n), out.view(), &frames);
  if (st == convbank::Status::kOk) got.append(out, frames);
  if (produced != nullptr) *produced = frames;
  return st;
}

// Streams `x` in the given chunks, then flushes. The stream must be prepared already.
template <class Stream>
convbank::Tensor run_stream(Stream& stream, const convbank::Tensor& x,
                            const std::vector<std::int64_t>& chunks, bool* all_ok) {
  const std::int64_t max_in = *std::max_element(chunks.begin(), chunks.end());
  convbank::Tensor out(convbank::Shape{
      x.shape().batch, stream.out_channels(),
      std::max<std::int64_t>(
          1, std::max(stream.max_output_frames(max_in), stream.max_flush_frames()))});
  Collected got;
  got.init(x.shape().batch, stream.out_channels());
  *all_ok = true;
  std::int64_t at = 0;
  for (std::int64_t n : chunks) {
    if (stream.next_output_frames(n) > stream.max_output_frames(n)) *all_ok = false;
    *all_ok = *all_ok && feed(stream, x, at, n, out, got) == convbank::Status::kOk;
    at += n;
  }
  std::int64_t frames = -1;
  *all_ok = *all_ok && stream.flush(out.view(), &frames) == convbank::Status::kOk;
  if (frames > stream.max_flush_frames()) *all_ok = false;
  got.append(out, std::max<std::int64_t>(frames, 0));
  return got.tensor();
}

// Whether a reflect or replicate layer over `frames` input frames is a streaming case with an
// offline counterpart: some padding, at least one output, and reflect's rule (PyTorch rejects
// padding not shorter than the input).
inline bool copied_padding_case(const convbank::Conv1d& layer, std::int64_t frames) {
  const convbank::Conv1dOptions& o = layer.options();
  const std::int64_t pl = layer.padding_left(), pr = layer.padding_right();
  const std::int64_t span = o.dilation * (o.kernel_size - 1) + 1;
  if (pl + pr == 0 || frames + pl + pr < span) return false;
  return o.padding_mode != convbank::PaddingMode::kReflect || (frames > pl && frames > pr);
}

inline bool bit_equal(const convbank::Tensor& a, const convbank::Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

inline double relative_l2(const convbank::Tensor& got, const convbank::Tensor& ref) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double d = static_cast<double>(got.data()[i]) - ref.data()[i];
    num += d * d;
    den += static_cast<double>(ref.data()[i]) * ref.data()[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// A reflect stream no longer than its padding has no offline counterpart (forward() throws):
// flush() refuses; after reset() the stream works again (a 2 -> 3 layer, K 9, reflect padding
// 4, on `device`).
inline void check_short_reflect_stream(convbank::Device device, std::mt19937_64& rng) {
  using convbank::Shape;
  using convbank::Status;
  using convbank::Tensor;
  auto wide = std::make_shared<convbank::Conv1d>(
      convbank::Conv1dOptions{.in_channels = 2,
                              .out_channels = 3,
                              .kernel_size = 9,
                              .padding = 4,
                              .padding_mode = convbank::PaddingMode::kReflect});
  wide->set_weight(random_tensor(Shape{3, 2, 9}, rng, 0.2f));
  const convbank::Conv1d& layer = *wide;
  convbank::Conv1dStream stream(wide);
  stream.prepare(16, 1, device);
  const Tensor x = random_tensor(Shape{1, 2, 40}, rng);
  const Tensor short_x = random_tensor(Shape{1, 2, 4}, rng);
  CHECK_THROWS_AS(layer.forward(short_x), convbank::Error);
  Tensor out(Shape{1, layer.options().out_channels, 64});
  std::int64_t n = 0;
  REQUIRE(stream.process(short_x.view(), out.view(), &n) == Status::kOk);
  CHECK(n == 0);
  CHECK(stream.flush(out.view(), &n) == Status::kInvalidArgument);
  stream.reset();
  bool ok = false;
  const Tensor got = run_stream(stream, x, {1, 3, 16, 5, 15}, &ok);
  CHECK(ok);
  CHECK(relative_l2(got, layer.forward(x)) <= 1e-6);
}

}  // namespace stream_test
