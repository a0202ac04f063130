// convbank: filter banks over multi-channel audio, from the command line.
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "convbank/convbank.hpp"

int main(int argc, char** argv) {
  CLI::App app{"convbank: PyTorch-exact Conv1d / ConvTranspose1d filter banks over audio"};
  app.set_version_flag("--version", convbank::build_info());
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, convbank::app::Runner>> commands;
  convbank::app::add_layer_tools(app, commands);
  convbank::app::add_bench(app, commands);
  convbank::app::add_bench_stream(app, commands);
  convbank::app::add_compare(app, commands);
#if defined(CONVBANK_WITH_SNDFILE)
  convbank::app::add_audio_tools(app, commands);
  convbank::app::add_snr(app, commands);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "convbank: error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    for (auto& [sub, run] : commands) {
      if (sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convbank: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
