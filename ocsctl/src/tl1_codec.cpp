#include "ocslab/ocsctl/tl1_codec.h"
#include "ocslab/common/text.h"

#include <boost/container/small_vector.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstring>

#include "ocslab/ocsctl/errors.h"
#include "string_reuse.h"

namespace ocslab::ocs {

namespace {

constexpr size_t kQuoteLimit = 200;

constexpr bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Replies are parsed on every switch round trip: tokens live inline, not on the heap.
using Tokens = boost::container::small_vector<std::string_view, 8>;

// Character classes by hand, not <cctype>: TL1 is ASCII, and these run on every reply byte
// (no locale lookup; identical to <cctype> in the "C" locale, the only one ocslab uses).
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
constexpr bool is_control(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

Tokens tokens(std::string_view s) {
  Tokens out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_blank(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_blank(s[j])) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// The words of a line outside a block body (header, response or autonomous line, ack), as
// tokens() splits them, keeping only what that grammar reads: no per-word container work on
// the two lines every reply starts with.
struct LineWords {
  std::string_view first[3];  // the first three words ("" past count)
  std::string_view last[2];   // the last two: last[1] is the final word
  size_t count = 0;
  void add(std::string_view w) {
    if (count < 3) first[count] = w;
    last[0] = last[1];
    last[1] = w;
    ++count;
  }
};

enum class ByteClass : unsigned char { kWord, kBlank, kControl };
constexpr auto kByteClass = [] {
  std::array<ByteClass, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = is_blank(static_cast<char>(c))     ? ByteClass::kBlank
           : is_control(static_cast<char>(c)) ? ByteClass::kControl
                                              : ByteClass::kWord;
  }
  return t;
}();
ByteClass byte_class(char c) { return kByteClass[static_cast<unsigned char>(c)]; }

// Splits s into words and checks it for control bytes in one pass. False: a control byte.
bool split_words(std::string_view s, LineWords& out) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && byte_class(s[i]) == ByteClass::kBlank) ++i;
    size_t start = i;
    while (i < n && byte_class(s[i]) == ByteClass::kWord) ++i;
    if (i < n && byte_class(s[i]) == ByteClass::kControl) return false;
    if (i > start) out.add(s.substr(start, i - start));
  }
  return true;
}

bool has_control(std::string_view s) { return std::any_of(s.begin(), s.end(), is_control); }

bool two_digits(const char* p) { return is_digit(p[0]) && is_digit(p[1]); }

// "NN<sep>NN<sep>NN" starting at s[at] and running to the end of s.
bool three_pairs(std::string_view s, size_t at, char sep) {
  return s.size() == at + 8 && two_digits(&s[at]) && s[at + 2] == sep && two_digits(&s[at + 3]) &&
         s[at + 5] == sep && two_digits(&s[at + 6]);
}

// The header's date "YY-MM-DD" (a 4-digit year tolerated) and time "HH:MM:SS": fixed shapes,
// checked position by position (every reply has one).
bool is_tl1_date(std::string_view s) {
  if (s.size() == 10) return two_digits(&s[0]) && three_pairs(s, 2, '-');  // YYYY-MM-DD
  return three_pairs(s, 0, '-');
}
bool is_tl1_time(std::string_view s) { return three_pairs(s, 0, ':'); }

bool is_autonomous_code(std::string_view t) { return t == "A" || t == "*C" || t == "**" || t == "*"; }

bool is_ack(const LineWords& w) {
  if (w.count == 0 || w.count > 2) return false;
  static constexpr std::string_view kAcks[] = {"IP", "PF", "OK", "NA", "NG", "RL"};
  return std::find(std::begin(kAcks), std::end(kAcks), w.first[0]) != std::end(kAcks);
}

// assign_reusing for fields that usually repeat from reply to reply (sid, date): a compare
// is cheaper than a copy.
void assign_if_changed(std::string& out, std::string_view s) {
  if (std::string_view(out) != s) assign_reusing(out, s);
}

