// workload_regex.cc - a real workload for bench_preload's callgrind mode:
// `g++ -O2 -c` of this file, ordinary code that leans on <regex> (a log
// parser, a tokenizer, a few validators), whose templates make the
// compiler instantiate, resolve and inline a great deal. It is compiled,
// never run or linked; it only has to be valid C++17.
#include <cstddef>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace wl {

// ---- a log parser: one line a record, fields by named position.

struct record {
  std::string date, time, level, component, message;
  int pid = 0;
};

std::optional<record> parse_line(const std::string &line) {
  static const std::regex re(
      R"(^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) \[(\w+)\] )"
      R"(([\w.-]+)\[(\d+)\]: (.*)$)");
  std::smatch m;
  if (!std::regex_match(line, m, re))
    return std::nullopt;
  record r;
  r.date = m[1];
  r.time = m[2];
  r.level = m[3];
  r.component = m[4];
  r.pid = std::stoi(m[5]);
  r.message = m[6];
  return r;
}

std::map<std::string, std::size_t>
count_levels(const std::vector<std::string> &lines) {
  std::map<std::string, std::size_t> n;
  for (const auto &l : lines)
    if (auto r = parse_line(l))
      n[r->level]++;
  return n;
}

// ---- a tokenizer: numbers, identifiers, strings, operators.

enum class tok { number, ident, string, op, space };

std::vector<std::pair<tok, std::string>> tokenize(const std::string &src) {
  static const std::regex re(
      R"((\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|("(?:[^"\\]|\\.)*")|)"
      R"(([-+*/%=<>!&|^~]=?|[()\[\]{},;.])|(\s+))");
  std::vector<std::pair<tok, std::string>> out;
  for (std::sregex_iterator it(src.begin(), src.end(), re), end; it != end;
       ++it) {
    const std::smatch &m = *it;
    for (std::size_t g = 1; g <= 5; g++)
      if (m[g].matched) {
        if (g != 5)
          out.emplace_back(static_cast<tok>(g - 1), m[g].str());
        break;
      }
  }
  return out;
}

// ---- validators and rewriters, narrow and wide.

bool is_email(const std::string &s) {
  static const std::regex re(R"(^[\w.+-]+@[\w-]+(\.[\w-]+)+$)",
                             std::regex::icase);
  return std::regex_match(s, re);
}

bool is_ipv4(const std::string &s) {
  static const std::regex re(
      R"(^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)$)");
  return std::regex_match(s, re);
}

bool is_uuid(const std::wstring &s) {
  static const std::wregex re(
      LR"(^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-)"
      LR"([0-9a-f]{12}$)",
      std::regex::icase | std::regex::optimize);
  return std::regex_match(s, re);
}

std::string redact(const std::string &s) {
  static const std::regex digits(R"(\b\d{4}(?:[ -]?\d{4}){3}\b)");
  static const std::regex mail(R"([\w.+-]+@[\w-]+(\.[\w-]+)+)");
  return std::regex_replace(std::regex_replace(s, digits, "####"), mail,
                            "<mail>");
}

std::wstring squeeze(const std::wstring &s) {
  static const std::wregex ws(LR"(\s+)");
  return std::regex_replace(s, ws, L" ");
}

std::vector<std::string> split(const std::string &s, const std::string &sep) {
  std::regex re(sep, std::regex::extended);
  std::vector<std::string> out(
      std::sregex_token_iterator(s.begin(), s.end(), re, -1),
      std::sregex_token_iterator());
  return out;
}

std::map<std::string, std::string> parse_ini(const std::string &text) {
  static const std::regex line(R"(^\s*([\w.]+)\s*=\s*(.*?)\s*$)",
                               std::regex::multiline);
  std::map<std::string, std::string> kv;
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end;
       ++it)
    kv[(*it)[1]] = (*it)[2];
  return kv;
}

std::size_t count_words(const std::string &s, const char *grammar) {
  std::regex re(grammar, std::regex::ECMAScript | std::regex::nosubs);
  return static_cast<std::size_t>(std::distance(
      std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()));
}

std::size_t count_awk(const std::string &s) {
  std::regex re("[[:alpha:]]+", std::regex::awk);
  return static_cast<std::size_t>(std::distance(
      std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()));
}

bool grep_line(const char *line, const char *pattern) {
  std::cregex_iterator end;
  std::regex re(pattern, std::regex::grep);
  return std::cregex_iterator(line, line + std::char_traits<char>::length(line),
                              re) != end;
}

} // namespace wl
