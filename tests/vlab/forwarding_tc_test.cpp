// ocslab's tc programming against a real cls_flower/act_pedit kernel: one virtual-lab guest
// (Debian's 6.1 kernel) with veth pairs made inside it. The same relay rule is installed with
// the `tc` command (rule_plan's render() + the cookie) and through TcNetlink (the
// vlab_forwarding_tc tool, run in the guest); `tc -j filter show` must read both back the
// same, list_owned() must decode both into the rule, a frame must be rewritten and redirected
// and counted, refusals must carry the kernel's extack, and foreign filters stay untouched.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "lab_fixture.h"
#include "ocslab/forwarding/rule_plan.h"

using namespace vlab_test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// The filter entries (not the per-priority headers) of `tc -j filter show`, by pref.
std::map<int, json> filters_by_pref(const std::string& text) {
  std::map<int, json> out;
  for (auto& e : json::parse(text)) {
    if (e.contains("options")) out[e.at("pref").get<int>()] = e;
  }
  return out;
}

// What may differ between two installs of the same rule: the priority and the action
// indexes the kernel hands out. (The handle is 1 for both: see tc_messages.h.)
json without_identity(json e) {
  e.erase("pref");
  for (auto& a : e["options"]["actions"]) a.erase("index");
  return e;
}