// unquote_into for a word (no blanks or line ends around it, so nothing to trim).
void unquote_word_into(std::string_view s, std::string& out) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') {
    assign_if_changed(out, s);
    return;
  }
  out.clear();
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == '\\' && i + 2 < s.size()) ++i;
    out += s[i];
  }
}

// Into an existing string so that a reused Tl1Block field keeps its capacity.
void unquote_into(std::string_view s, std::string& out) { unquote_word_into(trim_space(s), out); }

std::string unquote(std::string_view s) {
  std::string out;
  unquote_into(s, out);
  return out;
}

// Writes n ports (port_at(0..n-1)) at out as parse_tl1_port_list reads them back: items
// joined by '&', ascending runs of three or more as "a&&b". Straight into a buffer with room
// for max_tl1_port_list_size(n) bytes, not through std::string appends (every patch request
// is built this way). Returns the end of the text.
template <class PortAt>
char* write_port_runs(char* out, size_t n, PortAt port_at) {
  auto number = [&](Port v) { out = std::to_chars(out, out + 11, v).ptr; };  // 11: "-2147483648"
  // One port, as most requests (connect or disconnect one circuit) name: no run search.
  if (n == 1) {
    number(port_at(0));
    return out;
  }
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j + 1 < n && static_cast<long long>(port_at(j + 1)) == static_cast<long long>(port_at(j)) + 1) ++j;
    if (i > 0) *out++ = '&';
    number(port_at(i));
    if (j - i >= 2) {
      *out++ = '&';
      *out++ = '&';
      number(port_at(j));
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out;
}

// Appends what write(char*) writes in at most max bytes.
template <class Write>
void append_written(std::string& out, size_t max, Write write) {
  const size_t at = out.size();
  out.resize(at + max);
  out.resize(static_cast<size_t>(write(out.data() + at) - out.data()));
}

// The sid of a header line: every word before date and time, joined by single spaces, then
// unquoted.
void sid_into(std::string_view line, const LineWords& w, std::string& out) {
  const size_t words = w.count - 2;
  if (words <= 1) {
    unquote_word_into(words == 1 ? w.first[0] : std::string_view{}, out);
    return;
  }
  std::string sid;
  for (auto word : tokens(line.substr(0, static_cast<size_t>(w.last[0].data() - line.data())))) {
    if (!sid.empty()) sid += ' ';
    sid += word;
  }
  unquote_into(sid, out);
}

[[noreturn]] void bad_line(std::string_view what, std::string_view line) {
  throw ProtocolError(fmt::format("{}: \"{}\"", what, tl1_quote_line(line)));
}

int parse_int(std::string_view s, std::string_view context) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    throw ProtocolError(fmt::format("bad port '{}' in TL1 port list '{}'", tl1_quote_line(s), tl1_quote_line(context)));
  }
  return v;
}

// Splits at sep outside double quotes (a quoted ctag or password may hold ':' or ',').
std::vector<std::string_view> split_outside_quotes(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && quoted) {
      ++i;
    } else if (s[i] == '"') {
      quoted = !quoted;
    } else if (s[i] == sep && !quoted) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

}  // namespace

std::string tl1_quote_line(std::string_view line) {
  std::string out;
  for (char c : line) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
    if (out.size() >= kQuoteLimit) {
      out += "...";
      break;
    }
  }
  return out;
}

void Tl1ReplyParser::feed(std::string_view bytes) {
  prepare_feed();
  buf_.append(bytes);
}

void Tl1ReplyParser::skip_idle_filler() {
  while (pos_ < buf_.size() && (buf_[pos_] == '\r' || buf_[pos_] == '\n' || buf_[pos_] == '<' || buf_[pos_] == '>')) ++pos_;
}

