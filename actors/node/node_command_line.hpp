// proctord's command line and --config file as run_node reads them: CLI11 parses both; this
// adds what CLI11 lets through (a TOML string without its closing quote, text after a value)
// and says every error in one line naming the option or the file's key (exit 64), and reads
// --http's short forms.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace proctor {

/// --http's "HOST:PORT", where a bare "PORT" or ":PORT" means 127.0.0.1:PORT: the console
/// is reachable from elsewhere only when an address says so.
std::string console_address(const std::string& text);

/// What CLI11's lenient reading of a --config file lets through and TOML does not: a string
/// without its closing quote (`http = "127.0.0.1:8199`, taken as a value with a stray quote),
/// or text after a string. "" when every line is well formed; else "LINE: what is wrong".
std::string lint_config(const std::string& file);

/// Parses the command line and its --config file. Nullopt to go on; otherwise what to print
/// before exit 64, or "" when help was asked for and printed (exit 0). One line per error,
/// naming the option or the file's key.
std::optional<std::string> parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace proctor
