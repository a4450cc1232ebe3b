// The shim <-> controller wire protocol, version 2: one compact JSON object per line over TCP
// ('\n'-terminated, at most kMaxLine bytes), every message carrying "v" and "type". Version 2
// added the hello's "token" (the controller's shared secret; version 1 had no
// authentication, and a version-1 shim is refused by name rather than as a bad token). Parsing
// validates each field's presence and type and names the offending field; the message
// sequence is documented in docs/phase-control.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab::phase {

inline constexpr int kProtocolVersion = 2;
inline constexpr size_t kMaxLine = 64 * 1024;
// The longest run of consecutive same-group ops a request may declare (and an ACK may grant).
inline constexpr int64_t kMaxRun = 1 << 16;

class ProtocolError : public Error {
 public:
  using Error::Error;
};

enum class MsgType {
  // shim -> controller
  kHello,     // job, rank, world, [token]
  kRegister,  // group, dim ("pp", a symmetric dimension name, or "mgmt"), ranks
  kRequest,   // group, seq, op, provision, [digit], [run]: topo_write for the seq-th op of group
  kDone,      // group, seq: the op finished (its circuits may change again)
  kBye,       // clean close
  // controller -> shim
  kWelcome,     // job, rank, topo (rail -> topo_id), fallback
  kRegistered,  // group
  kAck,         // group, seq, topo, reconfigured, fallback, wait_us, [keep]
  kFallback,    // reason: the controller gave up reconfiguring; fabric is (being) set to a giant ring
  kPeerLost,    // rank, groups, reason
  kMasked,      // rail, rank, port, ingress, egress, reason: a failed port was masked and the rank
                // moved to the spare slot ingress/egress on that rail (its circuits re-made there)
  kError,       // message, [group, seq]
};

std::string_view to_string(MsgType t);

struct Message {
  MsgType type = MsgType::kError;
  std::string job;
  int rank = -1;
  int world = 0;
  std::string token;  // kHello: the controller's secret (never logged, never echoed)
  std::string group;
  std::string dim;
  std::vector<int> ranks;
  int64_t seq = -1;
  int64_t op = -1;
  bool provision = false;
  std::optional<int> digit;
  // kRequest: how many ops of the same group follow this one back to back in the rank's
  // phase table (no other op, management included, in between); 0 when unknown.
  int64_t run = 0;
  std::map<std::string, std::string> topo;  // rail -> topo_id
  bool reconfigured = false;
  bool fallback = false;
  int64_t wait_us = 0;
  // kAck: the group's next `keep` ops (seq+1 .. seq+keep) are granted with this one: every
  // member declared them as a run, and the stages stay locked until their done. 0: none.
  int64_t keep = 0;
  std::string reason;               // kFallback, kPeerLost
  std::string message;              // kError
  std::vector<std::string> groups;  // kPeerLost
  // kMasked: the rail, the failed port and the rank's new slot (rank: the rank that moved).
  std::string rail;
  int port = 0;
  int ingress = 0;
  int egress = 0;

  bool operator==(const Message&) const = default;
};

// One line, without the trailing '\n'. Byte for byte what wire::encode_json writes.
std::string encode(const Message& m);
// Throws ProtocolError naming the field ("line 3: field 'seq' must be an integer") for any
// malformed, unknown-type or wrong-version input. `where` prefixes the message.
// The same as wire::decode_json, taking wire::decode_compact's quick path when it can.
Message decode(std::string_view line, std::string_view where = "message");

// The two halves of encode and decode, for the tests and the fuzz target that hold them equal.
namespace wire {
// Through an nlohmann::json document (sorted keys, compact, invalid UTF-8 replaced by U+FFFD).
std::string encode_json(const Message& m);
Message decode_json(std::string_view line, std::string_view where = "message");
// Without a JSON document: the message when the line is in the compact form encode writes
// (no whitespace, keys once, printable-ASCII strings without escapes, integers up to 18
// digits) and passes every check, which is then what decode_json gives; otherwise nullopt,
// never an error: decode_json decides, and names the field. Thread-safe.
std::optional<Message> decode_compact(std::string_view line);
}  // namespace wire

}  // namespace ocslab::phase