void Tl1ReplyParser::prepare_feed() {
  // A block handed out no longer needs its lines; one in progress keeps them in buf_. The
  // line end and prompt after the last ';' carry nothing: skipped now, the buffer is empty
  // again and the next reply lands at its front, in the same warm cache lines.
  if (state_ == State::kIdle) {
    lines_.clear();
    skip_idle_filler();
  }
  // Everything consumed (the usual case between replies): start over at the front, so the
  // buffer stays small and warm in cache.
  if (pos_ == buf_.size() && lines_.empty()) {
    buf_.clear();
    pos_ = scanned_ = 0;
  }
  // Reclaim consumed space now and then so a long session does not grow the buffer.
  const size_t keep = lines_.empty() ? pos_ : lines_.front().first;
  if (keep > 65536 && keep * 2 > buf_.size()) {
    buf_.erase(0, keep);
    scanned_ -= keep;
    pos_ -= keep;
    for (auto& line : lines_) line.first -= keep;
  }
}

void Tl1ReplyParser::reset() {
  buf_.clear();
  pos_ = scanned_ = 0;
  state_ = State::kIdle;
  block_ = {};
  block_bytes_ = 0;
  lines_.clear();
  text_built_ = false;
  template_valid_ = false;
}

std::optional<std::string_view> Tl1ReplyParser::take_line() {
  size_t from = std::max(scanned_, pos_);
  size_t nl = buf_.find('\n', from);
  if (nl == std::string::npos) {
    scanned_ = buf_.size();
    if (pending() > kMaxPending) {
      throw ProtocolError(fmt::format("TL1 reply exceeds {} bytes without a terminator; it starts \"{}\"",
                                      kMaxPending, tl1_quote_line(std::string_view(buf_).substr(pos_, 80))));
    }
    return std::nullopt;
  }
  std::string_view line = std::string_view(buf_).substr(pos_, nl - pos_);
  pos_ = nl + 1;
  scanned_ = pos_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

void Tl1ReplyParser::begin_block(bool header) {
  // Field by field rather than `block_ = {}`: the strings keep their capacity, so steady
  // traffic parses without allocating. A header sets sid, date and time, and the response or
  // autonomous line that every block has sets code, tag and status: they are compared rather
  // than cleared, as they often repeat from block to block.
  block_.kind = Tl1Block::Kind::kResponse;
  if (!header) {
    block_.sid.clear();
    block_.date.clear();
    block_.time.clear();
  }
  block_.data.clear();
  block_.error_code.clear();
  block_.comment.clear();
  block_.text.clear();
  block_bytes_ = 0;
  lines_.clear();
  text_built_ = false;
  template_valid_ = false;  // sid, date and time may change now
}

void Tl1ReplyParser::add_raw(std::string_view line) {
  add_raw(static_cast<size_t>(line.data() - buf_.data()), line.size());
}

void Tl1ReplyParser::add_raw(size_t at, size_t size) {
  lines_.emplace_back(at, size);
  block_bytes_ += size + 1;
  if (block_bytes_ > kMaxPending) {
    throw ProtocolError(fmt::format("TL1 reply exceeds {} bytes without a terminator", kMaxPending));
  }
}

const std::string& Tl1ReplyParser::block_text() {
  if (!text_built_) {
    block_.text.clear();
    for (auto [at, size] : lines_) {
      if (!block_.text.empty()) block_.text += '\n';
      block_.text.append(buf_, at, size);
    }
    text_built_ = true;
  }
  return block_.text;
}

void Tl1ReplyParser::body_line(std::string_view raw) {
  std::string_view line = trim_space(raw);
  if (line.empty()) return;
  if (has_control(line)) bad_line("unexpected bytes in TL1 reply", raw);
  while (!line.empty()) {
    if (state_ == State::kComment) {
      size_t end = line.find("*/");
      std::string_view part = trim_space(line.substr(0, end));
      if (!part.empty()) block_.comment += (block_.comment.empty() ? "" : " ") + std::string(part);
      if (end == std::string_view::npos) return;
      state_ = State::kBody;
      line = trim_space(line.substr(end + 2));
      continue;
    }
    if (line.substr(0, 2) == "/*") {
      if (!block_.comment.empty()) block_.comment += "; ";
      state_ = State::kComment;
      line = line.substr(2);
      continue;
    }
    if (line.front() == '"') {
      std::string value;
      size_t i = 1;
      bool closed = false;
      for (; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          value += line[++i];
        } else if (line[i] == '"') {
          closed = true;
          break;
        } else {
          value += line[i];
        }
      }
      if (!closed) bad_line("unterminated quoted line in TL1 reply", raw);
      block_.data.push_back(std::move(value));
      line = trim_space(line.substr(i + 1));
      // Payload lines may be separated by commas or followed by a comment.
      if (!line.empty() && line.front() == ',') line = trim_space(line.substr(1));
      continue;
    }
    // An unquoted item (error code or GR-831 unquoted line) runs up to a comment, if any.
    size_t comment_at = line.find("/*");
    std::string_view item = trim_space(line.substr(0, comment_at));
    line = comment_at == std::string_view::npos ? std::string_view{} : line.substr(comment_at);
    auto t = tokens(item);
    bool code_like = t.size() == 1 && t[0].size() == 4 &&
                     std::all_of(t[0].begin(), t[0].end(), [](char c) { return is_upper(c) || is_digit(c); });
    if (code_like && block_.error_code.empty() && block_.kind == Tl1Block::Kind::kResponse &&
        block_.status != "COMPLD" && block_.status != "RTRV") {
      block_.error_code = std::string(t[0]);
    } else {
      // GR-831 allows unquoted lines in the text block.
      block_.data.emplace_back(item);
    }
  }
}

