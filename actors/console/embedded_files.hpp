// Files built into the binary (cmake/EmbedFiles.cmake generates the arrays): the web
// console's pages and the API's OpenAPI document, served without reading anything from disk
// at run time.
#pragma once

#include <span>
#include <string_view>

namespace proctor {

struct embedded_file {
  /// The file's path under the embedded directory ("index.html", "console.js").
  std::string_view name;
  /// Its bytes, as they were at build time.
  std::string_view data;
};

/// The web console's files (actors/console/).
std::span<const embedded_file> console_files();

/// The API's OpenAPI document (docs/openapi.json), served at /api/openapi.json.
std::span<const embedded_file> api_files();

}  // namespace proctor
