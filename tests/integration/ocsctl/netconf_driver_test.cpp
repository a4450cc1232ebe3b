// NetconfDriver end to end: a real OpenSSH sshd on loopback runs ocs-testpeer as the
// "netconf" subsystem, so every test goes through SSH, both RFC 6242 framings and both
// optical-switch list names exactly as a lab switch would be reached.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>

#include "ocslab/ocsctl/netconf_driver.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/testing/peer_switch.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using namespace ocslab::ocs;
using namespace std::chrono_literals;

namespace {

// One sshd whose netconf subsystem is ocs-testpeer with `flags`, sharing a state file
// (and its .history) with this test through `peer`.
struct NetconfLab {
  explicit NetconfLab(const std::string& flags = "")
      : state(tmp.path() + "/state.json"),
        peer(32, 32, state),
        sshd(testing::SshdOptions{.force_command = {},
                                  .netconf_subsystem = testing::bin_path("ocs-testpeer") +
                                                       " --proto netconf --state " + state + " " + flags}) {}

  std::string url() const { return "netconf://" + sshd.user() + "@127.0.0.1:" + std::to_string(sshd.port()); }

  DriverOptions options() const {
    DriverOptions o;
    o.identity_file = sshd.client_key();
    o.known_hosts_file = sshd.known_hosts();
    o.reply_timeout = 5000ms;
    o.connect_timeout = 10000ms;
    return o;
  }

  std::unique_ptr<NetconfDriver> driver(DriverOptions o) const {
    return std::make_unique<NetconfDriver>(SwitchUrl::parse(url()), std::move(o));
  }
  std::unique_ptr<NetconfDriver> driver() const { return driver(options()); }

  // Requests the peer received that contain needle.
  std::vector<std::string> received(const std::string& needle) const {
    std::vector<std::string> out;
    for (const auto& h : peer.history()) {
      if (h.find(needle) != std::string::npos) out.push_back(h);
    }
    return out;
  }

  testing::TempDir tmp;
  std::string state;
  testing::PeerSwitch peer;
  testing::SshdFixture sshd;
};

size_t count_commands(const std::vector<CallTiming>& calls, const std::string& prefix) {
  return static_cast<size_t>(std::count_if(calls.begin(), calls.end(),
                                           [&](const CallTiming& c) { return c.command.rfind(prefix, 0) == 0; }));
}

}  // namespace

TEST_CASE("netconf over ssh: info, list, connect, disconnect, power") {
  NetconfLab lab;
  auto d = lab.driver();

  auto info = d->info();
  CHECK(info.vendor == "Polatis");
  CHECK(info.model == "OCS-TESTPEER-32x32-HU1");
  CHECK(info.serial == "TP0064");
  CHECK(info.version == "8.1.2-testpeer");
  CHECK(info.ingress_ports == 32);
  CHECK(info.egress_ports == 32);
  CHECK(d->list().empty());

  d->connect({{1, 33}, {2, 34}});
  CHECK(d->list() == std::vector<Circuit>{{1, 33}, {2, 34}});
  CHECK(lab.peer.circuits() == std::vector<Circuit>{{1, 33}, {2, 34}});
  auto edits = lab.received("edit-config");
  REQUIRE(edits.size() == 1);
  CHECK_THAT(edits[0], Catch::Contains("<pair><ingress>1</ingress><egress>33</egress></pair>"));
  CHECK_THAT(edits[0], Catch::Contains("<running"));
  REQUIRE(d->last_timing());

  auto power = d->power({33, 3});
  REQUIRE(power.size() == 2);
  CHECK(power[0].port == 33);
  CHECK(power[0].dbm == Approx(lab.peer.power_dbm(33)));
  CHECK(power[0].dbm > -10);
  CHECK(power[1].port == 3);
  CHECK(power[1].dbm == Approx(-60.0));
  CHECK_THAT(d->last_timing()->command, Catch::Contains("get opm-power 33,3"));
  CHECK_THAT(lab.received("opm-power").back(), Catch::Contains("<port-id>33</port-id>"));

  // Disconnect by the egress end: the driver finds ingress 2 and deletes that key.
  d->disconnect({34});
  CHECK(d->last_timing()->command == "edit-config cross-connects (merge 0, delete 1)");
  CHECK(d->list() == std::vector<Circuit>{{1, 33}});
  edits = lab.received("edit-config");
  REQUIRE(edits.size() == 2);
  CHECK_THAT(edits[1], Catch::Contains("<pair operation=\"delete\"><ingress>2</ingress></pair>"));

  // Nothing patched on these ports: nothing to send.
  d->disconnect({5, 40});
  CHECK(lab.received("edit-config").size() == 2);
  d->close();
  CHECK_FALSE(d->is_open());
  CHECK(lab.received("close-session").size() == 1);
}

