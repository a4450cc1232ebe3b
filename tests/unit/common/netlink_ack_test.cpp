// The ack reader on acks the kernel sent (tests/fuzz/corpus/netlink_ack/: replies of Linux 6.x to
// RTM_NEWLINK with an unknown link kind and RTM_NEWROUTE through a missing device, with and
// without NETLINK_CAP_ACK, captured in a namespace of their own), and on broken variants of them:
// every read stays inside nlmsg_len.
#include <linux/netlink.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ocslab/common/netlink_ack.h"
#include "ocslab/testing/source_dir.h"

namespace {

std::vector<char> capture(const std::string& name) {
  std::string path = ocslab::testing::source_dir() + "/tests/fuzz/corpus/netlink_ack/" + name;
  std::ifstream in(path, std::ios::binary);
  INFO(path);
  REQUIRE(in);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Copied into aligned storage, as recv() fills a buffer.
  REQUIRE(bytes.size() >= sizeof(nlmsghdr));
  return bytes;
}

const nlmsghdr* header(std::vector<char>& b) { return reinterpret_cast<const nlmsghdr*>(b.data()); }
nlmsghdr* mutable_header(std::vector<char>& b) { return reinterpret_cast<nlmsghdr*>(b.data()); }

}  // namespace

using ocslab::netlink::ack_error;
using ocslab::netlink::extack_message;
using ocslab::netlink::kernel_text;

TEST_CASE("netlink acks: the kernel's refusals read back with their extended-ack text", "[netlink]") {
  for (const char* name : {"newlink_unknown_kind_capped", "newlink_unknown_kind_echoed"}) {
    INFO(name);
    auto b = capture(name);
    REQUIRE(header(b)->nlmsg_type == NLMSG_ERROR);
    CHECK(ack_error(header(b)) == EOPNOTSUPP);
    CHECK(extack_message(header(b)) == "Unknown device type");
  }
  for (const char* name : {"newroute_no_device_capped", "newroute_no_device_echoed"}) {
    INFO(name);
    auto b = capture(name);
    CHECK(ack_error(header(b)) == ENODEV);
    CHECK(extack_message(header(b)).empty());  // the kernel attached no text to this one
  }
  CHECK(kernel_text(EOPNOTSUPP, "Unknown device type") ==
        std::string(std::strerror(EOPNOTSUPP)) + " (kernel: Unknown device type)");
  CHECK(kernel_text(ENODEV, "") == std::strerror(ENODEV));
}

TEST_CASE("netlink acks: an ACK is error 0 with no text", "[netlink]") {
  auto b = capture("newroute_no_device_capped");
  int zero = 0;
  std::memcpy(b.data() + NLMSG_HDRLEN, &zero, sizeof(zero));
  CHECK(ack_error(header(b)) == 0);
  CHECK(extack_message(header(b)).empty());
}

TEST_CASE("netlink acks: broken messages give EBADMSG or no text, never a read past nlmsg_len", "[netlink]") {
  SECTION("too short for a struct nlmsgerr") {
    auto b = capture("newlink_unknown_kind_capped");
    mutable_header(b)->nlmsg_len = NLMSG_LENGTH(sizeof(nlmsgerr)) - 1;
    CHECK(ack_error(header(b)) == EBADMSG);
    CHECK(extack_message(header(b)).empty());
  }
  SECTION("an error that is no -errno (INT_MIN has no negation: found by netlink_ack_fuzz)") {
    for (int bad : {INT32_MIN, -4096, 1, 95}) {
      INFO(bad);
      auto b = capture("newlink_unknown_kind_capped");
      std::memcpy(b.data() + NLMSG_HDRLEN, &bad, sizeof(bad));
      CHECK(ack_error(header(b)) == EBADMSG);
    }
  }
  SECTION("cut inside the attribute") {
    for (const char* name : {"newlink_unknown_kind_capped", "newlink_unknown_kind_echoed"}) {
      auto b = capture(name);
      uint32_t full = header(b)->nlmsg_len;
      for (uint32_t len = NLMSG_LENGTH(sizeof(nlmsgerr)); len < full; ++len) {
        INFO(name << " cut to " << len);
        mutable_header(b)->nlmsg_len = len;
        // The text attribute ends the message: any cut leaves it incomplete, so no text.
        CHECK(extack_message(header(b)).empty());
      }
    }
  }
  SECTION("an attribute longer than the message") {
    auto b = capture("newlink_unknown_kind_capped");
    size_t attr = NLMSG_HDRLEN + sizeof(nlmsgerr);  // capped: the attributes follow at once
    uint16_t len = 0xfff0;
    std::memcpy(b.data() + attr, &len, sizeof(len));
    CHECK(extack_message(header(b)).empty());
  }
  SECTION("text without its NUL: bounded by the attribute") {
    auto b = capture("newlink_unknown_kind_capped");
    b.back() = 'X';
    CHECK(extack_message(header(b)) == "Unknown device typeX");
  }
  SECTION("an echoed request whose length reaches past the message") {
    auto b = capture("newlink_unknown_kind_echoed");
    uint32_t huge = 0x7ffffff0;
    std::memcpy(b.data() + NLMSG_HDRLEN + offsetof(nlmsgerr, msg) + offsetof(nlmsghdr, nlmsg_len), &huge,
                sizeof(huge));
    CHECK(extack_message(header(b)).empty());
    uint32_t tiny = 3;  // shorter than the header it claims to be
    std::memcpy(b.data() + NLMSG_HDRLEN + offsetof(nlmsgerr, msg) + offsetof(nlmsghdr, nlmsg_len), &tiny,
                sizeof(tiny));
    CHECK(extack_message(header(b)).empty());
  }
}
