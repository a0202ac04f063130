#include "commands.hpp"
namespace convbank::app {
void add_layer_tools(CLI::App&, std::vector<std::pair<CLI::App*, Runner>>&) {}
}