TEST_CASE("netconf apply: a whole reconfiguration is one edit-config") {
  NetconfLab lab;
  auto d = lab.driver();
  d->connect({{1, 33}, {2, 34}, {3, 35}});
  lab.peer.clear_history();

  // Merge: 1 moves to 34, so 1-33 and 2-34 go; 4-36 is new; 3-35 stays.
  auto report = d->apply({{1, 34}, {4, 36}}, ApplyMode::kMerge);
  CHECK(report.diff.remove == std::vector<Circuit>{{1, 33}, {2, 34}});
  CHECK(report.diff.add == std::vector<Circuit>{{1, 34}, {4, 36}});
  CHECK(count_commands(report.calls, "edit-config") == 1);
  CHECK(count_commands(report.calls, "get cross-connects") == 1);
  CHECK(report.calls.size() == 2);
  auto edit = std::find_if(report.calls.begin(), report.calls.end(),
                           [](const CallTiming& c) { return c.command.rfind("edit-config", 0) == 0; });
  REQUIRE(edit != report.calls.end());
  CHECK(edit->op == "reconfigure");
  CHECK(edit->ok);
  CHECK(edit->command == "edit-config cross-connects (merge 2, delete 1)");
  CHECK(lab.received("edit-config").size() == 1);
  CHECK(lab.peer.circuits() == std::vector<Circuit>{{1, 34}, {3, 35}, {4, 36}});

  lab.peer.clear_history();
  report = d->apply({{5, 37}}, ApplyMode::kReplace);
  CHECK(count_commands(report.calls, "edit-config") == 1);
  auto edits = lab.received("edit-config");
  REQUIRE(edits.size() == 1);
  CHECK_THAT(edits[0], Catch::Contains("<ingress>4</ingress>"));
  CHECK_THAT(edits[0], Catch::Contains("<ingress>5</ingress><egress>37</egress>"));
  CHECK(lab.peer.circuits() == std::vector<Circuit>{{5, 37}});

  // Already in place: only the read.
  lab.peer.clear_history();
  report = d->apply({{5, 37}}, ApplyMode::kReplace);
  CHECK(report.diff.empty());
  CHECK(lab.received("edit-config").empty());

  report = d->clear();
  CHECK(count_commands(report.calls, "edit-config") == 1);
  CHECK(lab.peer.circuits().empty());
}

TEST_CASE("netconf framings and optical-switch revisions") {
  struct Variant {
    std::string flags;
    std::string list;
  };
  auto v = GENERATE(Variant{"", "pair"}, Variant{"--netconf-base10", "pair"},
                    Variant{"--netconf-revision 2016-01-01", "pairs"},
                    Variant{"--netconf-base10 --netconf-revision 2017-08-03 --split", "pairs"},
                    Variant{"--netconf-revision 2017-08-04 --split --delay-ms 20", "pair"});
  INFO("peer flags: " << v.flags);
  NetconfLab lab(v.flags);
  auto d = lab.driver();
  d->connect({{7, 39}, {8, 40}});
  CHECK(d->list() == std::vector<Circuit>{{7, 39}, {8, 40}});
  auto report = d->apply({{7, 40}}, ApplyMode::kReplace);
  CHECK(count_commands(report.calls, "edit-config") == 1);
  CHECK(lab.peer.circuits() == std::vector<Circuit>{{7, 40}});
  for (const auto& e : lab.received("edit-config")) {
    CHECK_THAT(e, Catch::Contains("<" + v.list + ">") || Catch::Contains("<" + v.list + " operation="));
    CHECK_THAT(e, !Catch::Contains("<" + std::string(v.list == "pair" ? "pairs" : "pair") + ">"));
  }
  CHECK(d->power({40})[0].dbm > -10);
}

TEST_CASE("netconf rpc-error becomes DenyError with the switch's message") {
  SECTION("deny quirk") {
    NetconfLab lab("--deny-on edit-config");
    auto d = lab.driver();
    try {
      d->connect({{1, 33}});
      FAIL("no DenyError");
    } catch (const DenyError& e) {
      CHECK(e.code() == "operation-failed");
      CHECK(e.text() == "Command refused by switch policy (edit-config)");
      CHECK_THAT(e.what(), Catch::Contains(lab.url()));
      CHECK_THAT(e.what(), Catch::Contains("edit-config cross-connects (merge 1, delete 0)"));
    }
    CHECK(lab.peer.circuits().empty());
    CHECK(d->list().empty());  // the session survives a refusal
    REQUIRE(d->last_timing());
    CHECK(d->last_timing()->ok);
  }
  SECTION("egress in use, no replace") {
    NetconfLab lab;
    auto o = lab.options();
    o.replace_patched = false;
    auto d = lab.driver(o);
    d->connect({{1, 33}});
    try {
      d->connect({{2, 33}});
      FAIL("no DenyError");
    } catch (const DenyError& e) {
      CHECK(e.code() == "in-use");
      CHECK(e.text() == "Port already connected: 33");
    }
    CHECK(lab.peer.circuits() == std::vector<Circuit>{{1, 33}});
  }
  SECTION("egress in use, replace_patched deletes the other pair in the same edit") {
    NetconfLab lab;
    auto d = lab.driver();
    d->connect({{1, 33}});
    lab.peer.clear_history();
    d->connect({{2, 33}});
    CHECK(lab.peer.circuits() == std::vector<Circuit>{{2, 33}});
    auto edits = lab.received("edit-config");
    REQUIRE(edits.size() == 1);
    CHECK_THAT(edits[0], Catch::Contains("<pair operation=\"delete\"><ingress>1</ingress></pair>"));
  }
}