// A header in the shape switches send, "SID YY-MM-DD HH:MM:SS" with a one-word SID or none,
// recognised from its fixed-width end without splitting the line into words (every reply
// starts with one). It yields what the general path in header_line would; anything else
// (false) is left to that path. `line` is trimmed. Pointer arithmetic, not string_view
// calls: GCC leaves substr() out of line, and this runs on every reply.
bool Tl1ReplyParser::match_plain_header(std::string_view line, PlainHeader& out) {
  const size_t n = line.size();
  if (n < 17) return false;
  const char* const b = line.data();
  const char* const time = b + n - 8;
  if (!is_blank(time[-1]) || !(two_digits(time) && time[2] == ':' && two_digits(time + 3) && time[5] == ':' &&
                               two_digits(time + 6))) {
    return false;
  }
  const char* date_end = time - 1;
  while (date_end > b && is_blank(date_end[-1])) --date_end;
  const char* date = date_end;
  while (date > b && !is_blank(date[-1])) --date;
  const std::string_view date_text(date, static_cast<size_t>(date_end - date));
  if (!is_tl1_date(date_text)) return false;
  const char* sid_end = date;  // line is trimmed: the SID starts at b
  while (sid_end > b && is_blank(sid_end[-1])) --sid_end;
  for (const char* c = b; c != sid_end; ++c) {
    if (byte_class(*c) != ByteClass::kWord) return false;  // several words, or a control byte
  }
  out.sid = std::string_view(b, static_cast<size_t>(sid_end - b));
  out.date = date_text;
  out.time = std::string_view(time, 8);
  return true;
}

// The response line after a header, "M <ctag> <status>" with blanks between (the general path
// in header_line gives the same fields). False: any other shape, left to that path.
bool Tl1ReplyParser::match_plain_response(std::string_view line, PlainResponse& out) {
  const size_t n = line.size();
  if (n < 5 || line[0] != 'M' || !is_blank(line[1])) return false;
  const char* p = line.data() + 2;
  const char* const e = line.data() + n;
  std::string_view words[2];
  for (auto& word : words) {
    while (p != e && is_blank(*p)) ++p;
    const char* start = p;
    while (p != e && byte_class(*p) == ByteClass::kWord) ++p;
    if (p == start) return false;
    word = std::string_view(start, static_cast<size_t>(p - start));
  }
  if (p != e) return false;  // a fourth word or a control byte (line is trimmed)
  out.ctag = words[0];
  out.status = words[1];
  return true;
}

void Tl1ReplyParser::plain_header(std::string_view raw, const PlainHeader& h) {
  begin_block(true);
  add_raw(raw);
  unquote_word_into(h.sid, block_.sid);
  assign_if_changed(block_.date, h.date);
  assign_reusing(block_.time, h.time);
  state_ = State::kHeader;
}

