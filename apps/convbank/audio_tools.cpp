// convbank process / analyze / stream: audio files through a filter bank (the main job).
//
// process and stream read the input in chunks through libsndfile, run them through a
// FilterBankStream (analysis -> effect -> synthesis) and write each chunk as it comes out, so
// memory stays bounded by the chunk size whatever the file length. The output is aligned with
// the input and has its length: the stream's output starts at input frame 0 (the layers trim
// their own padding), and a few zero frames are fed after the input so that the last input
// frames get their full overlap before flush. The output goes to a temporary file renamed at
// the end; the input is never overwritten.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "app_util.hpp"
#include "commands.hpp"
#include "convbank/convbank.hpp"

namespace convbank::app {

namespace {

namespace fs = std::filesystem;

struct AudioArgs {
  std::string input;
  std::string output;
  std::string preset;
  std::string weights;
  std::string effect;
  std::string subtype;
  std::int64_t chunk = 4096;
  std::string device = "cpu";
  bool quiet = false;
  bool realtime = false;
  bool check = false;
};

// The main job's bank: an STFT of about 25 ms (the nearest power of two: 512 at 16 kHz, 1024 at
// 44.1/48 kHz), hop a quarter of it. Its cost per sample grows with n_fft (a direct Fourier
// bank), so the window is kept near the usual speech-enhancement length.
std::string default_preset(int sample_rate) {
  const double target = 0.025 * sample_rate;
  std::int64_t n_fft = 16;
  while (n_fft * 2 <= target * std::sqrt(2.0)) n_fft *= 2;
  return "stft:n_fft=" + std::to_string(n_fft) + ",hop=" + std::to_string(n_fft / 4) +
         ",window=hann";
}

// The container for `path` from its extension, as io::AudioFormat names it.
std::string container_of(const std::string& path, const char* flag) {
  std::string ext = fs::path(path).extension().string();
  if (!ext.empty()) ext.erase(0, 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "aif") ext = "aiff";
  if (ext == "oga") ext = "ogg";
  for (const char* known : {"wav", "flac", "ogg", "aiff", "au", "caf", "w64", "rf64"}) {
    if (ext == known) return ext;
  }
  throw Error(std::string(flag) + " '" + path + "': unknown audio file extension '" + ext +
              "' (use .wav, .flac, .ogg, .aiff, .au, .caf, .w64 or .rf64)");
}

// The bank and effect for a file, with every check that names the file or the flag.
struct Job {
  std::shared_ptr<FilterBank> bank;
  std::string effect_spec;
  std::string preset;
};

Job make_job(const AudioArgs& a, const io::AudioInfo& info, bool default_effect_denoise) {
  Job job;
  job.preset = a.preset.empty() ? default_preset(info.sample_rate) : a.preset;
  job.bank = std::make_shared<FilterBank>(FilterBank::from_spec(
      job.preset, FilterBankSource{static_cast<double>(info.sample_rate), a.weights}));
  job.bank->check_sample_rate(info.sample_rate, "input '" + a.input + "'");
  if (job.bank->audio_channels() != 0 && job.bank->audio_channels() != info.channels) {
    throw Error("input '" + a.input + "' has " + std::to_string(info.channels) +
                " channels, but the filter bank (" + job.preset + ") takes " +
                std::to_string(job.bank->audio_channels()));
  }
  job.effect_spec = !a.effect.empty()
                        ? a.effect
                        : (default_effect_denoise && a.preset.empty() ? "denoise" : "none");
  return job;
}

// Zero frames fed before the input, whose output is dropped: the input's first frames then
// sit where every frame of the bank that covers them exists, so the synthesis (normalized for
// the steady state) reconstructs them as it does the middle of the signal.
std::int64_t preroll(const FilterBank& bank) {
  return bank.kernel_size();
}

// Zero frames fed after the input (preceded by the preroll): a kernel's worth, so that the last
// input frames get every frame that covers them, and more if the output would still be short.
std::int64_t tail_padding(const FilterBank& bank, std::int64_t frames) {
  const std::int64_t fed = preroll(bank) + frames + bank.kernel_size();
  for (std::int64_t z = 0; z <= bank.kernel_size() + bank.stride(); ++z) {
    try {
      const std::int64_t f = bank.analysis().output_frames(fed + z);
      if (bank.synthesis().output_frames(f) >= preroll(bank) + frames) {
        return bank.kernel_size() + z;
      }
    } catch (const Error&) {
      // too short for one frame yet: feed more zeros
    }
  }
  return 2 * bank.kernel_size() + bank.stride();
}

io::AudioWriter open_writer(const AudioArgs& a, const io::AudioInfo& info,
                            const TemporaryOutput& out) {
  io::AudioFormat f{info.sample_rate, info.channels, container_of(a.output, "OUT"),
                    a.subtype.empty() ? info.subtype : a.subtype};
  try {
    return io::AudioWriter(out.temp_path(), f);
  } catch (const Error&) {
    // The input's subtype may not fit the output's container (e.g. vorbis into .wav): the
    // container's usual one then, unless --subtype asked for this one.
    if (!a.subtype.empty()) throw;
    f.subtype.clear();
    return io::AudioWriter(out.temp_path(), f);
  }
}

struct Timing {
  std::vector<double> per_chunk_us;
  double total_s = 0;
  std::int64_t misses = 0;
  std::int64_t chunks = 0;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  return v[static_cast<std::size_t>(std::llround(at))];
}

// The streaming run shared by process and stream: reads `reader` in chunks of a.chunk frames,
// runs them through the bank and writes the output, exactly as long as the input, to `writer`
// (and into `keep`, when given, for --check). Times each process() call.
Timing run_stream(const AudioArgs& a, io::AudioReader& reader, const Job& job,
                  io::AudioWriter& writer, Tensor* keep, std::int64_t* latency_frames) {
  const io::AudioInfo& info = reader.info();
  const Device device = parse_device(a.device);
  FilterBankStream stream(job.bank, make_effect(job.effect_spec, *job.bank, info.sample_rate));
  stream.prepare(a.chunk, info.channels, 1, device);
  *latency_frames = stream.latency_frames();
  Tensor in = Tensor::zeros(Shape{1, info.channels, a.chunk});
  Tensor out(Shape{1, info.channels,
                   std::max(stream.max_output_frames(a.chunk), stream.max_flush_frames()) + 1});
  ProgressBar bar(a.check || a.realtime ? "stream" : "process", info.frames, !a.quiet);
  Timing timing;
  std::int64_t read_total = 0, written = 0;
  std::int64_t skip = preroll(*job.bank);  // output frames of the preroll, not written
  std::int64_t pad_left = 0;               // zero frames still to feed after the end of the input
  std::int64_t target = -1;  // output frames to write (the input's length), once known
  const auto emit = [&](std::int64_t frames) {
    const std::int64_t first = std::min(skip, frames);
    skip -= first;
    std::int64_t n = frames - first;
    if (target >= 0) n = std::min(n, target - written);
    if (n <= 0) return;
    writer.write(out.view().slice_frames(first, n));
    if (keep != nullptr && written + n <= keep->shape().frames) {
      copy(out.view().slice_frames(first, n), keep->view().slice_frames(written, n));
    }
    written += n;
  };
  for (std::int64_t left = preroll(*job.bank); left > 0;) {  // `in` holds zeros still
    const std::int64_t n = std::min(left, a.chunk);
    std::int64_t produced = 0;
    if (stream.process(in.view().slice_frames(0, n), out.view(), &produced) != Status::kOk) {
      throw Error("input '" + a.input + "': the stream failed in its preroll");
    }
    emit(produced);
    left -= n;
  }
  const double chunk_seconds = static_cast<double>(a.chunk) / info.sample_rate;
  const auto t_start = std::chrono::steady_clock::now();
  bool eof = false;
  while (true) {
    std::int64_t n = 0;
    if (!eof) {
      n = reader.read(in.view());
      read_total += n;
      if (n < a.chunk) {
        eof = true;
        target = read_total;
        pad_left = tail_padding(*job.bank, read_total);
      }
    }
    if (eof) {
      const std::int64_t z = std::min(pad_left, a.chunk - n);
      for (std::int64_t c = 0; c < info.channels; ++c) {
        std::fill(in.view().channel(0, c) + n, in.view().channel(0, c) + n + z, 0.0f);
      }
      n += z;
      pad_left -= z;
    }
    if (n == 0) break;
    if (a.realtime) {
      // Paced as an audio callback: chunk i is due once i chunks of audio have played.
      std::this_thread::sleep_until(
          t_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timing.chunks * chunk_seconds)));
    }
    std::int64_t produced = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = stream.process(in.view().slice_frames(0, n), out.view(), &produced);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (st != Status::kOk) {
      throw Error("input '" + a.input + "': the stream failed on chunk " +
                  std::to_string(timing.chunks) +
                  (st == Status::kBackendFailure ? " (device error)" : ""));
    }
    timing.per_chunk_us.push_back(us);
    if (us > chunk_seconds * 1e6) ++timing.misses;
    ++timing.chunks;
    emit(produced);
    bar.update(read_total);
    if (eof && pad_left == 0) break;
  }
  std::int64_t produced = 0;
  if (stream.flush(out.view(), &produced) != Status::kOk) {
    throw Error("input '" + a.input + "': the stream failed at flush");
  }
  emit(produced);
  timing.total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  bar.finish();
  if (written != read_total) {
    throw Error("internal error: wrote " + std::to_string(written) + " frames for " +
                std::to_string(read_total) + " input frames");
  }
  return timing;
}

