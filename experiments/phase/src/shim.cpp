#include "ocslab/phase/shim.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "ocslab/common/clock.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/log.h"
#include "ocslab/phase/phase_profiler.h"
#include "ocslab/phase/protocol.h"

namespace ocslab::phase {

namespace {

// What the profiler is told of an op: the same for a marked op and an unmarked one.
ProfiledOp profiled_op(const OpDescriptor& op, std::vector<int> ranks, int64_t start_ns) {
  ProfiledOp p;
  p.group = op.group;
  p.ranks = std::move(ranks);
  p.type = op.type;
  p.kind = kind_of_type(op.type);
  p.bytes = op.bytes;
  p.start_ns = start_ns;
  return p;
}

}  // namespace

using Clock = std::chrono::steady_clock;

// ---- phase table ----

PhaseTable PhaseTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open phase table", path));
  PhaseTable t;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (lineno == 1 || line.rfind("index,", 0) == 0) {
      if (line != "index,group,type,bytes") {
        throw ConfigError(
            fmt::format("{}:{}:1: header must be 'index,group,type,bytes', got '{}'", path, lineno, line));
      }
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (f.size() != 4)
      throw ConfigError(
          fmt::format("{}:{}:1: expected 4 fields (index,group,type,bytes), got {}", path, lineno, f.size()));
    PhaseEntry e;
    try {
      size_t pos = 0;
      e.index = std::stoi(f[0], &pos);
      if (pos != f[0].size() || e.index < 0) throw std::invalid_argument("index");
      e.bytes = std::stoull(f[3], &pos);
      if (pos != f[3].size() || f[3][0] == '-') throw std::invalid_argument("bytes");
    } catch (const std::exception&) {
      throw ConfigError(
          fmt::format("{}:{}:1: index and bytes must be non-negative integers in '{}'", path, lineno, line));
    }
    e.group = f[1];
    e.type = f[2];
    if (e.group.empty()) throw ConfigError(fmt::format("{}:{}:1: empty group", path, lineno));
    if (e.index != static_cast<int>(t.ops.size())) {
      throw ConfigError(
          fmt::format("{}:{}:1: op index {} out of order (expected {})", path, lineno, e.index, t.ops.size()));
    }
    t.ops.push_back(std::move(e));
  }
  if (t.ops.empty()) throw ConfigError(fmt::format("{}: phase table has no ops", path));
  return t;
}

void PhaseTable::save(const std::string& path) const {
  CsvWriter w(path);
  w.header({"index", "group", "type", "bytes"});
  for (const auto& e : ops) w.row({std::to_string(e.index), e.group, e.type, std::to_string(e.bytes)});
  w.flush();
}

// ---- shim ----

Shim::Shim(ShimOptions options) : options_(std::move(options)) {
  if (!options_.phase_table.empty()) {
    table_ = PhaseTable::load(options_.phase_table);
    table_ready_ = true;
  } else {
    profiler_ = std::make_unique<PhaseProfiler>(ProfileOptions{.steps = options_.profile_steps});
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  auto where = fmt::format("{}:{}", options_.host, options_.port);
  if (int rc = ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &res); rc != 0) {
    throw Error(fmt::format("rank {}: controller {}: {}", options_.rank, where, gai_strerror(rc)));
  }
  int err = 0;
  for (auto* a = res; a && fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      fd_ = fd;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) throw SystemError(fmt::format("rank {}: connect to controller {}", options_.rank, where), err);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Message h;
  h.type = MsgType::kHello;
  h.job = options_.job;
  h.rank = options_.rank;
  h.world = options_.world;
  h.token = options_.token;
  send_line(encode(h));
  auto deadline = Clock::now() + options_.connect_timeout;
  while (topo_.empty() && !register_error_ && fd_ >= 0) {
    if (!read_one(deadline)) break;
  }
  if (register_error_) {
    auto msg = *register_error_;
    close();
    throw PhaseError(msg);
  }
  if (fd_ < 0 || topo_.empty()) {
    auto why = fallback_reason_.empty() ? std::string("no welcome") : fallback_reason_;
    close();
    throw PhaseError(fmt::format("rank {}: controller {} did not welcome this rank: {}", options_.rank, where, why));
  }
  fallback_ = false;  // a lost-controller note from the handshake does not outlive the throw paths above
  fallback_reason_.clear();
}

