#include "ocslab/verbs/verbs.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <net/if.h>

#include <vector>

namespace ocslab::verbs {

namespace {
constexpr int kMaxGids = 256;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool ipv4_mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g.raw[i] != 0) return false;
  }
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

std::string gid_hex(const ibv_gid& g) {
  std::string s;
  for (uint8_t b : g.raw) s += fmt::format("{:02x}", b);
  return s;
}

bool parse_gid(const std::string& hex, ibv_gid& g) {
  if (hex.size() != 32) return false;
  ibv_gid out{};
  for (size_t i = 0; i < 16; ++i) {
    int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.raw[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  g = out;
  return true;
}

std::string gid_text(const ibv_gid& g) {
  if (ipv4_mapped(g)) return fmt::format("{}.{}.{}.{}", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  char buf[INET6_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  return buf;
}

RoceSearch find_roce_device(const std::string& interface, int port, const std::string& only_device) {
  RoceSearch r;
  unsigned ifindex = if_nametoindex(interface.c_str());
  if (ifindex == 0) {
    r.outcome = RoceSearch::Outcome::kNoInterface;
    return r;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    r.outcome = RoceSearch::Outcome::kNoDevices;
    return r;
  }
  for (int i = 0; i < n && !r.device.ctx; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    if (!only_device.empty() && name != only_device) continue;
    r.tried += (r.tried.empty() ? "" : ", ") + name;
    ibv_context* c = ibv_open_device(list[i]);
    if (!c) continue;
    std::vector<ibv_gid_entry> entries(kMaxGids);
    ssize_t count = ibv_query_gid_table(c, entries.data(), entries.size(), 0);
    for (ssize_t k = 0; k < count; ++k) {
      const auto& e = entries[static_cast<size_t>(k)];
      if (static_cast<int>(e.port_num) == port && e.gid_type == IBV_GID_TYPE_ROCE_V2 && e.ndev_ifindex == ifindex &&
          ipv4_mapped(e.gid)) {
        r.device = RoceDevice{c, name, static_cast<int>(e.gid_index), e.gid};
        break;
      }
    }
    if (!r.device.ctx) ibv_close_device(c);
  }
  ibv_free_device_list(list);
  r.outcome = r.device.ctx ? RoceSearch::Outcome::kFound : RoceSearch::Outcome::kNoGid;
  return r;
}

bool qp_to_init(ibv_qp* qp, int port) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(port);
  a.qp_access_flags = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
}

bool qp_to_rtr(ibv_qp* qp, const RtrParams& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = p.mtu;
  a.dest_qp_num = p.dest_qpn;
  a.rq_psn = p.rq_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = p.dgid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(p.sgid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = static_cast<uint8_t>(p.port);
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0;
}

bool qp_to_rts(ibv_qp* qp, const RtsParams& p) {
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = p.timeout;
  r.retry_cnt = p.retry_cnt;
  r.rnr_retry = p.rnr_retry;
  r.sq_psn = p.sq_psn;
  r.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &r,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

}  // namespace ocslab::verbs