// The whole file in memory, (1, channels, frames), for --check and analyze.
Tensor read_all(io::AudioReader& reader) {
  const io::AudioInfo& info = reader.info();
  std::vector<Tensor> parts;
  std::int64_t total = 0;
  while (true) {
    Tensor chunk(Shape{1, info.channels, 1 << 16});
    const std::int64_t n = reader.read(chunk.view());
    if (n == 0) break;
    Tensor part(Shape{1, info.channels, n});
    copy(chunk.view().slice_frames(0, n), part.view());
    total += n;
    parts.push_back(std::move(part));
  }
  Tensor all(Shape{1, info.channels, total});
  std::int64_t at = 0;
  for (const Tensor& p : parts) {
    copy(p.view(), all.view().slice_frames(at, p.shape().frames));
    at += p.shape().frames;
  }
  return all;
}

// decode(effect(encode(x))) of the whole signal, with the stream's preroll and tail padding.
Tensor offline(const Job& job, const Tensor& x, double sample_rate) {
  const std::int64_t frames = x.shape().frames;
  const std::int64_t pre = preroll(*job.bank);
  const std::int64_t z = tail_padding(*job.bank, frames);
  Tensor padded = Tensor::zeros(Shape{1, x.shape().channels, pre + frames + z});
  copy(x.view(), padded.view().slice_frames(pre, frames));
  Tensor features = job.bank->encode(padded);
  if (auto effect = make_effect(job.effect_spec, *job.bank, sample_rate)) {
    effect->prepare(features.shape().batch, features.shape().channels, features.shape().frames);
    effect->process(features.view());
  }
  const Tensor y = job.bank->decode(features, x.shape().channels);
  Tensor out(Shape{1, x.shape().channels, frames});
  copy(y.view().slice_frames(pre, frames), out.view());
  return out;
}