void Tl1ReplyParser::plain_response(std::string_view raw, const PlainResponse& r) {
  add_raw(raw);
  block_.kind = Tl1Block::Kind::kResponse;
  assign_if_changed(block_.code, "M");
  unquote_word_into(r.ctag, block_.tag);
  upper_into(r.status, block_.status);
  state_ = State::kBody;
}

// The reply a switch sends to almost every request, a plain header line, a plain response
// line and the terminator, parsed in one pass when all of it is in the buffer: no line-by-line
// state machine, and the same matchers and field setters as that path, so the block is the
// one it would give. nullptr (nothing consumed): any other shape, or not all received yet.
Tl1Block* Tl1ReplyParser::simple_block() {
  if (Tl1Block* block = repeated_block()) return block;
  const char* const begin = buf_.data() + pos_;
  const char* const end = buf_.data() + buf_.size();
  const auto* nl1 = static_cast<const char*>(std::memchr(begin, '\n', static_cast<size_t>(end - begin)));
  if (!nl1) return nullptr;
  const auto* nl2 = static_cast<const char*>(std::memchr(nl1 + 1, '\n', static_cast<size_t>(end - nl1 - 1)));
  if (!nl2) return nullptr;
  const char* semi = nl2 + 1;
  while (semi != end && is_blank(*semi)) ++semi;
  if (semi == end || *semi != ';') return nullptr;
  // The lines as take_line() gives them (one CR before the LF dropped), then trimmed.
  auto raw_line = [](const char* from, const char* nl) {
    return std::string_view(from, static_cast<size_t>(nl - from - (nl != from && nl[-1] == '\r')));
  };
  const std::string_view raw1 = raw_line(begin, nl1), raw2 = raw_line(nl1 + 1, nl2);
  PlainHeader h;
  PlainResponse r;
  if (!match_plain_header(trim_space(raw1), h) || !match_plain_response(trim_space(raw2), r)) return nullptr;
  plain_header(raw1, h);
  plain_response(raw2, r);
  const auto at = static_cast<size_t>(semi - buf_.data());
  add_raw(at, 1);
  Template& t = template_;
  assign_reusing(t.bytes, std::string_view(begin, static_cast<size_t>(semi + 1 - begin)));
  t.ctag_at = static_cast<size_t>(r.ctag.data() - begin);
  t.ctag_size = r.ctag.size();
  t.header_size = raw1.size();
  t.response_at = static_cast<size_t>(raw2.data() - begin);
  t.response_size = raw2.size();
  t.semicolon_at = static_cast<size_t>(semi - begin);
  template_valid_ = true;
  pos_ = at + 1;
  scanned_ = std::max(scanned_, pos_);
  state_ = State::kIdle;
  block_bytes_ = 0;  // handed out: no longer pending
  return &block_;
}

// The template's bytes with another ctag (a run of word bytes, as match_plain_response reads
// one) in the same place: simple_block() would parse that to block_ as it stands but for the
// tag, with lines at the same offsets, those after the ctag moved by its change in length.
Tl1Block* Tl1ReplyParser::repeated_block() {
  if (!template_valid_) return nullptr;
  const Template& t = template_;
  const std::string_view rest = std::string_view(buf_).substr(pos_);
  if (rest.size() < t.ctag_at || std::memcmp(rest.data(), t.bytes.data(), t.ctag_at) != 0) return nullptr;
  size_t ctag_end = t.ctag_at;
  while (ctag_end < rest.size() && byte_class(rest[ctag_end]) == ByteClass::kWord) ++ctag_end;
  const size_t after = t.ctag_at + t.ctag_size;  // the template's bytes after its ctag...
  const size_t tail = t.bytes.size() - after;
  if (ctag_end == t.ctag_at || rest.size() - ctag_end < tail ||
      std::memcmp(rest.data() + ctag_end, t.bytes.data() + after, tail) != 0) {
    return nullptr;
  }
  // ...are at ctag_end in rest: an offset x >= after in the template is x - after + ctag_end here.
  const size_t response_end = t.response_at + t.response_size - after + ctag_end;
  const size_t semicolon = pos_ + t.semicolon_at - after + ctag_end;
  begin_block(true);  // clears what a block without a body leaves empty; sid, date, time stay
  // The block's three lines for block_text(), as add_raw() records them; the template's size
  // is far below kMaxPending, so its check is not needed here.
  lines_.emplace_back(pos_, t.header_size);
  lines_.emplace_back(pos_ + t.response_at, response_end - t.response_at);
  lines_.emplace_back(semicolon, 1);
  unquote_word_into(rest.substr(t.ctag_at, ctag_end - t.ctag_at), block_.tag);
  template_valid_ = true;  // code and status are still the template's too
  pos_ = semicolon + 1;
  scanned_ = std::max(scanned_, pos_);
  block_bytes_ = 0;  // handed out: no longer pending
  return &block_;
}