Shim::~Shim() { close(); }

void Shim::close() {
  if (fd_ < 0) return;
  if (topo_.empty()) {  // never welcomed: a bye would only be refused as "before hello"
    ::close(fd_);
    fd_ = -1;
    return;
  }
  Message b;
  b.type = MsgType::kBye;
  auto line = encode(b) + "\n";
  (void)::send(fd_, line.data(), line.size(), MSG_NOSIGNAL);
  ::close(fd_);
  fd_ = -1;
}

void Shim::send_line(const std::string& line) {
  if (fd_ < 0) return;
  std::string out = line + "\n";
  std::string_view rest = out;
  while (!rest.empty()) {
    ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      lose_controller(fmt::format("send failed: {}", std::strerror(errno)));
      return;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

bool Shim::read_one(Clock::time_point deadline) {
  while (fd_ >= 0) {
    auto nl = inbuf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = inbuf_.substr(0, nl);
      inbuf_.erase(0, nl + 1);
      handle(line);
      return true;
    }
    if (inbuf_.size() > kMaxLine) {
      lose_controller("controller sent a line longer than the protocol allows");
      return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      lose_controller(n == 0 ? "connection closed by the controller"
                             : fmt::format("receive failed: {}", std::strerror(errno)));
      return true;
    }
    inbuf_.append(buf, static_cast<size_t>(n));
  }
  return true;
}

void Shim::handle(const std::string& line) {
  Message m;
  try {
    m = decode(line, fmt::format("rank {}: controller message", options_.rank));
  } catch (const ProtocolError& e) {
    lose_controller(e.what());
    return;
  }
  switch (m.type) {
    case MsgType::kWelcome:
      topo_ = m.topo;
      break;
    case MsgType::kRegistered:
      registered_ = m.group;
      break;
    case MsgType::kAck: {
      Ack a{m.reconfigured, m.fallback, m.topo, m.keep};
      topo_ = m.topo;
      acks_[{m.group, m.seq}] = std::move(a);
      break;
    }
    case MsgType::kFallback: {
      if (!fallback_) sample(fmt::format("rank{}", options_.rank), "fallback", 1, "event");
      fallback_ = true;
      fallback_reason_ = m.reason;
      reports_.push_back("controller fell back to a static giant ring: " + m.reason);
      spdlog::warn("rank {}: {}", options_.rank, reports_.back());
      break;
    }
    case MsgType::kPeerLost: {
      lost_peers_.insert(m.rank);
      std::string gs;
      for (const auto& g : m.groups) gs += (gs.empty() ? "" : ", ") + g;
      reports_.push_back(fmt::format("rank {} disconnected ({}); groups: {}", m.rank, m.reason, gs));
      sample(fmt::format("rank{}", options_.rank), "peer_lost", m.rank, "rank");
      break;
    }
    case MsgType::kMasked: {
      moves_.push_back(SlotMove{m.rail, m.rank, m.port, m.ingress, m.egress, m.reason});
      reports_.push_back(fmt::format("{}: port {} failed ({}); rank {} moved to slot {}/{}", m.rail, m.port,
                                     m.reason.empty() ? "no reason given" : m.reason, m.rank, m.ingress, m.egress));
      spdlog::warn("rank {}: {}", options_.rank, reports_.back());
      sample(fmt::format("rank{}", m.rank), "slot_moved", m.port, "port");
      break;
    }
    case MsgType::kError:
      if (!m.group.empty() && m.seq >= 0) {
        errors_[{m.group, m.seq}] = m.message;
      } else {
        register_error_ = m.message;
      }
      reports_.push_back("controller error: " + m.message);
      break;
    default:
      lose_controller(fmt::format("controller sent a shim message '{}'", to_string(m.type)));
  }
}

void Shim::lose_controller(const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!fallback_) sample(fmt::format("rank{}", options_.rank), "controller_lost", 1, "event");
  fallback_ = true;
  fallback_reason_ = "controller lost: " + why;
  reports_.push_back(fallback_reason_);
  spdlog::warn("rank {}: {}; ops continue on the fabric as it is, without reconfiguration", options_.rank,
               fallback_reason_);
}