struct Opened {
  std::unique_ptr<io::AudioReader> reader;
  Job job;
};

Opened open_job(const AudioArgs& a) {
  refuse_overwrite(a.output, "OUT", {{"IN", a.input}, {"--weights", a.weights}});
  if (a.chunk < 1) throw Error("--chunk must be >= 1, got " + std::to_string(a.chunk));
  container_of(a.output, "OUT");
  Opened o;
  o.reader = std::make_unique<io::AudioReader>(a.input);
  o.job = make_job(a, o.reader->info(), true);
  make_effect(o.job.effect_spec, *o.job.bank, o.reader->info().sample_rate);  // validates
  return o;
}

int run_process(const AudioArgs& a) {
  Opened o = open_job(a);
  TemporaryOutput output(a.output, "OUT");
  const io::AudioInfo info = o.reader->info();
  io::AudioWriter writer = open_writer(a, info, output);
  std::int64_t latency = 0;
  const Timing t = run_stream(a, *o.reader, o.job, writer, nullptr, &latency);
  writer.close();
  output.commit();
  if (!a.quiet) {
    const double seconds = static_cast<double>(info.frames) / info.sample_rate;
    std::printf(
        "convbank process: %s -> %s: %.2f s of %d-channel %d Hz audio in %.3f s (%.0fx real "
        "time), latency %lld frames (%.1f ms), bank %s, effect %s, device %s\n",
        a.input.c_str(), a.output.c_str(), seconds, info.channels, info.sample_rate, t.total_s,
        t.total_s > 0 ? seconds / t.total_s : 0.0, static_cast<long long>(latency),
        1e3 * static_cast<double>(latency) / info.sample_rate, o.job.preset.c_str(),
        o.job.effect_spec.c_str(), a.device.c_str());
  }
  return 0;
}

