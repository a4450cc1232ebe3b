#include "ocslab/ocsctl/scpi_codec.h"
#include "ocslab/common/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "string_reuse.h"

namespace ocslab::ocs {

namespace {

constexpr size_t kQuoteMax = 200;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

[[noreturn]] void fail(const std::string& what, std::string_view text) {
  throw ProtocolError(what + ": " + scpi_quote(text));
}

// Replies are printable text; a control byte means a corrupt stream or a binary block we
// did not ask for, and must not be mistaken for data.
std::string_view reply_text(std::string_view line, const char* what) {
  std::string_view t = trim_space(line);
  for (char c : t) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) fail(std::string("control characters in ") + what, line);
  }
  if (t.empty()) fail(std::string("empty ") + what, line);
  return t;
}

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  s = trim_space(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

Port parse_channel(std::string_view token, std::string_view whole) {
  Port p = 0;
  if (!parse_int(token, p)) fail("bad channel '" + std::string(trim_space(token).substr(0, 20)) + "'", whole);
  if (p < 1 || p > kScpiMaxPort) fail(fmt::format("channel {} out of range 1..{}", p, kScpiMaxPort), whole);
  return p;
}

// Splits at `sep` outside parentheses and quoted strings; SCPI strings double their quote
// character to escape it, which the toggle below handles naturally.
std::vector<std::string_view> split_top_level(std::string_view s, char sep, std::string_view whole) {
  std::vector<std::string_view> out;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (--depth < 0) fail("unbalanced ')'", whole);
    } else if (c == sep && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (quote) fail("unterminated string", whole);
  if (depth != 0) fail("unbalanced '('", whole);
  out.push_back(s.substr(start));
  return out;
}

// One "(@...)" body (without the parentheses and '@'). `budget` is shared by everything
// parsed from one line so that many small ranges cannot add up to a huge allocation.
std::vector<Port> parse_list_body(std::string_view body, size_t& budget, std::string_view whole) {
  std::vector<Port> out;
  if (trim_space(body).empty()) return out;
  size_t start = 0;
  for (;;) {
    size_t comma = body.find(',', start);
    std::string_view item = trim_space(body.substr(start, comma == std::string_view::npos ? body.npos : comma - start));
    if (item.empty()) fail("empty entry in channel list", whole);
    size_t colon = item.find(':');
    Port a = parse_channel(item.substr(0, colon), whole);
    Port b = colon == std::string_view::npos ? a : parse_channel(item.substr(colon + 1), whole);
    size_t count = static_cast<size_t>(a <= b ? b - a : a - b) + 1;
    if (count > budget) fail(fmt::format("channel list longer than {} entries", kScpiMaxChannels), whole);
    budget -= count;
    int step = a <= b ? 1 : -1;
    for (Port p = a;; p += step) {
      out.push_back(p);
      if (p == b) break;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::vector<Port>> parse_lists(std::string_view text, size_t& budget, std::string_view whole) {
  std::vector<std::vector<Port>> out;
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < text.size() && is_space(text[i])) ++i;
  };
  skip_ws();
  if (i == text.size()) fail("expected a channel list (@...)", whole);
  while (i < text.size()) {
    if (text[i] != '(') fail("expected '(@' in channel list", whole);
    ++i;
    skip_ws();
    if (i >= text.size() || text[i] != '@') fail("expected '(@' in channel list", whole);
    ++i;
    size_t close = text.find(')', i);
    if (close == std::string_view::npos) fail("unterminated channel list", whole);
    out.push_back(parse_list_body(text.substr(i, close - i), budget, whole));
    i = close + 1;
    skip_ws();
    if (i == text.size()) break;
    if (text[i] != ',') fail("expected ',' between channel lists", whole);
    ++i;
    skip_ws();
    if (i == text.size()) fail("trailing ',' after channel list", whole);
  }
  return out;
}

// Undoes SCPI string quoting ("a ""b""" -> a "b"); the closing quote must end the text.
std::string unquote(std::string_view s, std::string_view whole) {
  char q = s.front();
  std::string out;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] != q) {
      out += s[i];
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == q) {
      out += q;
      ++i;
      continue;
    }
    if (!trim_space(s.substr(i + 1)).empty()) fail("text after closing quote", whole);
    return out;
  }
  fail("unterminated string", whole);
}

bool is_mnemonic_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A mnemonic in manual notation matches its short form (leading upper-case part) or the
// whole word, case-insensitively; `h` is already upper-cased.
bool mnemonic_matches(const std::string& h, std::string_view long_form) {
  size_t n = 0;
  while (n < long_form.size() && !std::islower(static_cast<unsigned char>(long_form[n]))) ++n;
  return h == upper(long_form) || h == upper(long_form.substr(0, n));
}

struct PatternToken {
  std::string_view word;
  bool optional;
};

bool match_from(const std::vector<std::string>& header, size_t hi, const std::vector<PatternToken>& tokens,
                size_t ti) {
  if (ti == tokens.size()) return hi == header.size();
  const auto& t = tokens[ti];
  if (hi < header.size() && mnemonic_matches(header[hi], t.word) && match_from(header, hi + 1, tokens, ti + 1))
    return true;
  return t.optional && match_from(header, hi, tokens, ti + 1);
}

