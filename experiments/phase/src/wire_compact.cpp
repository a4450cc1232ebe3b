#include "wire_compact.h"

#include <nlohmann/json.hpp>

#include <charconv>

namespace ocslab::phase::wire {

namespace {

// A string byte the subset (and nlohmann's dump) writes as it is: printable ASCII but '"' and '\'.
bool plain_byte(char c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'; }

}  // namespace

// ---- reading ----

bool CompactDoc::parse(std::string_view line) {
  text_ = line;
  pos_ = 0;
  nfields_ = 0;
  items_.clear();
  if (!at('{')) return false;
  ++pos_;
  if (at('}')) return ++pos_ == text_.size();
  for (;;) {
    if (!field()) return false;
    if (at('}')) return ++pos_ == text_.size();
    if (!at(',')) return false;
    ++pos_;
  }
}

bool CompactDoc::field() {
  if (nfields_ == kMaxFields) return false;
  CompactField f;
  if (!string(f.key) || !at(':')) return false;
  ++pos_;
  if (find(f.key)) return false;  // a repeated key: the full path decides which one counts
  bool ok = at('[') ? list(f) : at('{') ? object(f) : scalar(f.value);
  if (ok) fields_[nfields_++] = f;
  return ok;
}

bool CompactDoc::scalar(CompactScalar& out) {
  if (at('"')) {
    out.kind = CompactScalar::kString;
    return string(out.text);
  }
  for (std::string_view word : {"true", "false"}) {
    if (text_.substr(pos_, word.size()) == word) {
      out.kind = CompactScalar::kBool;
      out.number = word.size() == 4;
      pos_ += word.size();
      return true;
    }
  }
  out.kind = CompactScalar::kInt;
  return integer(out.number);
}

bool CompactDoc::string(std::string_view& out) {
  if (!at('"')) return false;
  const size_t start = ++pos_;
  while (pos_ < text_.size() && plain_byte(text_[pos_])) ++pos_;
  if (!at('"')) return false;  // an escape, a control or non-ASCII byte, or the end of the line
  out = text_.substr(start, pos_ - start);
  ++pos_;
  return true;
}

// JSON's integer grammar (no leading zeros), at most 18 digits, and nothing of a fraction or
// an exponent after it: anything else is left to the full path.
bool CompactDoc::integer(int64_t& out) {
  const size_t start = pos_;
  if (at('-')) ++pos_;
  const size_t digits = pos_;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
  const size_t n = pos_ - digits;
  if (n == 0 || n > 18 || (n > 1 && text_[digits] == '0')) return false;
  if (!(at(',') || at('}') || at(']'))) return false;
  std::from_chars(text_.data() + start, text_.data() + pos_, out);
  return true;
}

bool CompactDoc::list(CompactField& f) {
  f.kind = CompactField::kList;
  f.first = static_cast<uint32_t>(items_.size());
  ++pos_;
  if (at(']')) {
    ++pos_;
    return true;
  }
  for (;;) {
    CompactScalar s;
    if (!scalar(s)) return false;
    items_.push_back(s);
    ++f.count;
    if (at(']')) {
      ++pos_;
      return true;
    }
    if (!at(',')) return false;
    ++pos_;
  }
}

bool CompactDoc::object(CompactField& f) {
  f.kind = CompactField::kObject;
  f.first = static_cast<uint32_t>(items_.size());
  ++pos_;
  if (at('}')) {
    ++pos_;
    return true;
  }
  for (;;) {
    CompactScalar k, v;
    k.kind = CompactScalar::kString;
    if (!string(k.text) || !at(':')) return false;
    ++pos_;
    for (uint32_t i = 0; i < f.count; ++i) {
      if (items_[f.first + 2 * i].text == k.text) return false;  // repeated key
    }
    if (!scalar(v)) return false;
    items_.push_back(k);
    items_.push_back(v);
    ++f.count;
    if (at('}')) {
      ++pos_;
      return true;
    }
    if (!at(',')) return false;
    ++pos_;
  }
}

const CompactField* CompactDoc::find(std::string_view key) const {
  for (size_t i = 0; i < nfields_; ++i) {
    if (fields_[i].key == key) return &fields_[i];
  }
  return nullptr;
}

const CompactScalar& CompactReader::scalar(const char* key, CompactScalar::Kind kind) const {
  auto f = d_.find(key);
  if (!f || f->kind != CompactField::kScalar || f->value.kind != kind) throw NotCompact{};
  return f->value;
}

const CompactField& CompactReader::collection(const char* key, CompactField::Kind kind) const {
  auto f = d_.find(key);
  if (!f || f->kind != kind) throw NotCompact{};
  return *f;
}

std::string CompactReader::str(const char* key, bool required) const {
  if (!required && !d_.find(key)) return {};
  const auto& v = scalar(key, CompactScalar::kString);
  if (required && v.text.empty()) throw NotCompact{};
  return std::string(v.text);
}

int64_t CompactReader::integer(const char* key, int64_t lo, int64_t hi, bool required, int64_t dflt) const {
  if (!required && !d_.find(key)) return dflt;
  const auto x = scalar(key, CompactScalar::kInt).number;
  if (x < lo || x > hi) throw NotCompact{};
  return x;
}

bool CompactReader::boolean(const char* key) const {
  if (!d_.find(key)) return false;
  return scalar(key, CompactScalar::kBool).number != 0;
}

std::vector<int> CompactReader::ints(const char* key) const {
  const auto& f = collection(key, CompactField::kList);
  std::vector<int> out;
  out.reserve(f.count);
  for (uint32_t i = 0; i < f.count; ++i) {
    const auto& x = d_.item(f.first + i);
    if (x.kind != CompactScalar::kInt || x.number < 0 || x.number > (1 << 20)) throw NotCompact{};
    out.push_back(static_cast<int>(x.number));
  }
  return out;
}

std::vector<std::string> CompactReader::strings(const char* key) const {
  if (!d_.find(key)) return {};
  const auto& f = collection(key, CompactField::kList);
  std::vector<std::string> out;
  for (uint32_t i = 0; i < f.count; ++i) {
    const auto& x = d_.item(f.first + i);
    if (x.kind != CompactScalar::kString) throw NotCompact{};
    out.emplace_back(x.text);
  }
  return out;
}

std::map<std::string, std::string> CompactReader::string_map(const char* key) const {
  if (!d_.find(key)) return {};
  const auto& f = collection(key, CompactField::kObject);
  std::map<std::string, std::string> out;
  for (uint32_t i = 0; i < f.count; ++i) {
    const auto& v = d_.item(f.first + 2 * i + 1);
    if (v.kind != CompactScalar::kString) throw NotCompact{};
    out.emplace(d_.item(f.first + 2 * i).text, v.text);
  }
  return out;
}

// ---- writing ----

void CompactWriter::key(std::string_view k) {
  out_ += out_.empty() ? '{' : ',';
  quoted(k);
  out_ += ':';
}

void CompactWriter::quoted(std::string_view s) {
  for (char c : s) {
    if (!plain_byte(c)) {  // escapes, control bytes, UTF-8 (U+FFFD for invalid): nlohmann's own
      out_ += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
    }
  }
  out_ += '"';
  out_ += s;
  out_ += '"';
}

void CompactWriter::str(std::string_view k, std::string_view v) {
  key(k);
  quoted(v);
}

void CompactWriter::integer(std::string_view k, int64_t v) {
  key(k);
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, r.ptr);
}

void CompactWriter::boolean(std::string_view k, bool v) {
  key(k);
  out_ += v ? "true" : "false";
}

void CompactWriter::ints(std::string_view k, const std::vector<int>& v) {
  key(k);
  out_ += '[';
  char buf[16];
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out_ += ',';
    auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
    out_.append(buf, r.ptr);
  }
  out_ += ']';
}

void CompactWriter::strings(std::string_view k, const std::vector<std::string>& v) {
  key(k);
  out_ += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out_ += ',';
    quoted(v[i]);
  }
  out_ += ']';
}

void CompactWriter::string_map(std::string_view k, const std::map<std::string, std::string>& v) {
  key(k);
  out_ += '{';
  bool first = true;
  for (const auto& [name, value] : v) {
    if (!first) out_ += ',';
    first = false;
    quoted(name);
    out_ += ':';
    quoted(value);
  }
  out_ += '}';
}

std::string CompactWriter::done() && {
  out_ += '}';
  return std::move(out_);
}

}  // namespace ocslab::phase::wire