int run_stream_command(const AudioArgs& a) {
  Opened o = open_job(a);
  TemporaryOutput output(a.output, "OUT");
  const io::AudioInfo info = o.reader->info();
  io::AudioWriter writer = open_writer(a, info, output);
  Tensor kept;
  if (a.check)
    kept = Tensor::zeros(Shape{1, info.channels, std::max<std::int64_t>(1, info.frames)});
  std::int64_t latency = 0;
  const Timing t = run_stream(a, *o.reader, o.job, writer, a.check ? &kept : nullptr, &latency);
  writer.close();
  output.commit();
  const double seconds = static_cast<double>(info.frames) / info.sample_rate;
  const double chunk_ms = 1e3 * static_cast<double>(a.chunk) / info.sample_rate;
  std::printf(
      "convbank stream: %s -> %s, %lld chunks of %lld frames (%.2f ms), device %s%s\n"
      "  latency: %lld frames (%.2f ms) from the bank + %lld frames (%.2f ms) of chunk buffering\n"
      "  per chunk: p50 %.1f us, p99 %.1f us, max %.1f us; deadline %.1f us, missed %lld\n"
      "  real-time factor %.4f (%.2f s of audio in %.3f s%s)\n",
      a.input.c_str(), a.output.c_str(), static_cast<long long>(t.chunks),
      static_cast<long long>(a.chunk), chunk_ms, a.device.c_str(),
      a.realtime ? ", paced at the sample rate" : "", static_cast<long long>(latency),
      1e3 * static_cast<double>(latency) / info.sample_rate, static_cast<long long>(a.chunk),
      chunk_ms, percentile(t.per_chunk_us, 0.5), percentile(t.per_chunk_us, 0.99),
      percentile(t.per_chunk_us, 1.0), chunk_ms * 1e3, static_cast<long long>(t.misses),
      seconds > 0
          ? std::accumulate(t.per_chunk_us.begin(), t.per_chunk_us.end(), 0.0) / 1e6 / seconds
          : 0.0,
      seconds, t.total_s, a.realtime ? " wall, paced" : "");
  if (a.check) {
    io::AudioReader again(a.input);
    const Tensor x = read_all(again);
    if (x.shape().frames != kept.shape().frames) {
      throw Error("--check: input '" + a.input + "' header says " + std::to_string(info.frames) +
                  " frames but " + std::to_string(x.shape().frames) + " were read");
    }
    const Tensor ref = offline(o.job, x, info.sample_rate);
    double max_diff = 0, max_ref = 0;
    for (std::int64_t i = 0; i < ref.numel(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(ref.data()[i] - kept.data()[i])));
      max_ref = std::max(max_ref, static_cast<double>(std::abs(ref.data()[i])));
    }
    std::printf("  check: max |streamed - offline| = %.3g (max |offline| %.3g)\n", max_diff,
                max_ref);
    if (max_diff > 1e-4 * std::max(1.0, max_ref)) {
      throw Error("--check: streamed output differs from offline processing by " +
                  std::to_string(max_diff));
    }
  }
  return 0;
}

int run_analyze(const AudioArgs& a) {
  refuse_overwrite(a.output, "-o", {{"IN", a.input}, {"--weights", a.weights}});
  TemporaryOutput output(a.output, "-o");
  io::AudioReader reader(a.input);
  const Job job = make_job(a, reader.info(), false);
  const Tensor x = read_all(reader);
  const std::int64_t need = job.bank->kernel_size() - job.bank->analysis().padding_left() -
                            job.bank->analysis().padding_right();
  if (x.shape().frames < need) {
    throw Error("input '" + a.input + "' has " + std::to_string(x.shape().frames) +
                " frames; the filter bank needs at least " + std::to_string(need));
  }
  Tensor features =
      job.bank->encode(parse_device(a.device) == Device::kCuda ? x.to(Device::kCuda) : x.clone());
  if (features.device() == Device::kCuda) features = features.to(Device::kCpu);
  output.write(features);
  if (!a.quiet) {
    std::printf("convbank analyze: %s -> %s: features %s (batch = %s, filters, frames), bank %s\n",
                a.input.c_str(), a.output.c_str(), features.shape_string().c_str(),
                job.bank->channel_mode() == ChannelMode::kShared ? "audio channels" : "1",
                job.preset.c_str());
  }
  return 0;
}