void Shim::sample(const std::string& subject, const std::string& signal, double value, const std::string& unit) {
  auto t = now();
  Sample s;
  s.t_ns = t.realtime_ns;
  s.mono_ns = t.monotonic_ns;
  s.host = options_.sample_host;
  s.source = "shim";
  s.subject = subject;
  s.signal = signal;
  s.value = value;
  s.unit = unit;
  samples_.push_back(std::move(s));
}

void Shim::write_csv(const std::string& path) const {
  CsvWriter w(path);
  w.header(sample_csv_columns());
  for (const auto& s : samples_) w.row(sample_csv_fields(s));
  w.flush();
}

void Shim::add_group(const std::string& name, const std::string& dim, const std::vector<int>& ranks) {
  if (fd_ < 0)
    throw PhaseError(
        fmt::format("rank {} group {}: not connected to the controller ({})", options_.rank, name, fallback_reason_));
  Message m;
  m.type = MsgType::kRegister;
  m.group = name;
  m.dim = dim;
  m.ranks = ranks;
  registered_.reset();
  register_error_.reset();
  send_line(encode(m));
  auto deadline = Clock::now() + options_.ack_wait;
  while (fd_ >= 0 && registered_ != name && !register_error_ && !errors_.count({name, -1})) {
    if (!read_one(deadline)) break;
  }
  if (register_error_) throw PhaseError(*register_error_);
  if (registered_ != name)
    throw PhaseError(
        fmt::format("rank {} group {}: registration not confirmed ({})", options_.rank, name, fallback_reason_));
  dims_[name] = dim;
  members_[name] = ranks;
}

void Shim::note_op(const OpDescriptor& op) {
  ++ops_seen_;
  if (op.index < 0) {
    if (!profiler_) return;  // a loaded table: it starts at the first op
    note_unmarked(op, profiled_op(op, members_[op.group], now().monotonic_ns));
    return;
  }
  if (table_ready_ || !profiler_) return;
  ProfiledOp p = profiled_op(op, members_[op.group], now().monotonic_ns);
  p.step_start = op.index == 0;
  profiler_->add(std::move(p));
  if (op.index != 0) return;
  // This op's mark closes the step before it: the open step is not looked at.
  auto r = profiler_->result();
  if (r.learned) {
    learn(std::move(*r.learned), false);
    return;
  }
  if (++steps_started_ > options_.profile_steps && !warned_no_table_) {
    warned_no_table_ = true;  // once: profiling goes on, and a later repetition still counts
    reports_.push_back(fmt::format("rank {}: no phase table after {} profiled steps ({}); every op asks the controller",
                                   options_.rank, steps_started_ - 1, r.reason));
    spdlog::warn("{}", reports_.back());
  }
}

void Shim::learn(LearnedPhases l, bool keep_profiling) {
  table_ = l.table;
  learned_ = std::make_unique<LearnedPhases>(std::move(l));
  table_ready_ = true;
  step_from_ = learned_->warmup_ops;
  if (!keep_profiling) profiler_.reset();
  sample(fmt::format("rank{}", options_.rank), "phase_table_ready", static_cast<double>(table_.ops.size()), "ops");
  if (warned_no_table_) {
    reports_.push_back(fmt::format("rank {}: phase table learned after all, after {} warm-up ops", options_.rank,
                                   learned_->warmup_ops));
  }
}

void Shim::note_unmarked(const OpDescriptor& op, ProfiledOp p) {
  const int64_t at = ops_seen_ - 1;  // this op's position in the rank's stream
  // The profiler keeps the whole stream (bounded by its own limit): a period refuted by a later
  // op is not found again, as the warm-up before it grows longer than its repetitions.
  profiler_->add(std::move(p));
  if (table_ready_) {
    const auto& e = table_.ops[static_cast<size_t>((at - step_from_) % static_cast<int64_t>(table_.ops.size()))];
    if (e.group == op.group && e.type == op.type && e.bytes == op.bytes) return;
    // A period found by the stream's tail can be shorter than the step (ops repeated within
    // it): the op that leaves it ends the table, so no further request or grant rests on a
    // step the job does not run.
    sample(fmt::format("rank{}", options_.rank), "table_mismatch", static_cast<double>(e.index), "index");
    reports_.push_back(
        fmt::format("rank {}: op {} ({} on {}, {} bytes) left the learned step of {} op(s) at its op {} "
                    "({} on {}); every op asks until a step is learned again",
                    options_.rank, at, op.type, op.group, op.bytes, table_.ops.size(), e.index, e.type, e.group));
    table_ready_ = false;
    learned_.reset();
    table_ = {};
  }
  // Unmarked, every op may complete the repetition: the table applies from this op on.
  if (auto r = profiler_->result(); r.learned) learn(std::move(*r.learned), true);
}

