// Real-time safety: no heap allocation inside process() / flush() after prepare(). Its own
// executable, because it replaces the global operator new/delete to count every allocation of
// the process (other tests must not run, or allocate, while it counts).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <utility>
#include <vector>

#include "convbank/conv.hpp"
#include "convbank/filterbank.hpp"
#include "convbank/runtime.hpp"
#include "convbank/stream.hpp"
#include "convbank/tensor.hpp"
#include "cpu/workspace.hpp"

// The replacements below pair malloc with free on purpose; GCC, seeing them inlined into
// callers of new/delete, reports a mismatch it cannot know is intended.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<std::int64_t> g_allocations{0};
std::atomic<std::int64_t> g_deallocations{0};

void* counted_alloc(std::size_t size, std::size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (size + align - 1) / align * align)
                : std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) {
  return counted_alloc(size, 0);
}
void* operator new[](std::size_t size) {
  return counted_alloc(size, 0);
}
void* operator new(std::size_t size, std::align_val_t a) {
  return counted_alloc(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return counted_alloc(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  if (p) g_deallocations.fetch_add(1, std::memory_order_relaxed);
  std::free(p);
}
void operator delete[](void* p) noexcept {
  operator delete(p);
}
void operator delete(void* p, std::size_t) noexcept {
  operator delete(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  operator delete(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  operator delete(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  operator delete(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  operator delete(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  operator delete(p);
}

namespace {

using convbank::Shape;
using convbank::Status;
using convbank::Tensor;

Tensor random_tensor(Shape shape, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
  return t;
}

template <class Layer>
std::shared_ptr<Layer> make(
    const typename std::remove_reference_t<decltype(std::declval<Layer>().options())>& o,
    Shape weight, std::mt19937_64& rng) {
  auto layer = std::make_shared<Layer>(o);
  Tensor w = random_tensor(weight, rng);
  for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] *= 0.05f;
  layer->set_weight(w);
  if (o.bias) layer->set_bias(random_tensor(Shape{1, 1, o.out_channels}, rng));
  return layer;
}

// The streaming workload's chain: Conv1d 1 -> 512 K16 s8, then ConvTranspose1d 512 -> 1 K16 s8.
std::pair<std::shared_ptr<convbank::Conv1d>, std::shared_ptr<convbank::ConvTranspose1d>>
make_tasnet(std::mt19937_64& rng) {
  return {make<convbank::Conv1d>(
              {.in_channels = 1, .out_channels = 512, .kernel_size = 16, .stride = 8},
              Shape{512, 1, 16}, rng),
          make<convbank::ConvTranspose1d>(
              {.in_channels = 512, .out_channels = 1, .kernel_size = 16, .stride = 8},
              Shape{512, 1, 16}, rng)};
}

struct Counts {
  std::int64_t allocations = 0, deallocations = 0, eigen = 0;
};

// Runs `calls` process() calls of random lengths in [1, max_frames] (then flush, reset, and
// again) and returns what was allocated meanwhile.
template <class Stream>
Counts count_during(Stream& stream, std::int64_t in_channels, std::int64_t max_frames,
                    std::int64_t batch, int calls, std::mt19937_64& rng) {
  const Tensor x = random_tensor(Shape{batch, in_channels, max_frames}, rng);
  Tensor out(Shape{batch, stream.out_channels(),
                   std::max(stream.max_output_frames(max_frames), stream.max_flush_frames())});
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(calls));
  for (auto& n : lengths) n = std::uniform_int_distribution<std::int64_t>(1, max_frames)(rng);
  bool ok = true;
  const std::int64_t eigen_before = convbank::detail::cpu::eigen_malloc_violations();
  convbank::detail::cpu::set_eigen_malloc_allowed(false);
  const std::int64_t a0 = g_allocations.load();
  const std::int64_t d0 = g_deallocations.load();
  for (int i = 0; i < calls; ++i) {
    std::int64_t produced = 0;
    ok &= stream.process(x.view().slice_frames(0, lengths[static_cast<std::size_t>(i)]), out.view(),
                         &produced) == Status::kOk;
    if (i == calls / 2) {
      ok &= stream.flush(out.view(), &produced) == Status::kOk;
      stream.reset();
      ok &= stream.reset(batch - 1) == Status::kOk;
    }
  }
  std::int64_t produced = 0;
  ok &= stream.flush(out.view(), &produced) == Status::kOk;
  Counts c{g_allocations.load() - a0, g_deallocations.load() - d0, 0};
  convbank::detail::cpu::set_eigen_malloc_allowed(true);
  c.eigen = convbank::detail::cpu::eigen_malloc_violations() - eigen_before;
  stream.reset();
  CHECK(ok);
  return c;
}

void check_zero(const Counts& c) {
  CHECK(c.allocations == 0);
  CHECK(c.deallocations == 0);
  CHECK(c.eigen == 0);
}

}  // namespace

TEST_CASE("stream: no allocation in process() after prepare (counted operator new)") {
  std::mt19937_64 rng(2026);
  // The counter works.
  const std::int64_t before = g_allocations.load();
  { auto probe = std::make_unique<std::vector<int>>(100); }
  REQUIRE(g_allocations.load() - before >= 2);

  SUBCASE("TasNet chain, batch 1 and 8") {
    const auto [enc, dec] = make_tasnet(rng);
    for (std::int64_t batch : {1, 8}) {
      convbank::StreamChain chain;
      chain.add(enc).add(dec);
      const std::int64_t max_frames = batch == 1 ? 1024 : 256;
      chain.prepare(max_frames, batch);
      check_zero(count_during(chain, 1, max_frames, batch, batch == 1 ? 4000 : 1000, rng));
    }
  }
  SUBCASE("GEMM shapes with deep reductions, Winograd-eligible and direct shapes") {
    auto wide = make<convbank::Conv1d>(
        {.in_channels = 256, .out_channels = 384, .kernel_size = 16, .stride = 3, .padding = 7},
        Shape{384, 256, 16}, rng);
    convbank::Conv1dStream a(wide);
    a.prepare(100, 2);
    check_zero(count_during(a, 256, 100, 2, 300, rng));
    auto k3 = make<convbank::Conv1d>(
        {.in_channels = 64, .out_channels = 64, .kernel_size = 3, .padding = 1}, Shape{64, 64, 3},
        rng);
    convbank::Conv1dStream b(k3);
    b.prepare(512, 1);
    check_zero(count_during(b, 64, 512, 1, 2000, rng));
    auto up = make<convbank::ConvTranspose1d>({.in_channels = 384,
                                               .out_channels = 256,
                                               .kernel_size = 9,
                                               .stride = 2,
                                               .padding = 3,
                                               .output_padding = 1},
                                              Shape{384, 256, 9}, rng);
    convbank::ConvTranspose1dStream c(up);
    c.prepare(60, 2);
    check_zero(count_during(c, 384, 60, 2, 300, rng));
    auto depthwise = make<convbank::Conv1d>({.in_channels = 8,
                                             .out_channels = 8,
                                             .kernel_size = 3,
                                             .padding = convbank::Padding::same(),
                                             .dilation = 8,
                                             .groups = 8},
                                            Shape{8, 1, 3}, rng);
    convbank::Conv1dStream d(depthwise);
    d.prepare(256, 4);
    check_zero(count_during(d, 8, 256, 4, 3000, rng));
  }
  SUBCASE("reflect and replicate padding (filled from kept frames)") {
    auto reflect = make<convbank::Conv1d>({.in_channels = 16,
                                           .out_channels = 32,
                                           .kernel_size = 7,
                                           .stride = 2,
                                           .padding = 3,
                                           .padding_mode = convbank::PaddingMode::kReflect},
                                          Shape{32, 16, 7}, rng);
    convbank::Conv1dStream a(reflect);
    a.prepare(128, 2);
    check_zero(count_during(a, 16, 128, 2, 2000, rng));
    auto replicate = make<convbank::Conv1d>({.in_channels = 4,
                                             .out_channels = 4,
                                             .kernel_size = 5,
                                             .padding = convbank::Padding::same(),
                                             .groups = 4,
                                             .padding_mode = convbank::PaddingMode::kReplicate},
                                            Shape{4, 1, 5}, rng);
    convbank::Conv1dStream b(replicate);
    b.prepare(64, 3);
    check_zero(count_during(b, 4, 64, 3, 2000, rng));
  }
}

TEST_CASE("cuda:stream no allocation in process() on CUDA after warm_up (graph replay)") {
  if (!convbank::cuda_available()) {
    MESSAGE("CUDA device not available: skipped");
    return;
  }
  std::mt19937_64 rng(4);
  const auto [enc, dec] = make_tasnet(rng);
  for (std::int64_t batch : {1, 8}) {
    convbank::StreamChain chain;
    chain.add(enc).add(dec);
    chain.prepare(1024, batch, convbank::Device::kCuda);
    chain.warm_up({64, 256, 1000});
    const Tensor x = random_tensor(Shape{batch, 1, 1024}, rng);
    Tensor out(Shape{batch, 1, chain.max_output_frames(1024)});
    bool ok = true;
    const std::size_t graphs = chain.cuda_graphs();
    const std::int64_t a0 = g_allocations.load();
    const std::int64_t d0 = g_deallocations.load();
    for (int i = 0; i < 600; ++i) {
      const std::int64_t n = i < 200 ? 256 : i < 400 ? 64 : 1000;
      std::int64_t produced = 0;
      ok &= chain.process(x.view().slice_frames(0, n), out.view(), &produced) == Status::kOk;
    }
    const std::int64_t allocations = g_allocations.load() - a0;
    const std::int64_t deallocations = g_deallocations.load() - d0;
    CHECK(ok);
    CHECK(chain.cuda_graphs() == graphs);  // every call replayed a graph warm_up captured
    CHECK(allocations == 0);
    CHECK(deallocations == 0);
    MESSAGE("batch " << batch << ": " << graphs << " graphs, " << allocations
                     << " allocations in 600 process() calls");
  }
}

TEST_CASE("filterbank stream: no allocation in process() or flush() after prepare, any effect") {
  std::mt19937_64 rng(7);
  // n_fft 1024: weights over 1 MiB, so the CPU streams fold the two channels into one GEMM.
  for (const char* spec : {"stft:n_fft=256,hop=64", "stft:n_fft=1024,hop=256"}) {
    const auto bank = std::make_shared<convbank::FilterBank>(convbank::FilterBank::from_spec(spec));
    for (const char* effect : {"none", "gain:0-10=-20", "denoise", "denoise:release=0.05"}) {
      CAPTURE(spec);
      CAPTURE(effect);
      convbank::FilterBankStream stream(bank, convbank::make_effect(effect, *bank, 16000));
      const std::int64_t max_frames = 300, channels = 2;
      stream.prepare(max_frames, channels);
      const Tensor x = random_tensor(Shape{1, channels, max_frames}, rng);
      Tensor out(Shape{1, channels,
                       std::max(stream.max_output_frames(max_frames), stream.max_flush_frames())});
      std::vector<std::int64_t> lengths(1000);
      for (auto& n : lengths) n = std::uniform_int_distribution<std::int64_t>(1, max_frames)(rng);
      bool ok = true;
      const std::int64_t eigen_before = convbank::detail::cpu::eigen_malloc_violations();
      convbank::detail::cpu::set_eigen_malloc_allowed(false);
      const std::int64_t a0 = g_allocations.load();
      const std::int64_t d0 = g_deallocations.load();
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        std::int64_t produced = 0;
        ok &= stream.process(x.view().slice_frames(0, lengths[i]), out.view(), &produced) ==
              Status::kOk;
        if (i == lengths.size() / 2) {
          ok &= stream.flush(out.view(), &produced) == Status::kOk;
          stream.reset();
        }
      }
      std::int64_t produced = 0;
      ok &= stream.flush(out.view(), &produced) == Status::kOk;
      const Counts c{g_allocations.load() - a0, g_deallocations.load() - d0, 0};
      convbank::detail::cpu::set_eigen_malloc_allowed(true);
      CHECK(ok);
      check_zero(Counts{c.allocations, c.deallocations,
                        convbank::detail::cpu::eigen_malloc_violations() - eigen_before});
    }
  }
}

TEST_CASE("stream: no allocation in a CUDA stream's process() or flush() after warm_up") {
  if (!convbank::cuda_available()) {
    MESSAGE("CUDA device not available: skipped");
    return;
  }
  std::mt19937_64 rng(9);
  const auto [enc, dec] = make_tasnet(rng);
  convbank::StreamChain chain;
  chain.add(enc).add(dec);
  chain.prepare(256, 2, convbank::Device::kCuda);
  chain.warm_up({256, 100});
  const Tensor x = random_tensor(Shape{2, 1, 256}, rng);
  Tensor out(Shape{2, 1, std::max(chain.max_output_frames(256), chain.max_flush_frames())});
  bool ok = true;
  const std::int64_t a0 = g_allocations.load();
  for (int i = 0; i < 200; ++i) {
    std::int64_t produced = 0;
    // The warmed lengths replay their graphs; flush (below) launches uncaptured.
    const std::int64_t n = i % 3 == 0 ? 100 : 256;
    ok &= chain.process(x.view().slice_frames(0, n), out.view(), &produced) == Status::kOk;
  }
  std::int64_t produced = 0;
  ok &= chain.flush(out.view(), &produced) == Status::kOk;  // flush runs uncaptured
  const std::int64_t allocations = g_allocations.load() - a0;
  CHECK(ok);
  CHECK(allocations == 0);
}