void add_job_options(CLI::App* c, AudioArgs& a) {
  c->add_option("--preset", a.preset,
                "Filter bank SPEC, e.g. stft:n_fft=512,hop=128,window=hann, "
                "param_sinc:n_filters=64,kernel_size=251,stride=80, "
                "free:analysis=encoder.weight,synthesis=decoder.weight,stride=8 (docs/usage.md). "
                "Default: an STFT of about 25 ms (a power of two) with a quarter hop");
  c->add_option("--weights", a.weights,
                "Trained weights for the free and analytic presets: a .safetensors file or a "
                "directory of KEY.npy files");
}

}  // namespace

void add_audio_tools(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands) {
  auto args = std::make_shared<AudioArgs>();
  {
    CLI::App* c = app.add_subcommand(
        "process",
        "Run an audio file through a filter bank and an effect, chunk by chunk (memory bounded "
        "by the chunk). With no --preset and no --effect: the main job, a spectral-gate "
        "denoiser on an STFT bank");
    c->add_option("IN", args->input, "Input audio file (WAV, FLAC, Ogg, AIFF, ...)")
        ->required()
        ->check(CLI::ExistingFile);
    c->add_option("OUT", args->output,
                  "Output audio file; its extension picks the container. Same rate and channels "
                  "as IN, and IN's sample type unless --subtype")
        ->required();
    add_job_options(c, *args);
    c->add_option("--effect", args->effect,
                  "none | denoise[:reduction_db=12,oversubtract=1.5,smoothing=0.03,release=0,"
                  "window=0.5] | gain:BAND=DB[,BAND=DB...] (BAND an index or a-b). "
                  "Default: denoise without --preset, none with it");
    c->add_option("--chunk", args->chunk, "Frames per chunk")->capture_default_str();
    c->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
    c->add_option("--subtype", args->subtype,
                  "Output sample type: pcm_16, pcm_24, pcm_32, float, double, vorbis, ...");
    c->add_flag("--quiet", args->quiet, "No progress bar and no summary line");
    commands.emplace_back(c, [args] { return run_process(*args); });
  }
  {
    CLI::App* c = app.add_subcommand(
        "stream",
        "Process an audio file as an audio callback would, one chunk at a time, and report the "
        "latency, the time per chunk (p50/p99/max), deadline misses and the real-time factor");
    c->add_option("IN", args->input, "Input audio file")->required()->check(CLI::ExistingFile);
    c->add_option("OUT", args->output, "Output audio file")->required();
    c->add_option("--chunk", args->chunk, "Frames per chunk (the callback's buffer size)")
        ->required();
    add_job_options(c, *args);
    c->add_option("--effect", args->effect, "As for process (default: denoise without --preset)");
    c->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
    c->add_option("--subtype", args->subtype, "Output sample type (default: IN's)");
    c->add_flag("--realtime", args->realtime,
                "Pace the chunks at the sample rate, as a live input would deliver them");
    c->add_flag("--check", args->check,
                "Also process the whole file offline and report the max difference (loads the "
                "file into memory); exit 1 if it exceeds 1e-4 of the signal's peak");
    c->add_flag("--quiet", args->quiet, "No progress bar");
    commands.emplace_back(c, [args] { return run_stream_command(*args); });
  }
  {
    CLI::App* c = app.add_subcommand(
        "analyze",
        "Write the analysis features of an audio file as .npy: (audio channels, n_filters, "
        "frames) for a shared bank, (1, n_filters, frames) for a multi-channel one");
    c->add_option("IN", args->input, "Input audio file")->required()->check(CLI::ExistingFile);
    c->add_option("-o,--output", args->output, "Output .npy file")->required();
    add_job_options(c, *args);
    c->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
    c->add_flag("--quiet", args->quiet, "No summary line");
    commands.emplace_back(c, [args] { return run_analyze(*args); });
  }
}

}  // namespace convbank::app
