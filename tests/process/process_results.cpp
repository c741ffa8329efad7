// The process harness's readers of what processes said and left (process_harness.hpp): text
// lines, ids, JSON fields, a run's description, a node's metric, files in a directory.
#include <fstream>
#include <sstream>
#include <system_error>

#include <google/protobuf/util/json_util.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in{text};
  for (std::string l; std::getline(in, l);)
    if (!trim(l).empty())
      out.push_back(l);
  return out;
}

std::optional<uint64_t> parse_id(const std::string& text) {
  auto t = trim(text);
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(t);
}

std::optional<google::protobuf::Value> parse_json(const std::string& text) {
  google::protobuf::Value v;
  if (!google::protobuf::util::JsonStringToMessage(trim(text), &v).ok())
    return std::nullopt;
  return v;
}

const google::protobuf::Value& field(const google::protobuf::Value& v, const std::string& key) {
  static const google::protobuf::Value none;
  auto& f = v.struct_value().fields();
  auto i = f.find(key);
  return i == f.end() ? none : i->second;
}

std::string state_of(const google::protobuf::Value& v) {
  return field(v, "state").string_value();
}

uint64_t id_of(const google::protobuf::Value& v) {
  return static_cast<uint64_t>(field(v, "id").number_value());
}

std::string describe(const run_result& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "")
         + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

double metric(const node& n, const std::string& name) {
  auto r = n.ctl({"metrics"}, std::chrono::seconds{30});
  std::istringstream in(r.out);
  std::string line;
  double sum = 0;
  bool found = false;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0 || line.rfind(name + "{", 0) == 0) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
      found = true;
    }
  return found ? sum : -1;
}

std::set<std::string> file_names(const std::filesystem::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it{dir, ec}, end; !ec && it != end; it.increment(ec))
    names.insert(it->path().filename().string());
  return names;
}

size_t count_files(const std::filesystem::path& dir) {
  return file_names(dir).size();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace proctor::test