ScpiCommand parse_command(std::string_view raw, std::vector<std::string>& path, size_t& budget,
                          std::string_view whole) {
  ScpiCommand cmd;
  std::string_view t = trim_space(raw);
  cmd.text = std::string(t);
  size_t end = 0;
  while (end < t.size() && !is_space(t[end])) ++end;
  std::string_view head = t.substr(0, end);
  std::string_view rest = trim_space(t.substr(end));
  if (head.ends_with('?')) {
    cmd.query = true;
    head.remove_suffix(1);
  }
  if (head.starts_with('*')) {
    std::string_view name = head.substr(1);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_mnemonic_char))
      fail("bad common command header", whole);
    cmd.header.push_back("*" + upper(name));
  } else {
    bool absolute = head.starts_with(':');
    if (absolute) head.remove_prefix(1);
    std::vector<std::string> mnems;
    size_t start = 0;
    for (;;) {
      size_t colon = head.find(':', start);
      std::string_view m = head.substr(start, colon == head.npos ? head.npos : colon - start);
      if (m.empty() || !std::isalpha(static_cast<unsigned char>(m.front())) ||
          !std::all_of(m.begin(), m.end(), is_mnemonic_char))
        fail("bad header '" + std::string(head.substr(0, 40)) + "'", whole);
      mnems.push_back(upper(m));
      if (colon == head.npos) break;
      start = colon + 1;
    }
    if (!absolute) cmd.header = path;
    cmd.header.insert(cmd.header.end(), mnems.begin(), mnems.end());
    path.assign(cmd.header.begin(), cmd.header.end() - 1);
  }
  if (!rest.empty()) {
    for (std::string_view a : split_top_level(rest, ',', whole)) {
      a = trim_space(a);
      if (a.empty()) fail("empty argument", whole);
      cmd.args.emplace_back(a);
      if (a.front() == '(') {
        auto lists = parse_lists(a, budget, whole);
        cmd.channel_lists.push_back(std::move(lists.at(0)));
      }
    }
  }
  return cmd;
}

}  // namespace

