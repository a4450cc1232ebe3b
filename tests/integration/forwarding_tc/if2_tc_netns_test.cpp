// if2 provisioning and the tc programmer's qdisc side on this machine's own kernel, in a
// network namespace of the test's own (macvlan, veth, clsact and cls_u32 exist here; flower
// and pedit do not: their checks run in the virtual lab, tests/vlab/forwarding_tc_test.cpp).
// Needs root.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/if2_link.h"
#include "ocslab/forwarding/route_netlink.h"
#include "ocslab/forwarding/tc_netlink.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using namespace ocslab::forwarding;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

class Netns {
 public:
  explicit Netns(const std::string& tag) : name_("fwdtc-" + tag + "-" + std::to_string(::getpid())) {
    testing::run_command("ip netns add " + name_);
  }
  ~Netns() { std::system(("ip netns del " + name_ + " >/dev/null 2>&1").c_str()); }
  const std::string& name() const { return name_; }
  std::string ip(const std::string& args) const { return testing::run_command("ip -n " + name_ + " " + args); }
  std::string tc(const std::string& args) const {
    return testing::run_command("ip netns exec " + name_ + " tc " + args);
  }

  // Runs f in a thread that has entered the namespace (netlink sockets made there stay
  // there); returns its result or rethrows what it threw.
  template <typename F>
  auto in(F f) const {
    using R = decltype(f());
    std::exception_ptr error;
    std::optional<R> result;
    std::thread t([&] {
      try {
        int fd = ::open(("/var/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) throw Error("cannot enter netns " + name_);
        ::close(fd);
        result = f();
      } catch (...) {
        error = std::current_exception();
      }
    });
    t.join();
    if (error) std::rethrow_exception(error);
    return *result;
  }

 private:
  std::string name_;
};

json link_json(const Netns& ns, const std::string& dev) {
  return json::parse(ns.ip("-d -j link show dev " + dev)).at(0);
}

}  // namespace

TEST_CASE("if2 macvlan: created to spec, idempotent, repaired, never touching a foreign interface") {
  Netns ns("if2");
  ns.ip("link add eth1 type veth peer name eth1peer");
  ns.ip("link add eth2 type veth peer name eth2peer");
  MacvlanSpec spec{"eth1v", "eth1", "02:00:00:00:01:10"};

  CHECK(ns.in([&] { return If2Links().ensure_macvlan(spec); }) == LinkChange::created);
  json l = link_json(ns, "eth1v");
  CHECK(l["address"] == "02:00:00:00:01:10");
  CHECK(l["link"] == "eth1");
  CHECK(l["linkinfo"]["info_kind"] == "macvlan");
  CHECK(l["linkinfo"]["info_data"]["mode"] == "private");
  CHECK_THAT(l["flags"].dump(), Contains("\"UP\""));
  CHECK(json::parse(ns.ip("-j addr show dev eth1v")).at(0)["addr_info"].empty());  // not even IPv6 link-local

  CHECK(ns.in([&] { return If2Links().ensure_macvlan(spec); }) == LinkChange::unchanged);

  // Someone changed it: ensure puts it back.
  ns.ip("link set eth1v down");
  ns.ip("link set eth1v address 02:00:00:00:99:99 type macvlan mode bridge");
  CHECK(ns.in([&] { return If2Links().ensure_macvlan(spec); }) == LinkChange::updated);
  l = link_json(ns, "eth1v");
  CHECK(l["address"] == "02:00:00:00:01:10");
  CHECK(l["linkinfo"]["info_data"]["mode"] == "private");
  CHECK_THAT(l["flags"].dump(), Contains("\"UP\""));

  // The same name over another parent, or another kind of device: refused, left alone.
  MacvlanSpec other{"eth1v", "eth2", "02:00:00:00:01:10"};
  CHECK_THROWS_WITH(
      ns.in([&] { return If2Links().ensure_macvlan(other); }),
      Contains("refusing to reconfigure the existing interface 'eth1v'") && Contains("not a macvlan of eth2"));
  CHECK_THROWS_WITH(ns.in([&] { return If2Links().delete_macvlan(other); }), Contains("refusing to delete"));
  CHECK(link_json(ns, "eth1v")["link"] == "eth1");
  MacvlanSpec veth{"eth2peer", "eth2", "02:00:00:00:02:10"};
  std::string mac_before = link_json(ns, "eth2peer")["address"];
  CHECK_THROWS_WITH(ns.in([&] { return If2Links().ensure_macvlan(veth); }), Contains("it is a veth"));
  CHECK_THROWS_WITH(ns.in([&] { return If2Links().delete_macvlan(veth); }), Contains("it is a veth"));
  CHECK(link_json(ns, "eth2peer")["address"] == mac_before);

  // Bad input names the if2.
  CHECK_THROWS_WITH(ns.in([&] {
    return If2Links().ensure_macvlan({"eth3v", "eth3", "02:00:00:00:03:10"});
  }),
                    Contains("if2 eth3v: parent device 'eth3' does not exist"));
  CHECK_THROWS_WITH(ns.in([&] {
    return If2Links().ensure_macvlan({"eth2v", "eth2", "02:00:00"});
  }),
                    Contains("if2 eth2v: '02:00:00' is not a MAC address"));

  CHECK(ns.in([&] { return If2Links().delete_macvlan(spec); }) == LinkChange::deleted);
  CHECK(ns.in([&] { return If2Links().delete_macvlan(spec); }) == LinkChange::absent);
  CHECK_THAT(ns.ip("link show"), !Contains("eth1v"));
}

TEST_CASE("if2 macvlans of a fabric host: one per port, over its if1, with the fabric's MAC") {
  Fabric f = load_fabric_file(std::string(OCSLAB_TEST_SOURCE_DIR) + "/forwarding/examples/ring4.yaml");
  auto specs = if2_macvlans(f, "h2");
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "eth1v");
  CHECK(specs[0].parent == "eth1");
  CHECK(specs[0].mac == "02:00:00:00:02:10");
  CHECK(specs[1].name == "eth2v");
  CHECK(specs[1].parent == "eth2");
  CHECK_THROWS_WITH(if2_macvlans(f, "h9"), Contains("no host 'h9'"));

