// TL1 wire format (Polatis dialect, docs/protocols.md#tl1), shared by the driver (reply side), the
// grammar test peer and the OCS emulator (request side). Pure functions and an incremental
// parser: no I/O, so every byte sequence a switch can send is reachable from unit and fuzz tests.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

// One complete output block: a response to a command or an autonomous message.
struct Tl1Block {
  enum class Kind { kResponse, kAutonomous };
  Kind kind = Kind::kResponse;
  std::string sid;     // source identifier from the header line (unquoted); may be empty
  std::string date;    // YY-MM-DD as sent; empty when the block had no header line
  std::string time;    // HH:MM:SS
  std::string code;    // "M" for responses; "A", "*C", "**", "*" for autonomous messages
  std::string tag;     // ctag (responses) or atag (autonomous)
  std::string status;  // COMPLD, DENY, PRTL, DELAY, RTRV; for autonomous "REPT ALM EQPT" etc.
  std::vector<std::string> data;  // quoted payloads, unquoted and unescaped; unquoted lines as is
  std::string error_code;         // DENY/PRTL error code line (IDNV, IIAC, ...)
  std::string comment;            // text inside /* ... */ (several comments joined by "; ")
  std::string text;               // the block as received, lines joined with '\n'
};

// Splits a byte stream into Tl1Blocks. Bytes may be split anywhere between feed() calls.
// Tolerates CRLF or LF, blank lines, '<' / '>' prompts and acknowledgments (IP, PF, OK, NA,
// NG, RL), which are skipped. Throws ProtocolError (quoting the offending line) on input that
// fits no block; after that the stream position is unknown and the caller must reset().
class Tl1ReplyParser {
 public:
  static constexpr size_t kMaxPending = 1 << 20;  // unterminated bytes before giving up

  void feed(std::string_view bytes);
  // feed() for a reader that appends to a string (a Stream): read(std::string&) appends the
  // bytes to the parser's own buffer, saving a copy, and returns how many it appended.
  template <class Read>
  size_t feed_from(Read&& read) {
    prepare_feed();
    return read(buf_);
  }
  std::optional<Tl1Block> next();
  // next() without the copy, for the driver's per-request path: the block lives in the parser
  // (its strings keep their capacity from block to block) and stays valid until the next call
  // to next(), next_block() or reset(). The caller may move `data` out of it; the other
  // fields must stay as they are (the next block may reuse them). nullptr: no
  // complete block yet. Tl1Block::text is a copy of the whole block that a request rarely
  // needs: with_text = false leaves it empty, and block_text() builds it when asked.
  Tl1Block* next_block(bool with_text = true);
  // The text of the block next_block() returned last (fills its Tl1Block::text); valid until
  // the next feed(), next_block() or reset().
  const std::string& block_text();
  void reset();
  // Bytes received but not yet part of a returned block (for diagnostics).
  size_t pending() const { return buf_.size() - pos_ + block_bytes_; }
  // Whether next_block() has anything to look at: received bytes other than the line ends and
  // prompts between blocks (which it skips).
  bool has_input() {
    if (state_ == State::kIdle) skip_idle_filler();
    return pos_ < buf_.size();
  }

 private:
  enum class State { kIdle, kHeader, kBody, kComment };
  void prepare_feed();
  // A view into the buffer, valid until the next feed() (next() never feeds while parsing).
  std::optional<std::string_view> take_line();
  void begin_block(bool header);  // header: the block starts with a header line
  void add_raw(std::string_view line);
  void add_raw(size_t at, size_t size);
  void header_line(std::string_view raw, std::string_view line);
  // The usual header "SID YY-MM-DD HH:MM:SS" and response line "M CTAG STATUS", matched from
  // their fixed shapes (views into the trimmed line) before the general word-splitting path.
  struct PlainHeader {
    std::string_view sid, date, time;
  };
  struct PlainResponse {
    std::string_view ctag, status;
  };
  static bool match_plain_header(std::string_view line, PlainHeader& out);
  static bool match_plain_response(std::string_view line, PlainResponse& out);
  void plain_header(std::string_view raw, const PlainHeader& h);
  void plain_response(std::string_view raw, const PlainResponse& r);
  Tl1Block* simple_block();
  Tl1Block* repeated_block();
  void skip_idle_filler();
  void body_line(std::string_view line);