// A line outside a block body: an acknowledgment, a header (sid date time) or the response /
// autonomous line that opens the body. `line` is `raw` trimmed, not empty.
void Tl1ReplyParser::header_line(std::string_view raw, std::string_view line) {
  if (state_ == State::kIdle) {
    PlainHeader h;
    if (match_plain_header(line, h)) return plain_header(raw, h);
  } else if (PlainResponse r; match_plain_response(line, r)) {  // kHeader
    return plain_response(raw, r);
  }
  LineWords w;
  if (!split_words(line, w)) bad_line("unexpected bytes from TL1 switch", raw);
  if (state_ == State::kIdle && is_ack(w)) return;
  if (state_ == State::kIdle && w.count >= 2 && is_tl1_date(w.last[0]) && is_tl1_time(w.last[1])) {
    begin_block(true);
    add_raw(raw);
    sid_into(line, w, block_.sid);
    assign_reusing(block_.date, w.last[0]);
    assign_reusing(block_.time, w.last[1]);
    state_ = State::kHeader;
    return;
  }
  bool response = w.count >= 3 && w.first[0] == "M";
  bool autonomous = w.count >= 3 && is_autonomous_code(w.first[0]);
  if (!response && !autonomous) {
    bad_line(state_ == State::kHeader ? "TL1 header not followed by a response or autonomous line"
                                      : "unexpected line from TL1 switch",
             raw);
  }
  if (state_ == State::kIdle) begin_block(false);
  add_raw(raw);
  block_.kind = response ? Tl1Block::Kind::kResponse : Tl1Block::Kind::kAutonomous;
  assign_if_changed(block_.code, w.first[0]);
  unquote_word_into(w.first[1], block_.tag);
  if (response) {
    if (w.count != 3) bad_line("malformed TL1 response line", raw);
    upper_into(w.first[2], block_.status);
  } else {
    assign_reusing(block_.status, trim_space(line.substr(static_cast<size_t>(w.first[2].data() - line.data()))));
  }
  state_ = State::kBody;
}

std::optional<Tl1Block> Tl1ReplyParser::next() {
  if (Tl1Block* block = next_block()) {
    template_valid_ = false;  // the fields are moved out
    return std::move(*block);
  }
  return std::nullopt;
}

Tl1Block* Tl1ReplyParser::next_block(bool with_text) {
  for (;;) {
    if (state_ == State::kIdle) {
      // Prompts and line ends between blocks carry nothing.
      skip_idle_filler();
      if (Tl1Block* block = simple_block()) {
        if (with_text) block_text();
        return block;
      }
    } else if (state_ == State::kBody) {
      // ';' ends a block even without a line end after it (a prompt may follow directly).
      size_t i = pos_;
      while (i < buf_.size() && is_blank(buf_[i])) ++i;
      if (i < buf_.size() && buf_[i] == ';') {
        pos_ = i + 1;
        scanned_ = std::max(scanned_, pos_);
        add_raw(i, 1);
        state_ = State::kIdle;
        block_bytes_ = 0;  // handed out: no longer pending; the next block clears block_
        if (with_text) block_text();
        return &block_;
      }
    }
    auto maybe = take_line();
    if (!maybe) return nullptr;
    std::string_view raw = *maybe;
    switch (state_) {
      case State::kIdle:
      case State::kHeader: {
        std::string_view line = trim_space(raw);
        if (!line.empty()) header_line(raw, line);
        break;
      }
      case State::kBody:
      case State::kComment:
        add_raw(raw);
        body_line(raw);
        break;
    }
  }
}

