// proctord's command line and --config file (node_command_line.hpp).
#include "actors/node/node_command_line.hpp"

#include <fstream>

namespace proctor {

std::string console_address(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
    return "127.0.0.1:" + text;
  if (!text.empty() && text.front() == ':')
    return "127.0.0.1" + text;
  return text;
}

std::string lint_config(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    auto at = line.find_first_not_of(" \t");
    if (at == std::string::npos || line[at] == '#' || line[at] == '[')
      continue;
    auto eq = line.find('=');
    if (eq == std::string::npos)
      continue;  // (CLI11 names what it cannot read)
    auto key = line.substr(at, line.find_last_not_of(" \t", eq - 1) + 1 - at);
    auto v = line.find_first_not_of(" \t", eq + 1);
    if (v == std::string::npos || (line[v] != '"' && line[v] != '\''))
      continue;
    const char q = line[v];
    if (line.compare(v, 3, std::string(3, q)) == 0)
      continue;  // a multi-line string: left to CLI11
    size_t end = v + 1;
    while (end < line.size() && line[end] != q)
      end += (q == '"' && line[end] == '\\') ? 2 : 1;
    if (end >= line.size())
      return std::to_string(n) + ": the value of '" + key + "' has no closing " + q;
    auto rest = line.find_first_not_of(" \t", end + 1);
    if (rest != std::string::npos && line[rest] != '#')
      return std::to_string(n) + ": text after the value of '" + key + "': " + line.substr(rest);
  }
  return {};
}

std::optional<std::string> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    if (auto* o = app.get_option("--config"); o->count() > 0) {
      auto file = o->as<std::string>();
      if (auto why = lint_config(file); !why.empty())
        return "--config " + file + ":" + why;
    }
    return std::nullopt;
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return std::string{};
  } catch (const CLI::CallForAllHelp& e) {
    app.exit(e);
    return std::string{};
  } catch (const CLI::ConfigError& e) {
    // CLI11's "INI was not able to parse KEY" is a key no option has.
    std::string what = e.what();
    const std::string extra = "INI was not able to parse ";
    std::string file = app.get_option("--config")->as<std::string>();
    if (what.rfind(extra, 0) == 0) {
      // A section's first line comes as "SECTION.++" (CLI11 would take it for a subcommand's).
      auto key = what.substr(extra.size());
      if (key.size() > 3 && key.ends_with(".++"))
        return "--config " + file + ": unknown section [" + key.substr(0, key.size() - 3) + "]";
      return "--config " + file + ": unknown key '" + key + "'";
    }
    return "--config " + file + ": " + what;
  } catch (const CLI::FileError& e) {
    return std::string{"--config: "} + e.what();
  } catch (const CLI::ParseError& e) {
    return std::string{e.what()};
  }
}

}  // namespace proctor
