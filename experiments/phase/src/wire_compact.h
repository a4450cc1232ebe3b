// The protocol's quick path (protocol.cpp): a reader for the compact JSON lines the shim and the
// controller write, and a writer that produces exactly what nlohmann::json's dump() does for a
// message, without building a JSON document for every line.
//
// CompactDoc accepts a strict subset of JSON: one object, no whitespace, keys once each,
// strings of printable ASCII without escapes, integers of at most 18 digits, true/false, and
// one level of lists or objects of those. Whatever lies outside that subset, and whatever the
// message checks refuse, makes the caller take the full nlohmann path instead, which decodes it
// or names the offending field exactly as before; the quick path never refuses anything itself.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::phase::wire {

// Thrown by CompactReader where the line is outside the subset or a check fails: take the full path.
struct NotCompact {};

struct CompactScalar {
  enum Kind : uint8_t { kString, kInt, kBool };
  Kind kind = kString;
  std::string_view text;  // kString
  int64_t number = 0;     // kInt; kBool: 0 or 1
};

struct CompactField {
  enum Kind : uint8_t { kScalar, kList, kObject };
  std::string_view key;
  Kind kind = kScalar;
  CompactScalar value;  // kScalar
  uint32_t first = 0;   // kList, kObject: its items in CompactDoc::items (objects: key, value pairs)
  uint32_t count = 0;
};

class CompactDoc {
 public:
  // False when the line is outside the subset (nothing is thrown).
  bool parse(std::string_view line);
  const CompactField* find(std::string_view key) const;
  const CompactScalar& item(uint32_t i) const { return items_[i]; }

 private:
  bool field();
  bool scalar(CompactScalar& out);
  bool string(std::string_view& out);
  bool integer(int64_t& out);
  bool list(CompactField& f);
  bool object(CompactField& f);
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  static constexpr size_t kMaxFields = 16;
  std::string_view text_;
  size_t pos_ = 0;
  std::array<CompactField, kMaxFields> fields_{};
  size_t nfields_ = 0;
  std::vector<CompactScalar> items_;
};

// The same questions as protocol.cpp's nlohmann Reader, answered from a CompactDoc; where that
// one throws a ProtocolError, this one throws NotCompact.
class CompactReader {
 public:
  explicit CompactReader(const CompactDoc& d) : d_(d) {}
  const CompactField* find(const char* key) const { return d_.find(key); }
  [[noreturn]] void refuse(const std::string&) const { throw NotCompact{}; }
  std::string str(const char* key, bool required = true) const;
  int64_t integer(const char* key, int64_t lo, int64_t hi, bool required = true, int64_t dflt = -1) const;
  bool boolean(const char* key) const;
  std::vector<int> ints(const char* key) const;
  std::vector<std::string> strings(const char* key) const;
  std::map<std::string, std::string> string_map(const char* key) const;

 private:
  const CompactScalar& scalar(const char* key, CompactScalar::Kind kind) const;
  const CompactField& collection(const char* key, CompactField::Kind kind) const;
  const CompactDoc& d_;
};

// One JSON object with its keys added in sorted order (the caller's job: nlohmann's objects
// are std::maps), byte for byte what nlohmann's dump(-1, ' ', false, replace) writes.
class CompactWriter {
 public:
  CompactWriter() { out_.reserve(160); }
  void str(std::string_view key, std::string_view v);
  void integer(std::string_view key, int64_t v);
  void boolean(std::string_view key, bool v);
  void ints(std::string_view key, const std::vector<int>& v);
  void strings(std::string_view key, const std::vector<std::string>& v);
  void string_map(std::string_view key, const std::map<std::string, std::string>& v);
  std::string done() &&;

 private:
  void key(std::string_view k);
  void quoted(std::string_view s);
  std::string out_;
};

}  // namespace ocslab::phase::wire
