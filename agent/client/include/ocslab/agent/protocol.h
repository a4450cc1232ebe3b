// Protocol v1 between the runner (or any client) and ocslab-agent: JSON lines, one object per
// line, each with a "type" (requests also an "id" echoed in the reply). The parser is strict and
// names what is wrong so a session can answer garbage with an error and stay up.
// Reference: docs/agent-protocol.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/sample.h"

namespace ocslab::agent {

constexpr int kProtocolVersion = 1;
// Longer lines are refused (and skipped up to the next newline): no request needs more, and
// a peer that never sends a newline must not grow the agent's memory without bound.
constexpr size_t kMaxLineBytes = 1 << 20;
// The largest page a paged spool.fetch may ask for (max_count): what the agent queues for one
// reply, whatever the gap.
constexpr uint64_t kMaxFetchPage = 100000;

// Input that does not follow the protocol. Carries the request's id when it could be read, so
// the error reply can name the request it answers.
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& what, nlohmann::json id = nullptr) : Error(what), id_(std::move(id)) {}
  const nlohmann::json& id() const { return id_; }

 private:
  nlohmann::json id_;
};

enum class RequestType { kHello, kClock, kProbesStart, kProbesStop, kStatus, kSpoolFetch, kSpoolDelete, kBye };

const char* to_string(RequestType t);

// One probe named in probes.start. Keys other than name/interfaces/interval_ms are probe
// specific; they stay in params (the whole object) for the probe's factory to read.
struct ProbeRequest {
  std::string name;
  std::vector<std::string> interfaces;
  int interval_ms = 1000;
  nlohmann::json params = nlohmann::json::object();
};

struct Request {
  RequestType type = RequestType::kHello;
  nlohmann::json id;                 // integer or string, echoed in the reply
  int version = 0;                   // hello
  int64_t t1 = 0;                    // clock: client's CLOCK_REALTIME ns at send
  std::vector<ProbeRequest> probes;  // probes.start
  std::string run;                   // probes.start: the client's run id, in the spool's name ("": none)
  std::string capture;               // spool.delete: the capture whose spool goes
  uint64_t from_seq = 1;             // spool.fetch
  bool follow = true;                // spool.fetch: keep streaming live samples afterwards
  uint64_t max_count = 0;            // spool.fetch: page size, 1..kMaxFetchPage (0: not sent, no paging)
};

// A run id (probes.start) or capture id (spool.delete) becomes part of a file name: 1 to
// max_bytes of [A-Za-z0-9._-], not starting with '.'. Throws ProtocolError naming what and
// the bad character.
constexpr size_t kMaxRunBytes = 64;
constexpr size_t kMaxCaptureBytes = 128;  // "<UTC time>-<pid>-<n>" and ".<run>"
void check_name(const std::string& value, const char* what, size_t max_bytes, const nlohmann::json& id = nullptr);

// Parses one request line (without its newline). Throws ProtocolError naming the problem.
Request parse_request(std::string_view line);
// The request as it goes on the wire (one line, with its newline).
std::string request_line(const Request& r);
nlohmann::json probe_request_json(const ProbeRequest& p);

// A sample with the sequence number the agent gave it (1, 2, ... per capture).
struct SeqSample {
  uint64_t seq = 0;
  Sample sample;
};

// {"type":"sample","seq":N,...} with seq first so the spool can be scanned without parsing
// whole lines. A value that is not finite is written as null.
std::string sample_line(uint64_t seq, const Sample& s);
// The same line appended to out, for a caller that reuses one buffer per sample.
void append_sample_line(std::string& out, uint64_t seq, const Sample& s);
// Reads a sample message (client side, spool). Throws ProtocolError.
SeqSample parse_sample(const nlohmann::json& j);
// The seq of a line written by sample_line, read from its fixed prefix; nullopt otherwise.
std::optional<uint64_t> sample_line_seq(std::string_view line);

// Any message (reply or stream) from the agent: a JSON object with a string "type".
nlohmann::json parse_message(std::string_view line);

nlohmann::json ok_reply(RequestType type, const nlohmann::json& id);
nlohmann::json error_reply(const nlohmann::json& id, const std::string& message);
std::string to_line(const nlohmann::json& j);

// Splits a byte stream into lines. A line longer than kMaxLineBytes comes out once as
// too_long (its bytes dropped) so the caller can answer with an error and carry on.
class LineReader {
 public:
  struct Line {
    std::string text;
    bool too_long = false;
  };
  explicit LineReader(size_t max_bytes = kMaxLineBytes) : max_(max_bytes) {}
  void feed(std::string_view bytes);
  std::optional<Line> next();

 private:
  size_t max_;
  std::string buf_;
  size_t scan_ = 0;        // bytes of buf_ already known to hold no newline
  bool skipping_ = false;  // inside an over-long line: drop bytes up to the next newline
  bool report_too_long_ = false;
};

}  // namespace ocslab::agent