  std::string buf_;
  size_t pos_ = 0;      // first unconsumed byte
  size_t scanned_ = 0;  // buf_ before this holds no '\n' past pos_ (avoids rescans)
  State state_ = State::kIdle;
  Tl1Block block_;
  size_t block_bytes_ = 0;
  // The lines of the current block as (offset, size) in buf_, from which block_text() builds
  // Tl1Block::text: kept while the block is parsed or just returned, shifted with buf_.
  std::vector<std::pair<size_t, size_t>> lines_;
  bool text_built_ = false;
  // The bytes of the last block simple_block() parsed, from its header line to its ';', while
  // block_'s fields are still the ones it set (begin_block(), next() and reset() drop it). A
  // reply that repeats those bytes with another ctag, as a switch answers a stream of patch
  // requests, is that block with that ctag: repeated_block() then reads only the ctag.
  struct Template {
    std::string bytes;
    size_t ctag_at = 0, ctag_size = 0;  // the ctag word in bytes
    size_t header_size = 0;             // the header line as take_line() gives it (no CR)
    size_t response_at = 0;             // where the response line starts
    size_t response_size = 0;           // with this ctag, no CR
    size_t semicolon_at = 0;
  } template_;
  bool template_valid_ = false;
};

// A request as a switch receives it: VERB-MOD[-MOD]:[TID]:[AID]:CTAG:[GB]:[KEY=value,...];
struct Tl1Command {
  std::string verb;  // upper-cased, e.g. ENT-PATCH
  std::string tid;
  std::string aid;
  std::string ctag;  // unquoted
  std::string gb;
  std::map<std::string, std::string> params;  // KEY (upper-cased) = value (unquoted)
  std::vector<std::string> positional;        // items after GB without '=' (ACT-USER password)
};

// Parses one command; a trailing ';' and surrounding whitespace / CR / LF are optional.
// Throws ProtocolError naming the command and what is wrong.
Tl1Command parse_tl1_command(std::string_view text);

// "11", "11&4&10", "1&&640" (inclusive), "ALL" or "" (every port 1..port_count). Order is
// kept (patch lists pair by position). Throws ProtocolError for bad items or ports outside
// 1..port_count.
std::vector<Port> parse_tl1_port_list(std::string_view text, int port_count);
// Inverse of parse_tl1_port_list: ascending runs of three or more become "a&&b".
std::string format_tl1_port_list(const std::vector<Port>& ports);
// The same text appended to out.
void append_tl1_port_list(std::string& out, const std::vector<Port>& ports);
// The same text written at out, which has room for max_tl1_port_list_size(ports.size())
// bytes (the driver builds requests in one reused buffer); returns the end of the text.
// Every port takes at most 11 characters ("-2147483648") and 2 separators.
constexpr size_t max_tl1_port_list_size(size_t ports) { return ports * 13; }
char* write_tl1_port_list(char* out, const std::vector<Port>& ports);

// Patch AID "<ingress-list>,<egress-list>": the lists pair in order and must be equally long.
std::vector<Circuit> parse_tl1_patch_aid(std::string_view aid, int port_count);
std::string format_tl1_patch_aid(const std::vector<Circuit>& circuits);
void append_tl1_patch_aid(std::string& out, const std::vector<Circuit>& circuits);
constexpr size_t max_tl1_patch_aid_size(size_t circuits) { return 2 * max_tl1_port_list_size(circuits) + 1; }
char* write_tl1_patch_aid(char* out, const std::vector<Circuit>& circuits);

// A response or report data line's payload as a TL1 quoted string: "text" with '"' and '\\'
// escaped by a backslash (what parse of a response block undoes). Server side.
std::string tl1_quote_data(std::string_view text);

// The lines of a response between its header line and its terminator: "M  <ctag> COMPLD"
// and each data payload quoted, or "M  <ctag> DENY", the error code and "/* comment */".
// The caller makes the comment safe inside /* */ where it needs to. Server side.
std::string format_tl1_response_body(std::string_view ctag, bool ok, const std::vector<std::string>& data,
                                     std::string_view code, std::string_view comment, std::string_view eol);

// A received line made safe for an error message: control bytes escaped, cut to ~200 chars.
std::string tl1_quote_line(std::string_view line);

}  // namespace ocslab::ocs