TEST_CASE("netconf allow-list refusal sends nothing") {
  NetconfLab lab;
  auto o = lab.options();
  o.allow = PortSet::parse("1..4,33..36");
  auto d = lab.driver(o);
  d->connect({{1, 33}});
  lab.peer.clear_history();
  CHECK_THROWS_AS(d->connect({{5, 37}}), PortError);
  CHECK_THROWS_WITH(d->connect({{2, 40}}), Catch::Contains("port 40 is outside the allow-list"));
  CHECK(lab.received("edit-config").empty());
  // A circuit whose far end is not ours cannot be removed through our end either.
  {
    auto free = lab.driver();
    free->connect({{2, 40}});
  }
  lab.peer.clear_history();
  CHECK_THROWS_AS(d->disconnect({2}), PortError);
  CHECK(lab.received("edit-config").empty());
  CHECK(lab.peer.circuits() == std::vector<Circuit>{{1, 33}, {2, 40}});
}

TEST_CASE("netconf session dropped mid-rpc: ConnectionError, then the next call reconnects") {
  NetconfLab lab("--drop-on edit-config");
  auto d = lab.driver();
  CHECK(d->list().empty());
  try {
    d->connect({{1, 33}});
    FAIL("no ConnectionError");
  } catch (const ConnectionError& e) {
    CHECK_THAT(e.what(), Catch::Contains(lab.url()));
    CHECK_THAT(e.what(), Catch::Contains("edit-config cross-connects"));
  }
  CHECK_FALSE(d->is_open());
  REQUIRE(d->last_timing());
  CHECK_FALSE(d->last_timing()->ok);
  CHECK(d->list().empty());
  CHECK(d->is_open());
  CHECK(d->info().ingress_ports == 32);
}

TEST_CASE("netconf reply timeout, then the next call works") {
  NetconfLab lab("--never-reply-to opm-power");
  auto o = lab.options();
  o.reply_timeout = 700ms;
  auto d = lab.driver(o);
  d->open();
  auto t0 = std::chrono::steady_clock::now();
  try {
    d->power({33});
    FAIL("no TimeoutError");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("no reply to <get> (message-id"));
    CHECK_THAT(e.what(), Catch::Contains("within 700 ms"));
    CHECK_THAT(e.what(), Catch::Contains(lab.url()));
  }
  auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= 700ms);
  CHECK(waited < 5s);
  d->connect({{3, 35}});
  CHECK(d->list() == std::vector<Circuit>{{3, 35}});
}

TEST_CASE("netconf garbage from the switch is a ProtocolError, then the next call works") {
  NetconfLab lab("--garbage-on opm-power");
  auto d = lab.driver();
  CHECK_THROWS_AS(d->power({33}), ProtocolError);
  CHECK(d->list().empty());
}

TEST_CASE("netconf notifications reach the event handler") {
  NetconfLab lab("--autonomous");
  auto o = lab.options();
  std::vector<OcsEvent> events;
  o.on_event = [&](const OcsEvent& ev) { events.push_back(ev); };
  auto d = lab.driver(o);
  d->connect({{1, 33}});
  CHECK(d->list() == std::vector<Circuit>{{1, 33}});
  REQUIRE(events.size() == 4);  // one per reply: info, the connect's read, its edit, the list
  CHECK_THAT(events[0].text, Catch::Contains("port-status-change"));
}

TEST_CASE("netconf refuses a host whose key is not the one in known_hosts") {
  NetconfLab lab;
  testing::run_command("ssh-keygen -q -t ed25519 -N '' -f " + lab.tmp.path() + "/other_key");
  std::string other = testing::run_command("cat " + lab.tmp.path() + "/other_key.pub");
  std::string known = lab.tmp.path() + "/wrong_known_hosts";
  std::ofstream(known) << "[127.0.0.1]:" << lab.sshd.port() << " " << other;
  auto o = lab.options();
  o.known_hosts_file = known;
  auto d = lab.driver(o);
  try {
    d->open();
    FAIL("connected despite a wrong host key");
  } catch (const ConnectionError& e) {
    CHECK_THAT(e.what(), Catch::Contains("host key"));
    CHECK_THAT(e.what(), Catch::Contains(lab.url()));
  }
  CHECK(lab.peer.history().empty());
}