std::vector<json> lines(const std::string& text) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!line.empty()) out.push_back(json::parse(line));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE(
    "tc programming in a guest: ocslab's filter reads back like tc's, counts, refuses with extack, spares "
    "foreign filters",
    "[vlab][forwarding]") {
  Lab lab(kSharedFour, 120s, Sharing::kShared);  // h1's kernel; the test's own veths
  // A folder per run: a guest may keep serving an old file from its 9p cache.
  std::string dir = lab.state().dir + "/tc-" + std::to_string(::getpid());
  fs::create_directories(dir);
  fs::copy_file(test_tool_path("vlab_forwarding_tc"), dir + "/vlab_forwarding_tc",
                fs::copy_options::overwrite_existing);
  const std::string tool = dir + "/vlab_forwarding_tc";

  // tx0 -> if2x: frames sent on tx0 arrive on the relay's if2x ingress. out0 -> out1: the
  // redirect target, whose peer sees what the relay sent.
  lab.run("h1",
          "ip link add tx0 type veth peer name if2x && ip link add out0 type veth peer name out1 && "
          "for d in tx0 if2x out0 out1; do ip link set $d up; done && ip addr add 192.168.77.1/24 dev tx0 && "
          "ip neigh replace 192.168.77.9 lladdr $(cat /sys/class/net/if2x/address) dev tx0 nud permanent");

  // clsact through ocslab.
  CHECK(lab.run("h1", tool + " clsact-has if2x") == "no\n");
  lab.run("h1", tool + " clsact-add if2x");
  CHECK(lab.run("h1", tool + " clsact-has if2x") == "yes\n");
  CHECK_THAT(lab.run("h1", "tc qdisc show dev if2x"), Contains("qdisc clsact ffff: parent ffff:fff1"));

  forwarding::FilterRule rule;
  rule.dev = "if2x";
  rule.dst = "192.168.77.9/32";
  rule.set_eth_dst = "02:11:22:33:44:55";
  rule.redirect_dev = "out0";

  // The same rule twice: through ocslab at the first ocslab prio (so it matches first), and
  // with the plan's own tc command, plus the cookie, at the next.
  rule.prio = forwarding::kTcPrioFirst;
  lab.run("h1", tool + " add if2x 20224 192.168.77.9/32 02:11:22:33:44:55 out0");
  forwarding::FilterRule by_tc = rule;
  by_tc.prio = forwarding::kTcPrioFirst + 1;
  std::string cmd = forwarding::render(by_tc);
  const std::string ck = std::string(" cookie ") + forwarding::kActionCookie;
  cmd.replace(cmd.find(" pipe action mirred"), 19, " pipe" + ck + " action mirred");
  lab.run("h1", cmd + ck);

  auto shown = filters_by_pref(lab.run("h1", "tc -j filter show dev if2x ingress"));
  REQUIRE(shown.count(20224));
  REQUIRE(shown.count(20225));
  INFO("ocslab: " << shown[20224].dump(1) << "\ntc: " << shown[20225].dump(1));
  CHECK(without_identity(shown[20224]) == without_identity(shown[20225]));
  // And what that form is, field by field.
  const json& o = shown[20224]["options"];
  CHECK(shown[20224]["protocol"] == "ip");
  CHECK(shown[20224]["kind"] == "flower");
  CHECK(shown[20224]["chain"] == 0);
  CHECK(o["handle"] == 1);
  CHECK(o["keys"] == json{{"eth_type", "ipv4"}, {"dst_ip", "192.168.77.9"}});
  CHECK(o["skip_hw"] == true);
  REQUIRE(o["actions"].size() == 2);
  const json& pedit = o["actions"][0];
  CHECK(pedit["kind"] == "pedit");
  CHECK(pedit["control_action"]["type"] == "pipe");
  CHECK(pedit["keys"] == json::parse(R"([{"htype":"eth","offset":0,"cmd":"set","val":"2112233","mask":"0"},
                                          {"htype":"eth","offset":4,"cmd":"set","val":"44550000","mask":"ffff"}])"));
  CHECK(pedit["cookie"] == forwarding::kActionCookie);
  const json& mirred = o["actions"][1];
  CHECK(mirred["kind"] == "mirred");
  CHECK(mirred["mirred_action"] == "redirect");
  CHECK(mirred["direction"] == "egress");
  CHECK(mirred["to_dev"] == "out0");
  CHECK(mirred["control_action"]["type"] == "stolen");
  CHECK(mirred["cookie"] == forwarding::kActionCookie);

  // list_owned() decodes both back into the rule.
  auto listed = lines(lab.run("h1", tool + " list if2x"));
  REQUIRE(listed.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO(listed[i].dump());
    CHECK(listed[i]["prio"] == 20224 + static_cast<int>(i));
    CHECK(listed[i]["dev"] == "if2x");
    CHECK(listed[i]["chain"] == 0);
    CHECK(listed[i]["dst"] == rule.dst);
    CHECK(listed[i]["set_eth_dst"] == rule.set_eth_dst);
    CHECK(listed[i]["redirect_dev"] == rule.redirect_dev);
    CHECK(listed[i]["cookie"] == forwarding::kActionCookie);
    CHECK(listed[i]["problem"] == "");
    CHECK(listed[i]["packets"] == 0);
  }

  // A frame for 192.168.77.9 sent to if2x's MAC leaves out0 with the new destination MAC
  // (seen on out1 by a packet socket), and ocslab's filter counts it; tc's, behind it, not.
  // The capture says when its socket is bound (/tmp/cap.ready): Python alone takes 1.3 s to start
  // in a TCG guest, more on a busy machine, so a fixed wait lost the first frames. The pings go
  // once it is bound; the result is awaited the same way (0.1 s polls, 20 s at most each).
  std::string capture =
      "/usr/bin/python3 -c \"import socket; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, "
      "socket.htons(0x0800)); s.bind(('out1', 0)); s.settimeout(20); open('/tmp/cap.ready', 'w').close(); "
      "print(s.recv(2000)[:6].hex(), flush=True)\"";
  std::string out = lab.run(
      "h1", "rm -f /tmp/cap.ready /tmp/cap.txt; (" + capture +
                " > /tmp/cap.txt &) ; for i in $(seq 200); do [ -e /tmp/cap.ready ] && break; sleep 0.1; done; "
                "ping -c 3 -i 0.3 -W 1 192.168.77.9 >/dev/null; "
                "for i in $(seq 200); do [ -s /tmp/cap.txt ] && break; sleep 0.1; done; cat /tmp/cap.txt");
  CHECK(out == "021122334455\n");
  listed = lines(lab.run("h1", tool + " list if2x"));
  REQUIRE(listed.size() == 2);
  CHECK(listed[0]["packets"] == 3);
  CHECK(listed[0]["bytes"] == 3 * 84);  // IP packets: ingress counts start after the Ethernet header
  CHECK(listed[1]["packets"] == 0);
  CHECK_THAT(lab.run("h1", "tc -s filter show dev if2x ingress prio 20224"), Contains("Sent 252 bytes 3 pkt"));

  // Foreign filters: one outside ocslab's range, one inside it without the cookie.
  lab.run("h1",
          "tc filter add dev if2x ingress prio 100 protocol ip flower dst_ip 192.168.1.1 action drop && "
          "tc filter add dev if2x ingress prio 20230 protocol ip flower dst_ip 192.168.1.2 action drop");
  auto before = filters_by_pref(lab.run("h1", "tc -j filter show dev if2x ingress"));
  CHECK(lines(lab.run("h1", tool + " list if2x")).size() == 2);  // never listed

  // Kernel refusals, with extack. A batch whose second rule clashes with the filter at prio
  // 20225 (handle 1 exists, NLM_F_EXCL): refused as a whole, the first rule removed again.
  auto r = lab.exec("h1", tool +
                              " add if2x 20229 192.168.77.10/32 02:11:22:33:44:56 out0 "
                              "if2x 20225 192.168.77.11/32 02:11:22:33:44:57 out0");
  INFO(r.err);
  CHECK(r.exit_status == 3);
  CHECK_THAT(r.err, Contains("errno=17") && Contains("extack='Filter already exists'") &&
                        Contains("filter dev if2x prio 20225 dst 192.168.77.11/32") && Contains("removed again"));
  CHECK(lines(lab.run("h1", tool + " list if2x")).size() == 2);
  // No clsact on the device.
  r = lab.exec("h1", tool + " add out1 20224 192.168.77.10/32 02:11:22:33:44:56 out0");
  INFO(r.err);
  CHECK(r.exit_status == 3);
  CHECK_THAT(r.err, Contains("errno=22") && Contains("extack='Parent Qdisc"));

  // Deleting: a prio holding a foreign filter is refused, ocslab's own goes, the rest stays.
  r = lab.exec("h1", tool + " del if2x 20230 192.168.1.2/32 02:00:00:00:00:01 out0");
  CHECK(r.exit_status == 2);
  CHECK_THAT(r.err, Contains("not ocslab's"));
  r = lab.exec("h1", tool + " clsact-del if2x");
  CHECK(r.exit_status == 2);
  CHECK_THAT(r.err, Contains("2 filter(s) that are not ocslab's") && Contains("prio 100") && Contains("prio 20230"));
  lab.run("h1", tool + " del if2x 20224 192.168.77.9/32 02:11:22:33:44:55 out0");
  auto after = filters_by_pref(lab.run("h1", "tc -j filter show dev if2x ingress"));
  CHECK_FALSE(after.count(20224));
  for (int pref : {100, 20225, 20230}) {
    REQUIRE(after.count(pref));
    CHECK(after[pref] == before[pref]);
  }
  listed = lines(lab.run("h1", tool + " list if2x"));
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["prio"] == 20225);

  // Once only ocslab's filters are left, the clsact goes (and they with it).
  lab.run("h1", "tc filter del dev if2x ingress prio 100 && tc filter del dev if2x ingress prio 20230");
  lab.run("h1", tool + " clsact-del if2x");
  CHECK(lab.run("h1", tool + " clsact-has if2x") == "no\n");
  fs::remove_all(dir);
}