std::string scpi_quote(std::string_view text) {
  std::string out = "'";
  size_t n = std::min(text.size(), kQuoteMax);
  for (size_t i = 0; i < n; ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    if (text[i] == '\r') out += "\\r";
    else if (text[i] == '\n') out += "\\n";
    else if (u < 0x20 || u >= 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += text[i];
  }
  out += "'";
  if (text.size() > n) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::vector<std::vector<Port>> parse_scpi_channel_lists(std::string_view text) {
  size_t budget = kScpiMaxChannels;
  return parse_lists(reply_text(text, "channel list"), budget, text);
}

std::vector<Circuit> parse_scpi_connections(std::string_view line) {
  auto lists = parse_scpi_channel_lists(line);
  if (lists.size() != 2) fail(fmt::format("expected two channel lists (ingress, egress), got {}", lists.size()), line);
  if (lists[0].size() != lists[1].size())
    fail(fmt::format("channel lists differ in length ({} ingress, {} egress)", lists[0].size(), lists[1].size()), line);
  std::vector<Circuit> out;
  out.reserve(lists[0].size());
  for (size_t i = 0; i < lists[0].size(); ++i) out.push_back({lists[0][i], lists[1][i]});
  return out;
}

std::vector<double> parse_scpi_power(std::string_view line) {
  std::string_view t = reply_text(line, "power reply");
  if (t.front() == '(') {
    if (t.back() != ')') fail("unbalanced '(' in power reply", line);
    t = trim_space(t.substr(1, t.size() - 2));
    if (t.empty()) return {};
  }
  std::vector<double> out;
  size_t start = 0;
  for (;;) {
    size_t comma = t.find(',', start);
    std::string_view v = trim_space(t.substr(start, comma == t.npos ? t.npos : comma - start));
    if (!v.empty() && v.front() == '+') v.remove_prefix(1);
    double d = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (v.empty() || ec != std::errc() || p != v.data() + v.size() || !std::isfinite(d))
      fail("bad power value '" + std::string(v.substr(0, 20)) + "'", line);
    if (out.size() >= kScpiMaxChannels) fail("too many power values", line);
    out.push_back(d);
    if (comma == t.npos) break;
    start = comma + 1;
  }
  return out;
}

ScpiIdentity parse_scpi_idn(std::string_view line) {
  std::string_view t = reply_text(line, "*IDN? reply");
  std::string whole_unquoted;
  if (t.front() == '"' || t.front() == '\'') {
    whole_unquoted = unquote(t, line);
    t = whole_unquoted;
  }
  std::vector<std::string_view> f;
  size_t start = 0;
  for (;;) {
    size_t comma = t.find(',', start);
    f.push_back(trim_space(t.substr(start, comma == t.npos ? t.npos : comma - start)));
    if (comma == t.npos || f.size() == 4) {
      if (comma != t.npos) f.back() = trim_space(t.substr(start));  // commas inside the version
      break;
    }
    start = comma + 1;
  }
  if (f.size() != 4) fail("*IDN? reply needs vendor,model,serial,version", line);
  if (f[0].empty() || f[1].empty()) fail("*IDN? reply without vendor or model", line);
  return {std::string(f[0]), std::string(f[1]), std::string(f[2]), std::string(f[3])};
}

std::pair<int, int> parse_scpi_size(std::string_view line) {
  std::string_view t = reply_text(line, "size reply");
  size_t comma = t.find(',');
  int n = 0, m = 0;
  if (comma == t.npos || !parse_int(t.substr(0, comma), n) || !parse_int(t.substr(comma + 1), m))
    fail("size reply must be N,M", line);
  if (n < 1 || m < 1 || n > kScpiMaxPort || m > kScpiMaxPort - n) fail("implausible switch size", line);
  return {n, m};
}

ScpiErrorEntry parse_scpi_error(std::string_view line) {
  std::string_view t = reply_text(line, ":SYST:ERR? reply");
  size_t comma = t.find(',');
  ScpiErrorEntry e;
  if (!parse_int(t.substr(0, comma), e.code)) fail(":SYST:ERR? reply must start with an error code", line);
  if (comma == t.npos) return e;
  std::string_view msg = trim_space(t.substr(comma + 1));
  if (!msg.empty() && (msg.front() == '"' || msg.front() == '\'')) {
    e.message = unquote(msg, line);
  } else {
    e.message = std::string(msg);  // some firmware leaves the message unquoted
  }
  return e;
}

void parse_scpi_opc(std::string_view line) {
  std::string_view t = reply_text(line, "*OPC? reply");
  int v = 0;
  if (!parse_int(t, v) || v != 1) fail("*OPC? reply must be 1 (operation complete)", line);
}

std::optional<Port> parse_scpi_port_reply(std::string_view line) {
  std::string_view t = reply_text(line, "port reply");
  if (t.front() == '(') {
    auto lists = parse_scpi_channel_lists(t);
    if (lists.size() != 1 || lists[0].size() > 1) fail("port reply must name one port", line);
    if (lists[0].empty()) return std::nullopt;
    return lists[0][0];
  }
  std::string inner;
  if (t.front() == '"' || t.front() == '\'') {
    inner = unquote(t, line);
    t = trim_space(inner);
  }
  if (t.empty() || t == "0") return std::nullopt;
  return parse_channel(t, line);
}

bool ScpiCommand::is(std::string_view pattern) const {
  std::vector<PatternToken> tokens;
  size_t i = 0;
  if (pattern.starts_with(':')) ++i;
  while (i < pattern.size()) {
    if (pattern[i] == ':') {
      ++i;
      continue;
    }
    bool optional = pattern[i] == '[';
    if (optional) {
      size_t close = pattern.find(']', i);
      std::string_view w = pattern.substr(i + 1, close - i - 1);
      if (w.starts_with(':')) w.remove_prefix(1);
      tokens.push_back({w, true});
      i = close == pattern.npos ? pattern.size() : close + 1;
    } else {
      size_t e = pattern.find_first_of(":[", i);
      tokens.push_back({pattern.substr(i, e == pattern.npos ? pattern.npos : e - i), false});
      i = e == pattern.npos ? pattern.size() : e;
    }
  }
  return match_from(header, 0, tokens, 0);
}

std::vector<ScpiCommand> parse_scpi_command_line(std::string_view line) {
  std::vector<ScpiCommand> out;
  std::vector<std::string> path;
  size_t budget = kScpiMaxChannels;
  for (std::string_view part : split_top_level(line, ';', line)) {
    if (trim_space(part).empty()) continue;  // "*IDN?;" and blank lines are harmless
    out.push_back(parse_command(part, path, budget, line));
  }
  return out;
}

std::string format_scpi_channel_list(const std::vector<Port>& ports) {
  std::string out = "(@";
  for (size_t i = 0; i < ports.size();) {
    size_t j = i;
    while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1) ++j;
    if (i != 0) out += ',';
    if (j - i >= 2) {
      out += fmt::format("{}:{}", ports[i], ports[j]);
      i = j + 1;
    } else {
      out += std::to_string(ports[i]);
      ++i;
    }
  }
  return out + ")";
}

std::string format_scpi_connections(const std::vector<Circuit>& circuits) {
  std::vector<Port> ins, outs;
  for (const auto& c : circuits) {
    ins.push_back(c.ingress);
    outs.push_back(c.egress);
  }
  return format_scpi_channel_list(ins) + "," + format_scpi_channel_list(outs);
}

std::string format_scpi_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void ScpiErrorQueue::push(int code, std::string message) {
  if (entries_.size() >= depth_) {
    if (!entries_.empty()) entries_.back() = {-350, "Queue overflow"};
    return;
  }
  entries_.push_back({code, std::move(message)});
}

std::string ScpiErrorQueue::pop_reply() {
  if (entries_.empty()) return "0,\"No error\"";
  ScpiErrorEntry e = std::move(entries_.front());
  entries_.pop_front();
  return std::to_string(e.code) + "," + format_scpi_string(e.message);
}

}  // namespace ocslab::ocs
