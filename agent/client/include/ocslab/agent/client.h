// The runner's side of protocol v1: an AgentClient drives one ocslab-agent over any byte
// stream (an SSH exec channel, a local child's pipes): hello, clock offset estimation, probe
// start/stop, live samples through a callback, and recovery of missed samples from the spool.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ocslab/agent/protocol.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::agent {

// The agent answered a request with an error reply; the message is the agent's.
class AgentError : public Error {
 public:
  using Error::Error;
};

struct HelloInfo {
  int version = 0;
  std::string host;
  long long pid = 0;
  std::vector<std::string> probes;  // the probes this agent can start
  std::string clock_sync;           // the host's clock discipline, e.g. "synchronized (...) by chronyd"
};

// Offset of the agent's CLOCK_REALTIME from ours: agent_time = our_time + offset_ns, known to
// within +- uncertainty_ns (half the round trip of the best exchange).
struct ClockEstimate {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
  int64_t rtt_ns = 0;
  int exchanges = 0;
};

struct StartResult {
  std::string capture;
  std::string spool;
  struct Probe {
    std::string name;
    bool available = false;
    std::string method, reason;
  };
  std::vector<Probe> probes;
};

struct FetchResult {
  uint64_t from_seq = 0;
  uint64_t last_seq = 0;  // the agent's last seq when the last page began
  uint64_t count = 0;     // samples replayed from the spool
  uint64_t next_seq = 0;  // the first seq the replay did not cover (last_seq + 1 when it all came)
  uint64_t pages = 0;     // spool.fetch requests it took
  bool following = false;  // the live stream follows (follow, and the agent agreed)
};

// Samples per spool.fetch page: a page's lines are handed to the sample callback as they
// arrive, and each page has the request timeout to itself, so any gap is recoverable.
constexpr uint64_t kDefaultFetchPage = 20000;

// How long a request waits for its reply at most while samples keep arriving ahead of it, in
// request timeouts (AgentClient).
constexpr int kBacklogWaitFactor = 8;

class AgentClient {
 public:
  using SampleCallback = std::function<void(const SeqSample&)>;

  // timeout: how long each request waits for its reply with nothing from the agent. Samples that
  // arrive ahead of the reply count as the agent answering (a backlog being drained), up to
  // kBacklogWaitFactor x timeout in all.
  explicit AgentClient(std::unique_ptr<ocs::Stream> stream,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
  ~AgentClient();

  // Every sample that arrives (live or replayed), on the calling thread, during any call.
  void on_sample(SampleCallback cb) { on_sample_ = std::move(cb); }

  HelloInfo hello();
  // Several clock exchanges; keeps the one with the smallest round trip (least queueing):
  // offset = ((t2 - t1) + (t3 - t4)) / 2, uncertainty = RTT / 2.
  ClockEstimate estimate_clock(int exchanges = 8);
  // run: the client's run id, carried in the capture id and spool file name ("": none).
  StartResult start(const std::vector<ProbeRequest>& probes, const std::string& run = "");
  // Returns the capture's last seq: every sample up to it has been delivered when this returns
  // (if the session was following the live stream all along).
  uint64_t stop();
  nlohmann::json status();
  // Replays samples from_seq..(the agent's last) through the callback, then (follow) the live
  // stream continues with the following ones, none twice. Paged: one spool.fetch of at most
  // page_size samples at a time (1..kMaxFetchPage), each page with the request timeout of its
  // own; the live stream starts with the last page. page_size 0: one unpaged request (the
  // whole gap within one timeout). An agent that does not know paging gets one unpaged request.
  FetchResult fetch(uint64_t from_seq, bool follow = true, uint64_t page_size = kDefaultFetchPage);
  // spool.delete: the capture's data is safe elsewhere; true when a spool file was removed
  // (false: there was none). Refused (AgentError) for the capture still running.
  bool delete_spool(const std::string& capture);
  void bye();

  // Reads and dispatches samples until the deadline; returns how many arrived.
  size_t poll_for(std::chrono::milliseconds duration);
  // Highest seq seen so far (0: none).
  uint64_t last_seq() const { return last_seq_; }
  // Drops the connection without a goodbye.
  void close();
  std::string describe() const { return stream_ ? stream_->describe() : "closed agent session"; }

 private:
  nlohmann::json request(Request r);
  // Reads one message; samples go to the callback and nullopt comes back. Returns an empty
  // json when the deadline passed.
  nlohmann::json read_message(ocs::Deadline deadline, bool* timed_out);

  std::unique_ptr<ocs::Stream> stream_;
  std::chrono::milliseconds timeout_;
  SampleCallback on_sample_;
  LineReader reader_;
  long long next_id_ = 1;
  uint64_t last_seq_ = 0;
  ocs::Clock::time_point last_bytes_{};  // when the stream last gave bytes
};

// A channel on a fresh SSH session running `command` (exec request); with ForceCommand set on
// the server the command is what sshd forces. Throws ocs::ConnectionError naming the step.
std::unique_ptr<ocs::Stream> ssh_exec(const ocs::SshOptions& options, const std::string& command);

// Starts argv as a child process and talks to it over its stdin/stdout (a local agent, no SSH).
// The child is killed and reaped when the stream is destroyed. Throws SystemError.
std::unique_ptr<ocs::Stream> spawn_stream(const std::vector<std::string>& argv);

}  // namespace ocslab::agent