Tl1Command parse_tl1_command(std::string_view text) {
  std::string_view s = trim_space(text);
  if (!s.empty() && s.back() == ';') s = trim_space(s.substr(0, s.size() - 1));
  auto fail = [&](const std::string& why) -> ProtocolError {
    return ProtocolError(fmt::format("bad TL1 command \"{}\": {}", tl1_quote_line(trim_space(text)), why));
  };
  if (s.empty()) throw fail("empty command");
  if (has_control(s)) throw fail("control characters");
  auto fields = split_outside_quotes(s, ':');
  Tl1Command cmd;
  std::string_view verb = trim_space(fields[0]);
  if (verb.empty()) throw fail("missing verb");
  bool prev_dash = true;
  for (char c : verb) {
    if (c == '-') {
      if (prev_dash) throw fail("malformed verb");
      prev_dash = true;
    } else if (std::isalnum(static_cast<unsigned char>(c))) {
      prev_dash = false;
    } else {
      throw fail("malformed verb");
    }
  }
  if (prev_dash) throw fail("malformed verb");
  cmd.verb = upper(verb);
  if (fields.size() < 4) throw fail("missing CTAG (want VERB:[TID]:[AID]:CTAG)");
  cmd.tid = unquote(fields[1]);
  cmd.aid = std::string(trim_space(fields[2]));
  std::string_view ctag = trim_space(fields[3]);
  if (ctag.empty()) throw fail("missing CTAG");
  if (ctag.front() == '"') {
    if (ctag.size() < 2 || ctag.back() != '"') throw fail("unterminated quoted CTAG");
    cmd.ctag = unquote(ctag);
    if (cmd.ctag.empty()) throw fail("empty CTAG");
  } else {
    for (char c : ctag) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') throw fail("malformed CTAG");
    }
    cmd.ctag = std::string(ctag);
  }
  if (fields.size() > 4) cmd.gb = std::string(trim_space(fields[4]));
  for (size_t f = 5; f < fields.size(); ++f) {
    if (trim_space(fields[f]).empty()) continue;
    for (auto item : split_outside_quotes(fields[f], ',')) {
      item = trim_space(item);
      if (item.empty()) continue;
      size_t eq = item.find('=');
      if (eq != std::string_view::npos && item.front() != '"') {
        std::string key = upper(trim_space(item.substr(0, eq)));
        if (key.empty()) throw fail("parameter without a name");
        cmd.params[key] = unquote(item.substr(eq + 1));
      } else {
        cmd.positional.push_back(unquote(item));
      }
    }
  }
  return cmd;
}

std::vector<Port> parse_tl1_port_list(std::string_view text, int port_count) {
  std::string_view s = trim_space(text);
  std::vector<Port> out;
  if (s.empty() || upper(s) == "ALL") {
    for (Port p = 1; p <= port_count; ++p) out.push_back(p);
    return out;
  }
  auto check = [&](int p) {
    if (p < 1 || p > port_count) {
      throw ProtocolError(fmt::format("port {} in TL1 port list '{}' is outside 1..{}", p, tl1_quote_line(s), port_count));
    }
  };
  size_t i = 0;
  while (i <= s.size()) {
    size_t amp = s.find('&', i);
    std::string_view item = s.substr(i, amp == std::string_view::npos ? std::string_view::npos : amp - i);
    int a = parse_int(trim_space(item), s);
    check(a);
    if (amp != std::string_view::npos && amp + 1 < s.size() && s[amp + 1] == '&') {
      size_t end = s.find('&', amp + 2);
      int b = parse_int(trim_space(s.substr(amp + 2, end == std::string_view::npos ? std::string_view::npos : end - amp - 2)), s);
      check(b);
      if (b < a) throw ProtocolError(fmt::format("TL1 port range {}&&{} runs backwards", a, b));
      for (int p = a; p <= b; ++p) out.push_back(p);
      if (end == std::string_view::npos) break;
      i = end + 1;
    } else {
      out.push_back(a);
      if (amp == std::string_view::npos) break;
      i = amp + 1;
    }
    if (i >= s.size()) throw ProtocolError(fmt::format("TL1 port list '{}' ends with '&'", tl1_quote_line(s)));
  }
  return out;
}