int Shim::step_index(const OpDescriptor& op) const {
  if (op.index >= 0) return op.index;
  const int64_t at = ops_seen_ - 1;
  if (table_ready_ && at >= step_from_) {
    return static_cast<int>((at - step_from_) % static_cast<int64_t>(table_.ops.size()));
  }
  return static_cast<int>(std::min<int64_t>(at, std::numeric_limits<int>::max()));
}

void Shim::note_op_end() {
  if (profiler_) profiler_->end_last(now().monotonic_ns);
}

int64_t Shim::run_after(int index, const std::string& group) const {
  if (!options_.skip_unchanged || !table_ready_) return 0;
  const auto& ops = table_.ops;
  auto pos = std::find_if(ops.begin(), ops.end(), [&](const PhaseEntry& e) { return e.index == index; });
  if (pos == ops.end() || pos->group != group) return 0;
  // Within the step only: the next step's first ops are not promised (the last step has none).
  int64_t n = 0;
  for (++pos; pos != ops.end() && pos->group == group && n < kMaxRun; ++pos) ++n;
  return n;
}

bool Shim::granted(const std::string& group, int64_t seq) const {
  auto g = grants_.find(group);
  return g != grants_.end() && seq > g->second.by && seq <= g->second.until;
}

void Shim::send_request(const std::string& group, int64_t seq, int64_t op, bool provision) {
  Message m;
  m.type = MsgType::kRequest;
  m.group = group;
  m.seq = seq;
  m.op = op;
  m.provision = provision;
  auto dim = dims_.find(group);
  if (dim != dims_.end() && dim->second != "pp") m.run = run_after(static_cast<int>(op), group);
  requested_.insert({group, seq});
  send_line(encode(m));
  sample(fmt::format("rank{} {}#{}", options_.rank, group, seq), provision ? "provision" : "request", 1, "event");
}