  // And all of them made in a namespace with the host's if1s.
  Netns ns("fab");
  ns.ip("link add eth1 type veth peer name p1");
  ns.ip("link add eth2 type veth peer name p2");
  for (const auto& s : specs) CHECK(ns.in([&] { return If2Links().ensure_macvlan(s); }) == LinkChange::created);
  CHECK(link_json(ns, "eth2v")["address"] == "02:00:00:00:02:11");
}

TEST_CASE("routes: the engine installs every route with ocslab's protocol, whatever the rule says", "[plan-check]") {
  // A route of another protocol is never counted as ocslab's: rollback and clear would leave it.
  Netns ns("proto");
  ns.ip("link add eth1 type veth peer name p1");
  ns.ip("addr add 10.0.0.10/24 dev eth1");
  ns.ip("link set eth1 up");
  RouteRule boot{"10.0.0.77/32", "eth1", "10.0.0.10", 3};
  RouteRule replaced{"10.0.0.78/32", "eth1", "10.0.0.10", 3};
  ns.in([&] {
    RouteNetlink nl;
    nl.apply({RouteRequest{ChangeOp::add, boot}, RouteRequest{ChangeOp::replace, replaced}});
    return 0;
  });
  json routes = json::parse(ns.ip("-j route show table main"));
  int seen = 0;
  for (const auto& r : routes)
    if (r["dst"] == "10.0.0.77" || r["dst"] == "10.0.0.78") {
      INFO(r.dump());
      CHECK(r["protocol"] == std::to_string(kRouteProtocol));
      ++seen;
    }
  CHECK(seen == 2);
}

TEST_CASE("clsact on this kernel: add, has, foreign filters block its removal, flower refusal carries extack") {
  Netns ns("tc");
  ns.ip("link add eth1v type veth peer name tx0");
  ns.ip("link set eth1v up");
  CHECK_FALSE(ns.in([] { return TcNetlink().has_clsact("eth1v"); }));
  ns.in([] {
    TcNetlink().add_clsact("eth1v");
    return 0;
  });
  CHECK(ns.in([] { return TcNetlink().has_clsact("eth1v"); }));
  CHECK_THAT(ns.tc("qdisc show dev eth1v"), Contains("qdisc clsact ffff: parent ffff:fff1"));
  // A second add: the kernel's refusal, as KernelError.
  try {
    ns.in([] {
      TcNetlink().add_clsact("eth1v");
      return 0;
    });
    FAIL("a second clsact was accepted");
  } catch (const KernelError& e) {
    CHECK(e.err() == EEXIST);
    CHECK_THAT(e.what(), Contains("add clsact on eth1v"));
  }

  // A foreign filter in ocslab's prio range (u32 + mirred: this kernel has no flower and no gact): never listed,
  // and the clsact is not removed from under it.
  ns.tc(
      "filter add dev eth1v ingress prio 20224 protocol ip u32 match ip dst 10.0.0.1/32 action mirred egress redirect "
      "dev tx0");
  CHECK(ns.in([] { return TcNetlink().list_owned("eth1v").size(); }) == 0);
  CHECK_THROWS_WITH(ns.in([] {
    TcNetlink().delete_clsact("eth1v");
    return 0;
  }),
                    Contains("refusing to delete the clsact of eth1v") && Contains("prio 20224") && Contains("(u32)"));
  CHECK_THAT(ns.tc("filter show dev eth1v ingress"), Contains("u32"));

  // No cls_flower in this kernel: the refusal names the rule and carries the extack.
  FilterRule r;
  r.dev = "eth1v";
  r.prio = 20300;
  r.dst = "10.0.0.3/32";
  r.set_eth_dst = "02:00:00:00:03:00";
  r.redirect_dev = "tx0";
  try {
    ns.in([&] {
      TcNetlink().add_filters({r});
      return 0;
    });
    FAIL("flower accepted on a kernel said to lack it");
  } catch (const KernelError& e) {
    INFO(e.what());
    CHECK_THAT(e.what(), Contains("filter dev eth1v prio 20300 dst 10.0.0.3/32"));
    CHECK_FALSE(e.extack().empty());
    CHECK_THAT(e.what(), Contains("(kernel: " + e.extack() + ")"));
  }
  // Bad rules are refused before anything is sent.
  r.prio = 100;
  CHECK_THROWS_WITH(ns.in([&] {
    TcNetlink().add_filters({r});
    return 0;
  }),
                    Contains("outside ocslab's tag"));
  r.prio = 20300;
  r.redirect_dev = "nope0";
  CHECK_THROWS_WITH(ns.in([&] {
    TcNetlink().add_filters({r});
    return 0;
  }),
                    Contains("no network device 'nope0'"));

  ns.tc("filter del dev eth1v ingress prio 20224");
  ns.in([] {
    TcNetlink().delete_clsact("eth1v");
    return 0;
  });
  CHECK_FALSE(ns.in([] { return TcNetlink().has_clsact("eth1v"); }));
}