char* write_tl1_port_list(char* out, const std::vector<Port>& ports) {
  return write_port_runs(out, ports.size(), [&](size_t k) { return ports[k]; });
}

void append_tl1_port_list(std::string& out, const std::vector<Port>& ports) {
  append_written(out, max_tl1_port_list_size(ports.size()), [&](char* p) { return write_tl1_port_list(p, ports); });
}

std::string format_tl1_port_list(const std::vector<Port>& ports) {
  std::string out;
  append_tl1_port_list(out, ports);
  return out;
}

std::vector<Circuit> parse_tl1_patch_aid(std::string_view aid, int port_count) {
  std::string_view s = trim_space(aid);
  size_t comma = s.find(',');
  if (comma == std::string_view::npos || s.find(',', comma + 1) != std::string_view::npos) {
    throw ProtocolError(fmt::format("bad TL1 patch AID '{}': want <ingress-list>,<egress-list>", tl1_quote_line(s)));
  }
  std::string_view in_text = trim_space(s.substr(0, comma)), out_text = trim_space(s.substr(comma + 1));
  if (in_text.empty() || out_text.empty() || upper(in_text) == "ALL" || upper(out_text) == "ALL") {
    throw ProtocolError(fmt::format("bad TL1 patch AID '{}': both port lists must name ports", tl1_quote_line(s)));
  }
  auto ins = parse_tl1_port_list(in_text, port_count);
  auto outs = parse_tl1_port_list(out_text, port_count);
  if (ins.size() != outs.size()) {
    throw ProtocolError(fmt::format("bad TL1 patch AID '{}': {} ingress ports but {} egress ports", tl1_quote_line(s),
                                    ins.size(), outs.size()));
  }
  std::vector<Circuit> out;
  for (size_t k = 0; k < ins.size(); ++k) out.push_back({ins[k], outs[k]});
  return out;
}

char* write_tl1_patch_aid(char* out, const std::vector<Circuit>& circuits) {
  out = write_port_runs(out, circuits.size(), [&](size_t k) { return circuits[k].ingress; });
  *out++ = ',';
  return write_port_runs(out, circuits.size(), [&](size_t k) { return circuits[k].egress; });
}

void append_tl1_patch_aid(std::string& out, const std::vector<Circuit>& circuits) {
  append_written(out, max_tl1_patch_aid_size(circuits.size()),
                 [&](char* p) { return write_tl1_patch_aid(p, circuits); });
}

std::string format_tl1_patch_aid(const std::vector<Circuit>& circuits) {
  std::string out;
  append_tl1_patch_aid(out, circuits);
  return out;
}

std::string tl1_quote_data(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string format_tl1_response_body(std::string_view ctag, bool ok, const std::vector<std::string>& data,
                                     std::string_view code, std::string_view comment, std::string_view eol) {
  std::string out = fmt::format("M  {} {}{}", ctag, ok ? "COMPLD" : "DENY", eol);
  if (ok) {
    for (const auto& d : data) fmt::format_to(std::back_inserter(out), "   {}{}", tl1_quote_data(d), eol);
  } else {
    fmt::format_to(std::back_inserter(out), "   {}{}   /* {} */{}", code, eol, comment, eol);
  }
  return out;
}

}  // namespace ocslab::ocs
