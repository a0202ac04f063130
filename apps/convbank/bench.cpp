#include "commands.hpp"
namespace convbank::app {
void add_bench(CLI::App&, std::vector<std::pair<CLI::App*, Runner>>&) {}
}