Decision Shim::pre_communication(const OpDescriptor& op) {
  Decision d;
  auto dim = dims_.find(op.group);
  if (dim == dims_.end()) {
    throw PhaseError(fmt::format("rank {}: op {} ({}) uses group '{}' that this rank never added", options_.rank,
                                 op.index, op.type, op.group));
  }
  // A granted run promised the controller that this rank's next ops are the group's: any
  // other op (management included) before the run ends would hold the group's stages while
  // this rank waits elsewhere. The workload's op sequence left its phase table.
  for (const auto& [g, grant] : grants_) {
    if (g != op.group && seq_[g] < grant.until) {
      throw PhaseError(fmt::format(
          "rank {}: op {} ({}, group {}) breaks the run of group {} that the controller granted up to seq {} "
          "(this rank is at seq {}): the op sequence differs from the phase table",
          options_.rank, op.index, op.type, op.group, g, grant.until, seq_[g]));
    }
  }
  note_op(op);
  current_index_ = step_index(op);
  const int64_t seq = ++seq_[op.group];
  const auto subject = fmt::format("rank{} {}#{}", options_.rank, op.group, seq);
  const auto key = std::make_pair(op.group, seq);
  if (granted(op.group, seq)) {
    // Granted by the ACK of an earlier op of this group: every member declared this op as part
    // of the same run, the controller counted it in flight on the group's stages from that ACK
    // on (G2), and the fabric had the group's topology then (G1). No round trip.
    const auto& grant = grants_.at(op.group);
    d.fallback = fallback_;
    d.topo = grant.topo;
    sample(subject, "topo_hit", static_cast<double>(grant.by), "seq");
    if (d.fallback) sample(subject, "fallback_pass", 1, "event");
    sample(subject, "op_start", static_cast<double>(op.bytes), "bytes");
    if (seq == grant.until) grants_.erase(op.group);
    return d;
  }
  if (dim->second == "mgmt") {
    d.passed = true;
    sample(subject, "mgmt_pass", 1, "event");
    sample(subject, "op_start", static_cast<double>(op.bytes), "bytes");
    return d;
  }
  if (fd_ < 0) {  // controller lost: run on the fabric as it is, and say so in every row
    d.fallback = true;
    d.topo = topo_;
    sample(subject, "fallback_pass", 1, "event");
    sample(subject, "op_start", static_cast<double>(op.bytes), "bytes");
    return d;
  }
  auto t0 = now();
  d.provisioned = requested_.count(key) != 0;
  if (!d.provisioned) send_request(op.group, seq, current_index_, false);
  auto deadline = Clock::now() + options_.ack_wait;
  while (!acks_.count(key) && !errors_.count(key) && fd_ >= 0) {
    if (!read_one(deadline)) {
      lose_controller(fmt::format("no ACK for group {} seq {} within {} ms", op.group, seq, options_.ack_wait.count()));
      break;
    }
  }
  requested_.erase(key);
  d.wait_ms = elapsed_ms(t0, now());
  sample(subject, "ack_wait", d.wait_ms, "ms");
  if (auto e = errors_.find(key); e != errors_.end()) {
    auto msg = e->second;
    errors_.erase(e);
    throw PhaseError(fmt::format("rank {} group {}: {}", options_.rank, op.group, msg));
  }
  if (auto a = acks_.find(key); a != acks_.end()) {
    d.barrier = true;
    d.reconfigured = a->second.reconfigured;
    d.fallback = a->second.fallback || fallback_;
    d.topo = a->second.topo;
    if (a->second.keep > 0) grants_[op.group] = Grant{seq, seq + a->second.keep, a->second.topo};
    acks_.erase(a);
  } else {
    d.fallback = true;  // controller lost while waiting
    d.topo = topo_;
  }
  sample(subject, "reconfigured", d.reconfigured ? 1 : 0, "bool");
  if (d.fallback) sample(subject, "fallback_pass", 1, "event");
  sample(subject, "op_start", static_cast<double>(op.bytes), "bytes");
  return d;
}

void Shim::post_communication(const OpDescriptor& op) {
  auto dim = dims_.find(op.group);
  if (dim == dims_.end()) {
    throw PhaseError(fmt::format("rank {}: op {} ({}) uses group '{}' that this rank never added", options_.rank,
                                 op.index, op.type, op.group));
  }
  const int64_t seq = seq_[op.group];
  sample(fmt::format("rank{} {}#{}", options_.rank, op.group, seq), "op_end", static_cast<double>(op.bytes), "bytes");
  note_op_end();
  if (fd_ < 0) return;
  if (dim->second != "mgmt") {
    Message m;
    m.type = MsgType::kDone;
    m.group = op.group;
    m.seq = seq;
    send_line(encode(m));
  }
  if (!provisioning_active() || fd_ < 0) return;
  // Provisioning: ask for the next op's topology now, so the switch moves during compute.
  const int index = op.index >= 0 ? op.index : current_index_;
  const auto& ops = table_.ops;
  auto pos = std::find_if(ops.begin(), ops.end(), [&](const PhaseEntry& e) { return e.index == index; });
  if (pos == ops.end() || pos->group != op.group) {
    sample(fmt::format("rank{} {}#{}", options_.rank, op.group, seq), "table_mismatch", index, "index");
    return;
  }
  // The next op that needs the fabric, past management ops (they run without a topology, so
  // the switch can move behind them too), wrapping into the next step.
  const PhaseEntry* found = nullptr;
  for (size_t k = 0; k < ops.size() && !found; ++k) {
    if (++pos == ops.end()) pos = ops.begin();
    auto d = dims_.find(pos->group);
    if (d != dims_.end() && d->second != "mgmt") found = &*pos;
  }
  if (!found) return;
  const auto& next = *found;
  const int64_t next_seq = seq_[next.group] + 1;
  if (granted(next.group, next_seq)) return;  // already granted: nothing to provision
  if (!requested_.count({next.group, next_seq})) send_request(next.group, next_seq, next.index, true);
}

}  // namespace ocslab::phase
