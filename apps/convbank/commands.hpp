// Each subcommand of the convbank app registers itself on the CLI11 app and returns the
// function that runs it once parsing succeeded. main() owns error handling and exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace convbank::app {

using Runner = std::function<int()>;

// conv1d and conv-transpose1d: run one layer on .npy tensors (parity checks with PyTorch).
void add_layer_tools(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands);
// bench: time the workloads of shared/workloads.md on this machine.
void add_bench(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands);
// bench-stream: per-chunk latency of the CPU stream API on the TasNet chain.
void add_bench_stream(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands);

// compare: max difference and relative L2 between two .npy tensors.
void add_compare(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands);

// process, stream, analyze: audio files through a filter bank (builds with libsndfile only).
void add_audio_tools(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands);

// snr: SNR in dB of audio files against a reference (builds with libsndfile only).
void add_snr(CLI::App& app, std::vector<std::pair<CLI::App*, Runner>>& commands);

}  // namespace convbank::app
