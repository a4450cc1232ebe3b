// GIDs as text: the form the RDMA probe and the verbs workload exchange with their peers, and
// the form people read. (The device search and the queue-pair transitions need an RDMA device:
// the virtual lab's Soft-RoCE runs them, vlab_e2e and vlab_workloads.)
#include <catch2/catch.hpp>
#include <cstring>

#include "ocslab/verbs/verbs.h"

using namespace ocslab::verbs;

namespace {
// The GID Soft-RoCE gives 10.10.0.1 on a RoCE v2 port (rdma-core's `ibv_devinfo -v` shows it as
// 0000:0000:0000:0000:0000:ffff:0a0a:0001).
ibv_gid mapped_10_10_0_1() {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = 10;
  g.raw[13] = 10;
  g.raw[14] = 0;
  g.raw[15] = 1;
  return g;
}
}  // namespace

TEST_CASE("verbs: an IPv4-mapped GID as hex, back, and for people", "[verbs]") {
  ibv_gid g = mapped_10_10_0_1();
  CHECK(ipv4_mapped(g));
  CHECK(gid_hex(g) == "00000000000000000000ffff0a0a0001");
  CHECK(gid_text(g) == "10.10.0.1");
  ibv_gid back{};
  REQUIRE(parse_gid("00000000000000000000FFFF0A0A0001", back));  // either case
  CHECK(std::memcmp(back.raw, g.raw, sizeof(g.raw)) == 0);
}

TEST_CASE("verbs: an IPv6 GID is not mapped and reads as IPv6", "[verbs]") {
  ibv_gid g{};
  REQUIRE(parse_gid("fe800000000000005054fffe6c0201aa", g));
  CHECK_FALSE(ipv4_mapped(g));
  CHECK(gid_text(g) == "fe80::5054:fffe:6c02:1aa");
  CHECK(gid_hex(g) == "fe800000000000005054fffe6c0201aa");
  ibv_gid almost = mapped_10_10_0_1();
  almost.raw[9] = 1;  // not ::ffff:0:0/96
  CHECK_FALSE(ipv4_mapped(almost));
}

TEST_CASE("verbs: parse_gid takes exactly 32 hex digits and leaves the GID alone otherwise", "[verbs]") {
  ibv_gid g = mapped_10_10_0_1();
  for (const char* bad : {"", "00", "00000000000000000000ffff0a0a000",      // 31
                          "00000000000000000000ffff0a0a00011",                // 33
                          "00000000000000000000ffff0a0a000g",                 // not hex
                          " 0000000000000000000ffff0a0a0001",                 // a blank
                          "+0000000000000000000ffff0a0a0001",                 // a sign
                          "0x000000000000000000ffff0a0a0001"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(parse_gid(bad, g));
    CHECK(gid_hex(g) == "00000000000000000000ffff0a0a0001");
  }
}

TEST_CASE("verbs: a device search for an interface that does not exist says so", "[verbs]") {
  auto r = find_roce_device("ocslab-none0", 1);
  CHECK(r.outcome == RoceSearch::Outcome::kNoInterface);
  CHECK(r.device.ctx == nullptr);
}
