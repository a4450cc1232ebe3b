// The standalone controller's YAML file: a complete file loads, and every mistake is refused
// with file:line:col and the offending value.
#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "ocslab/phase/controller_config.h"

using namespace ocslab;
using namespace ocslab::phase;

namespace {

ControllerConfig parse(const std::string& text) { return parse_controller_config(load_yaml_string(text, "c.yaml")); }

const char* kGood = R"(job: gpt
pp: 2
dims: [{name: dp, size: 2}]
initial: "01"
listen: 0.0.0.0:7100
ack_timeout_ms: 500
max_retries: 1
rails:
  - name: rail0
    switch: tl1://admin@127.0.0.1:3082
    allow: 1..8,65..72
    slots: [1-65, 2-66, 3-67, 4-68, 5-69]
token: 0123456789abcdef0123
)";

}  // namespace

TEST_CASE("a controller file loads with its defaults", "[phase][config]") {
  auto c = parse(kGood);
  CHECK(c.layout.job == "gpt");
  CHECK(c.layout.ranks() == 4);
  CHECK(c.initial.str() == "01");
  CHECK(c.listen_host == "0.0.0.0");
  CHECK(c.listen_port == 7100);
  CHECK(c.token == "0123456789abcdef0123");
  CHECK(c.ack_timeout_ms == 500);
  CHECK(c.max_retries == 1);
  REQUIRE(c.rails.size() == 1);
  CHECK(c.rails[0].slots.size() == 5);  // one spare for masking
  CHECK(c.rails[0].slots[4] == Slot{5, 69});
  auto d = parse(
      "job: j\npp: 3\ndims: [{name: dp, size: 2}]\nrails: [{name: r, switch: 'tl1://admin@h', slots: [1-9, 2-10, 3-11, "
      "4-12, 5-13, 6-14]}]\n");
  CHECK(d.initial.str() == "111");
  CHECK(d.ack_timeout_ms == 10000);
}

TEST_CASE("controller file mistakes name file:line:col", "[phase][config]") {
  auto bad = [](std::string from, std::string to) {
    std::string t = kGood;
    auto pos = t.find(from);
    REQUIRE(pos != std::string::npos);
    return t.replace(pos, from.size(), to);
  };
  CHECK_THROWS_WITH(
      parse(bad("initial: \"01\"", "initial: \"02\"")),
      Catch::Contains("c.yaml:4:10: job gpt: topo_id '02': digit 2 at stage 1 names a dimension the job lacks"));
  CHECK_THROWS_WITH(parse(bad("listen: 0.0.0.0:7100", "listen: 7100")),
                    Catch::Contains("c.yaml:5:9: listen '7100' is not HOST:PORT"));
  CHECK_THROWS_WITH(parse(bad("3-67", "3-66")),
                    Catch::Contains("c.yaml:12:") && Catch::Contains("port 66 is in two slots of rail rail0"));
  CHECK_THROWS_WITH(parse(bad("5-69", "9-69")),
                    Catch::Contains("port 9 of rail rail0 is outside its allow-list 1..8,65..72"));
  CHECK_THROWS_WITH(parse(bad("[1-65, 2-66, 3-67, 4-68, 5-69]", "[1-65, 2-66]")),
                    Catch::Contains("rail rail0 has 2 slots but job gpt has 4 ranks"));
  CHECK_THROWS_WITH(parse(bad("switch: tl1", "switch: ftp")), Catch::Contains("c.yaml:10:13:"));
  CHECK_THROWS_WITH(parse(bad("max_retries: 1", "retries: 1")), Catch::Contains("unknown key 'retries'"));
  CHECK_THROWS_WITH(parse(bad("pp: 2", "pp: 0")), Catch::Contains("c.yaml:2:5: job gpt: pp = 0"));
  CHECK_THROWS_WITH(parse(bad("ack_timeout_ms: 500", "ack_timeout_ms: 0")),
                    Catch::Contains("ack_timeout_ms must be 1..3600000"));
  CHECK_THROWS_WITH(parse(bad("1-65,", "1:65,")), Catch::Contains("bad circuit '1:65'"));
}

TEST_CASE("the controller's token: loopback by default, a token for any other address", "[phase][config]") {
  std::string text = kGood;
  auto without = text.substr(0, text.find("token:"));
  CHECK_THROWS_WITH(parse(without), Catch::Contains("c.yaml:5:9: listen 0.0.0.0: a controller reachable from other "
                                                    "machines needs token_file:"));
  auto loopback = without;
  loopback.replace(loopback.find("0.0.0.0"), 7, "127.0.0.1");
  auto c = parse(loopback);
  CHECK(c.token.empty());
  CHECK(c.token_file.empty());
  auto no_listen = without;
  no_listen.erase(no_listen.find("listen: 0.0.0.0:7100\n"), 21);
  CHECK(parse(no_listen).listen_host == "127.0.0.1");
  CHECK_THROWS_WITH(parse(without + "token: short\n"), Catch::Contains("token must be at least 16 characters"));
  CHECK_THROWS_WITH(parse(text + "token_file: t\n"), Catch::Contains("token and token_file exclude each other"));
  auto f = parse(without + "token_file: secrets/ctl.token\n");
  CHECK(f.token_file == "secrets/ctl.token");  // relative to c.yaml's folder (here: none)
  auto g = parse_controller_config(load_yaml_string(without + "token_file: ctl.token\n", "/etc/ocslab/c.yaml"));
  CHECK(g.token_file == "/etc/ocslab/ctl.token");
  CHECK_THROWS_WITH(controller_token(g), Catch::Contains("controller token file /etc/ocslab/ctl.token"));
}

// token: inline makes the controller's file a secret file: refused unless it is the user's own
// and closed to group and others, as a token_file must be.
TEST_CASE("the controller's token inline: the file must be mode 0600 and the user's", "[phase][config]") {
  std::string dir_template = (std::filesystem::temp_directory_path() / "ocslab-ctl-token-XXXXXX").string();
  REQUIRE(::mkdtemp(dir_template.data()) != nullptr);
  const std::string dir = dir_template, path = dir + "/c.yaml";
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  { std::ofstream(path) << kGood; }
  ::chmod(path.c_str(), 0644);
  CHECK_THROWS_WITH(load_controller_config(path),
                    Catch::Contains(path + ":13:8: token: written inline, but " + path +
                                    " is mode 0644: group or others can read the token; chmod 600 it"));
  ::chmod(path.c_str(), 0600);
  CHECK(load_controller_config(path).token == "0123456789abcdef0123");
  // A token_file: the controller's file itself need not be secret.
  std::string text = kGood;
  { std::ofstream(path) << text.substr(0, text.find("token:")) << "token_file: ctl.token\n"; }
  ::chmod(path.c_str(), 0644);
  CHECK(load_controller_config(path).token_file == dir + "/ctl.token");
}
