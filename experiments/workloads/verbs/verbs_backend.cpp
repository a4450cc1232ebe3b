#include "verbs_backend.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <net/if.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/verbs/verbs.h"
#include "ocslab/workloads/ring.h"

namespace ocslab::workloads {

struct VerbsBackend::Device {
  std::string iface, name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* data_mr = nullptr;
  ibv_mr* scratch_mr = nullptr;
  int gid_index = -1;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  uint64_t max_msg_floats = 1;  // largest SEND, in floats

  ~Device() {
    if (scratch_mr) ibv_dereg_mr(scratch_mr);
    if (data_mr) ibv_dereg_mr(data_mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

struct VerbsBackend::Conn {
  int peer = -1;
  Device* dev = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t psn = 0;
  ~Conn() {
    if (qp) ibv_destroy_qp(qp);
  }
};

const std::string& VerbsBackend::iface_of(const Group& g) const {
  auto it = o_.group_iface.find(g.name);
  return it == o_.group_iface.end() ? o_.interface : it->second;
}

VerbsBackend::Device& VerbsBackend::device_for(const std::string& iface) {
  for (auto& d : devices_) {
    if (d->iface == iface) return *d;
  }
  auto found = verbs::find_roce_device(iface, o_.port);
  switch (found.outcome) {
    case verbs::RoceSearch::Outcome::kNoInterface:
      throw Error("no network interface '" + iface + "' on this host (--if / --group-if)");
    case verbs::RoceSearch::Outcome::kNoDevices:
      throw Error("no RDMA device on this host (interface " + iface + "); for Soft-RoCE: rdma link add rxe_" + iface +
                  " type rxe netdev " + iface);
    case verbs::RoceSearch::Outcome::kNoGid:
      throw Error(
          fmt::format("no RDMA device with a RoCE v2 IPv4 GID on {} port {} (devices: {}); is the interface up "
                      "with an IPv4 address?",
                      iface, o_.port, found.tried));
    case verbs::RoceSearch::Outcome::kFound:
      break;
  }
  auto d = std::make_unique<Device>();
  d->iface = iface;
  d->ctx = found.device.ctx;
  d->gid_index = found.device.gid_index;
  d->gid = found.device.gid;
  d->name = found.device.name;
  ibv_port_attr pa{};
  if (ibv_query_port(d->ctx, static_cast<uint8_t>(o_.port), &pa) != 0) {
    throw SystemError(d->name + ": ibv_query_port", errno);
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    throw Error(fmt::format("{} port {} ({}) is not ACTIVE (state {}): no link?", d->name, o_.port, iface,
                            ibv_port_state_str(pa.state)));
  }
  d->mtu = pa.active_mtu;
  uint64_t limit = std::min<uint64_t>(pa.max_msg_sz, 1u << 30);
  if (o_.max_msg_bytes > 0) limit = std::min<uint64_t>(limit, o_.max_msg_bytes);
  d->max_msg_floats = std::max<uint64_t>(limit / sizeof(float), 1);
  d->pd = ibv_alloc_pd(d->ctx);
  if (!d->pd) throw SystemError(d->name + ": ibv_alloc_pd", errno);
  d->cq = ibv_create_cq(d->ctx, 256, nullptr, nullptr, 0);
  if (!d->cq) throw SystemError(d->name + ": ibv_create_cq", errno);
  // An int, not the enum: verbs.h's ibv_reg_mr macro ANDs it with another enum (C++20 warns).
  const int access = IBV_ACCESS_LOCAL_WRITE;
  d->data_mr = ibv_reg_mr(d->pd, data_.data(), data_.size() * sizeof(float), access);
  d->scratch_mr = ibv_reg_mr(d->pd, scratch_.data(), scratch_.size() * sizeof(float), access);
  if (!d->data_mr || !d->scratch_mr) {
    throw SystemError(fmt::format("{}: ibv_reg_mr of {} bytes", d->name, data_.size() * sizeof(float)), errno);
  }
  devices_.push_back(std::move(d));
  return *devices_.back();
}

VerbsBackend::VerbsBackend(const Schedule& s, int rank, const VerbsOptions& o, Rendezvous& rv)
    : s_(s), rank_(rank), o_(o) {
  for (const auto& [g, iface] : o_.group_iface) {
    if (std::none_of(s.groups.begin(), s.groups.end(), [&name = g](const Group& x) { return x.name == name; })) {
      throw Error("--group-if " + g + "=" + iface + ": the schedule has no group '" + g + "'");
    }
  }
  // Room for the largest op, and a barrier's n floats.
  uint64_t floats = s.max_buffer_bytes() / sizeof(float);
  for (const auto& g : s.groups) floats = std::max<uint64_t>(floats, g.ranks.size());
  data_.assign(std::max<uint64_t>(floats, 1), 0.0f);
  scratch_.assign(std::max<uint64_t>(floats / 2 + 1, 1), 0.0f);

  // Every connection this rank needs: ring neighbours of each group it is in, sendrecv partners.
  std::map<std::pair<int, std::string>, bool> wanted;
  for (const auto& op : s.step) {
    const Group& g = s.group_of(op);
    if (!s.involves(op, rank)) continue;
    const std::string& iface = iface_of(g);
    if (op.type == OpType::kSendRecv) {
      wanted[{rank == op.src ? op.dst : op.src, iface}] = true;
      continue;
    }
    int n = static_cast<int>(g.ranks.size());
    if (n < 2) continue;
    int me = g.index_of(rank);
    if (op.type == OpType::kAllToAll || op.type == OpType::kAllToAllV) {
      // Pairwise exchange: a queue pair with every other member.
      for (int p : g.ranks) {
        if (p != rank) wanted[{p, iface}] = true;
      }
      continue;
    }
    wanted[{g.ranks[static_cast<size_t>((me + 1) % n)], iface}] = true;
    wanted[{g.ranks[static_cast<size_t>((me + n - 1) % n)], iface}] = true;
  }
  std::mt19937 rng(std::random_device{}());
  std::string announce;
  for (const auto& [key, _] : wanted) {
    auto own = o_.peer_iface.find(key.first);
    Device& d = device_for(own == o_.peer_iface.end() ? key.second : own->second);
    auto c = std::make_unique<Conn>();
    c->peer = key.first;
    c->dev = &d;
    ibv_qp_init_attr init{};
    init.send_cq = d.cq;
    init.recv_cq = d.cq;
    init.cap.max_send_wr = 8;
    init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.qp_type = IBV_QPT_RC;
    c->qp = ibv_create_qp(d.pd, &init);
    if (!c->qp) throw SystemError(d.name + ": ibv_create_qp", errno);
    if (!verbs::qp_to_init(c->qp, o_.port)) throw SystemError(d.name + ": QP to INIT", errno);
    c->psn = rng() & 0xffffff;
    announce += fmt::format("{} {} {} {} {} {}\n", rank, key.first, key.second, c->qp->qp_num, c->psn, verbs::gid_hex(d.gid));
    conns_[key] = std::move(c);
  }

  auto all = rv.all_gather(announce);
  std::map<std::pair<int, std::string>, bool> connected;
  for (size_t r = 0; r < all.size(); ++r) {
    std::stringstream in(all[r]);
    for (std::string line; std::getline(in, line);) {
      int from = -1, to = -1;
      char iface[64] = {0}, hex[64] = {0};
      uint32_t qpn = 0, psn = 0;
      ibv_gid gid{};
      if (std::sscanf(line.c_str(), "%d %d %63s %u %u %63s", &from, &to, iface, &qpn, &psn, hex) != 6 ||
          !verbs::parse_gid(hex, gid) || from != static_cast<int>(r)) {
        throw Error(fmt::format("rank {} announced a malformed queue pair: '{}'", r, line));
      }
      if (to != rank) continue;
      auto it = conns_.find({from, iface});
      if (it == conns_.end()) {
        throw Error(
            fmt::format("rank {} wants a queue pair with rank {} on {} that this rank does not expect (same "
                        "schedule and --group-if on every rank?)",
                        from, rank, iface));
      }
      Conn& c = *it->second;
      verbs::RtrParams rtr;
      rtr.dest_qpn = qpn;
      rtr.rq_psn = psn;
      rtr.dgid = gid;
      rtr.sgid_index = c.dev->gid_index;
      rtr.port = o_.port;
      rtr.mtu = c.dev->mtu;
      if (!verbs::qp_to_rtr(c.qp, rtr)) {
        throw SystemError(fmt::format("{}: QP with rank {} ({}) to RTR", c.dev->name, from, verbs::gid_text(gid)),
                          errno);
      }
      verbs::RtsParams rts;
      rts.sq_psn = c.psn;
      rts.timeout = o_.timeout;
      rts.retry_cnt = o_.retry_cnt;
      rts.rnr_retry = 7;  // infinite: a receiver is always about to post its buffer
      if (!verbs::qp_to_rts(c.qp, rts)) {
        throw SystemError(fmt::format("{}: QP with rank {} to RTS", c.dev->name, from), errno);
      }
      connected[{from, iface}] = true;
    }
  }
  for (const auto& [key, c] : conns_) {
    if (!connected.count(key)) {
      throw Error(fmt::format("rank {} announced no queue pair for rank {} on {} (same schedule on every rank?)",
                              key.first, rank, key.second));
    }
  }
  // Every receive side is ready before anyone sends.
  rv.barrier();
}

VerbsBackend::~VerbsBackend() {
  conns_.clear();  // queue pairs before their device
  devices_.clear();
}

std::string VerbsBackend::describe() const {
  std::string s;
  for (const auto& d : devices_) {
    s += fmt::format("{}{} ({}, GID index {}, {}, MTU {}, messages up to {} B)", s.empty() ? "" : "; ", d->name,
                     d->iface, d->gid_index, verbs::gid_text(d->gid), 128 << static_cast<int>(d->mtu),
                     d->max_msg_floats * sizeof(float));
  }
  return fmt::format("{}{}{} queue pair(s)", s, s.empty() ? "" : ", ", conns_.size());
}

std::string VerbsBackend::op_where(const Op& op) const {
  return fmt::format("{} on group '{}' ({}:{})", op_name(op.type), s_.group_of(op).name, s_.origin, op.line);
}

VerbsBackend::Conn& VerbsBackend::conn(int peer, const std::string& iface, const Op& op) {
  auto it = conns_.find({peer, iface});
  if (it == conns_.end()) throw Error(fmt::format("{}: no queue pair with rank {} on {}", op_where(op), peer, iface));
  return *it->second;
}

void VerbsBackend::exchange(const Op& op, Conn* to, const float* send_from, uint64_t send_count, Conn* from,
                            float* recv_to, uint64_t recv_count) {
  // Messages above the device's limit (Soft-RoCE: 8 MiB) go as segments; the peer splits its
  // side of the same transfer identically, so segment k meets segment k.
  // With --peer-if the two sides may be on different devices: the smaller limit.
  uint64_t seg = std::min(to ? to->dev->max_msg_floats : UINT64_MAX, from ? from->dev->max_msg_floats : UINT64_MAX);
  uint64_t nsend = to ? std::max<uint64_t>(1, (send_count + seg - 1) / seg) : 0;
  uint64_t nrecv = from ? std::max<uint64_t>(1, (recv_count + seg - 1) / seg) : 0;
  for (uint64_t k = 0; k < std::max(nsend, nrecv); ++k) {
    bool s = k < nsend, r = k < nrecv;
    uint64_t sc = s ? std::min(seg, send_count - std::min(send_count, k * seg)) : 0;
    uint64_t rc = r ? std::min(seg, recv_count - std::min(recv_count, k * seg)) : 0;
    post_and_wait(op, s ? to : nullptr, s ? send_from + k * seg : nullptr, sc, r ? from : nullptr,
                  r ? recv_to + k * seg : nullptr, rc);
  }
}

void VerbsBackend::post_and_wait(const Op& op, Conn* to, const float* send_from, uint64_t send_count, Conn* from,
                                 float* recv_to, uint64_t recv_count) {
  auto sge_of = [&](const float* p, uint64_t count, Device& d) {
    bool in_scratch = p >= scratch_.data() && p < scratch_.data() + scratch_.size();
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(p);
    sge.length = static_cast<uint32_t>(count * sizeof(float));
    sge.lkey = in_scratch ? d.scratch_mr->lkey : d.data_mr->lkey;
    return sge;
  };
  // The completion queues to poll: one, or two when --peer-if put the peers on different devices.
  ibv_cq* cqs[2] = {to ? to->dev->cq : from->dev->cq, nullptr};
  if (to && from && from->dev != to->dev) cqs[1] = from->dev->cq;
  int pending = 0;
  if (from) {
    ibv_sge sge = sge_of(recv_to, recv_count, *from->dev);
    ibv_recv_wr wr{};
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = recv_count > 0 ? 1 : 0;  // a ring chunk is empty when a buffer has fewer elements than ranks
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(from->qp, &wr, &bad) != 0) {
      throw SystemError(fmt::format("{}: post receive from rank {}", op_where(op), from->peer), errno);
    }
    ++pending;
  }
  if (to) {
    ibv_sge sge = sge_of(send_from, send_count, *to->dev);
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = send_count > 0 ? 1 : 0;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(to->qp, &wr, &bad) != 0) {
      throw SystemError(fmt::format("{}: post send to rank {}", op_where(op), to->peer), errno);
    }
    ++pending;
  }
  auto deadline = std::chrono::steady_clock::now() + o_.op_timeout;
  ibv_wc wc[4];
  unsigned polls = 0;
  unsigned turn = 0;
  while (pending > 0) {
    ibv_cq* cq = cqs[1] && (turn++ & 1) ? cqs[1] : cqs[0];
    int got = ibv_poll_cq(cq, 4, wc);
    if (got < 0) throw Error(op_where(op) + ": ibv_poll_cq failed");
    for (int k = 0; k < got; ++k) {
      if (wc[k].status != IBV_WC_SUCCESS) {
        int peer = wc[k].wr_id == 1 ? to->peer : from->peer;
        throw Error(fmt::format("{}: {} with rank {} failed: {} (vendor error {:#x})", op_where(op),
                                wc[k].wr_id == 1 ? "send" : "receive", peer, ibv_wc_status_str(wc[k].status),
                                wc[k].vendor_err));
      }
      --pending;
    }
    if (got > 0) {
      polls = 0;
      continue;
    }
    // Busy-poll first (lowest latency); after ~1000 empty polls let a rank sharing this core
    // (several ranks per host) run.
    if (++polls > 1024) ::sched_yield();
    if ((polls & 0x3ff) == 0 && std::chrono::steady_clock::now() > deadline) {
      throw Error(fmt::format("{}: no completion within {} ms (peers: send to {}, receive from {})", op_where(op),
                              o_.op_timeout.count(), to ? std::to_string(to->peer) : "-",
                              from ? std::to_string(from->peer) : "-"));
    }
  }
}

void VerbsBackend::ring_reduce_scatter(const Op& op, float* buf, uint64_t total, int n, int me, Conn& left,
                                       Conn& right) {
  for (int s = 0; s < n - 1; ++s) {
    RingStep st = reduce_scatter_step(n, me, s);
    Chunk snd = ring_chunk(total, n, st.send), rcv = ring_chunk(total, n, st.recv);
    exchange(op, &right, buf + snd.offset, snd.count, &left, scratch_.data(), rcv.count);
    reduce_into(op.redop, buf + rcv.offset, scratch_.data(), rcv.count);
  }
  Chunk own = ring_chunk(total, n, me);  // fully reduced here now
  finish_reduction(op.redop, buf + own.offset, own.count, n);
}

void VerbsBackend::ring_all_gather(const Op& op, float* buf, uint64_t total, int n, int me, Conn& left, Conn& right) {
  for (int s = 0; s < n - 1; ++s) {
    RingStep st = all_gather_step(n, me, s);
    Chunk snd = ring_chunk(total, n, st.send), rcv = ring_chunk(total, n, st.recv);
    exchange(op, &right, buf + snd.offset, snd.count, &left, buf + rcv.offset, rcv.count);
  }
}

void VerbsBackend::pairwise_alltoall(const Op& op, float* buf, int n, int me) {
  const Group& g = s_.group_of(op);
  const std::string& iface = iface_of(g);
  AllToAllLayout l = alltoall_layout(op, n, me);
  Chunk own_send = l.send[static_cast<size_t>(me)], own_recv = l.recv[static_cast<size_t>(me)];
  std::copy(buf + own_send.offset, buf + own_send.offset + own_send.count, buf + own_recv.offset);
  // Step k: send to the member k ahead while receiving from the member k behind, who sends to
  // this one in its own step k; every member goes through the steps in the same order.
  for (int k = 1; k < n; ++k) {
    int to = (me + k) % n, from = (me + n - k) % n;
    Chunk snd = l.send[static_cast<size_t>(to)], rcv = l.recv[static_cast<size_t>(from)];
    exchange(op, &conn(g.ranks[static_cast<size_t>(to)], iface, op), buf + snd.offset, snd.count,
             &conn(g.ranks[static_cast<size_t>(from)], iface, op), buf + rcv.offset, rcv.count);
  }
}

void VerbsBackend::ring_broadcast(const Op& op, float* buf, uint64_t total, int n, int me, Conn& left, Conn& right) {
  const int d = (me - s_.group_of(op).index_of(op.root) + n) % n;  // hops from the root
  const int chunks = kBroadcastChunks;
  if (d == 0) {
    for (int c = 0; c < chunks; ++c) {
      Chunk ch = ring_chunk(total, chunks, c);
      exchange(op, &right, buf + ch.offset, ch.count, nullptr, nullptr, 0);
    }
    return;
  }
  const bool forward = d < n - 1;  // the last member before the root only receives
  for (int c = 0; c <= chunks; ++c) {
    Chunk prev = c > 0 ? ring_chunk(total, chunks, c - 1) : Chunk{};
    Chunk next = c < chunks ? ring_chunk(total, chunks, c) : Chunk{};
    bool snd = forward && c > 0, rcv = c < chunks;
    if (!snd && !rcv) continue;
    exchange(op, snd ? &right : nullptr, snd ? buf + prev.offset : nullptr, prev.count, rcv ? &left : nullptr,
             rcv ? buf + next.offset : nullptr, next.count);
  }
}

void VerbsBackend::prepare(const Op& op, uint64_t seq) {
  if (op.type != OpType::kBarrier) fill_input(s_, op, rank_, seq, data_.data());
}

void VerbsBackend::run(const Op& op) {
  const Group& g = s_.group_of(op);
  const std::string& iface = iface_of(g);
  if (op.type == OpType::kSendRecv) {
    if (rank_ == op.src) {
      exchange(op, &conn(op.dst, iface, op), data_.data(), buffer_floats(op), nullptr, nullptr, 0);
    } else {
      exchange(op, nullptr, nullptr, 0, &conn(op.src, iface, op), data_.data(), buffer_floats(op));
    }
    return;
  }
  int n = static_cast<int>(g.ranks.size());
  if (n < 2) return;
  int me = g.index_of(rank_);
  Conn& right = conn(g.ranks[static_cast<size_t>((me + 1) % n)], iface, op);
  Conn& left = conn(g.ranks[static_cast<size_t>((me + n - 1) % n)], iface, op);
  uint64_t total = buffer_floats(op);
  float* buf = data_.data();
  switch (op.type) {
    case OpType::kAllReduce:
      ring_reduce_scatter(op, buf, total, n, me, left, right);
      ring_all_gather(op, buf, total, n, me, left, right);
      break;
    case OpType::kReduceScatter:
      ring_reduce_scatter(op, buf, total, n, me, left, right);
      break;
    case OpType::kAllGather:
      ring_all_gather(op, buf, total, n, me, left, right);
      break;
    case OpType::kBarrier:
      // A ring all-gather of one float per member: nobody leaves before everyone arrived.
      ring_all_gather(op, buf, static_cast<uint64_t>(n), n, me, left, right);
      break;
    case OpType::kAllToAll:
    case OpType::kAllToAllV:
      pairwise_alltoall(op, buf, n, me);
      break;
    case OpType::kBroadcast:
      ring_broadcast(op, buf, total, n, me, left, right);
      break;
    case OpType::kSendRecv:
      break;
  }
}

uint64_t VerbsBackend::verify(const Op& op, uint64_t seq) { return count_wrong(s_, op, rank_, seq, data_.data()); }

}  // namespace ocslab::workloads
