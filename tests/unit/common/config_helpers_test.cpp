// The YAML helpers every spec parser shares (ocslab/common/config.h): ranged integers, string
// lists and paths relative to the file that names them, each error at the node's file:line:col.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "ocslab/common/config.h"

using namespace ocslab;

TEST_CASE("int_in takes an integer within its bounds and names the key and bounds otherwise") {
  auto doc = load_yaml_string("a: 5\nb: 0\nc: 1025\nd: x\n", "spec.yaml");
  CHECK(int_in(doc, doc.root["a"], 1, 1024, "a") == 5);
  CHECK(int_in(doc, doc.root["b"], 0, 0, "b") == 0);
  CHECK_THROWS_WITH(int_in(doc, doc.root["b"], 1, 1024, "b"), "spec.yaml:2:4: b must be in [1, 1024], got 0");
  CHECK_THROWS_WITH(int_in(doc, doc.root["c"], 1, 1024, "c"), "spec.yaml:3:4: c must be in [1, 1024], got 1025");
  CHECK_THROWS_WITH(int_in(doc, doc.root["d"], 1, 1024, "d"), "spec.yaml:4:4: expected an integer, got 'x'");
}

TEST_CASE("as_strings takes one string or a list of them") {
  auto doc = load_yaml_string("one: h1\nmany: [h1, h2]\nmap: {a: 1}\nnested: [[h1]]\n", "spec.yaml");
  CHECK(as_strings(doc, doc.root["one"], "hosts") == std::vector<std::string>{"h1"});
  CHECK(as_strings(doc, doc.root["many"], "hosts") == std::vector<std::string>{"h1", "h2"});
  CHECK_THROWS_WITH(as_strings(doc, doc.root["map"], "hosts"), "spec.yaml:3:6: hosts must be a list");
  CHECK_THROWS_WITH(as_strings(doc, doc.root["nested"], "hosts"), "spec.yaml:4:10: expected a string");
}

TEST_CASE("beside_file joins a relative path to the file's folder as written") {
  CHECK(beside_file(load_yaml_string("", "/etc/jobs/c.yaml"), "phases.csv") == "/etc/jobs/phases.csv");
  CHECK(beside_file(load_yaml_string("", "/etc/jobs/c.yaml"), "../x/../t") == "/etc/jobs/../x/../t");
  CHECK(beside_file(load_yaml_string("", "/etc/jobs/c.yaml"), "/abs/t") == "/abs/t");
  CHECK(beside_file(load_yaml_string("", "c.yaml"), "secrets/t") == "secrets/t");  // the file's folder is "."
  CHECK(beside_file(load_yaml_string("", ""), "secrets/t") == "secrets/t");        // no file: as it is
}

TEST_CASE("resolve_path makes a path canonical, relative to the file, with ~/ as the home folder") {
  CHECK(resolve_path(load_yaml_string("", "/etc/jobs/c.yaml"), "../x/./t") == "/etc/x/t");
  CHECK(resolve_path(load_yaml_string("", "/etc/jobs/c.yaml"), "/abs/t") == "/abs/t");
  CHECK(resolve_path(load_yaml_string("", "/etc/jobs/c.yaml"), "").empty());
  const char* home = std::getenv("HOME");
  REQUIRE(home);
  CHECK(resolve_path(load_yaml_string("", "/etc/jobs/c.yaml"), "~/k") ==
        std::filesystem::weakly_canonical(std::string(home) + "/k").string());
  // A file named relatively: the path stays relative to the working folder, normalised.
  CHECK(resolve_path(load_yaml_string("", "c.yaml"), "nonexistent/../t") == "t");
}

TEST_CASE("as_host_port splits at the last colon and checks the port") {
  auto doc = load_yaml_string("a: 127.0.0.1:0\nb: '[::1]:18600'\nc: h1\nd: ':80'\ne: h1:65536\nf: h1:8x\n", "c.yaml");
  CHECK(as_host_port(doc, doc.root["a"], "listen") == std::pair<std::string, int>{"127.0.0.1", 0});
  CHECK(as_host_port(doc, doc.root["b"], "listen") == std::pair<std::string, int>{"[::1]", 18600});
  CHECK_THROWS_WITH(as_host_port(doc, doc.root["c"], "listen"), "c.yaml:3:4: listen 'h1' is not HOST:PORT");
  CHECK_THROWS_WITH(as_host_port(doc, doc.root["d"], "listen"), "c.yaml:4:4: listen ':80' is not HOST:PORT");
  CHECK_THROWS_WITH(as_host_port(doc, doc.root["e"], "listen"), "c.yaml:5:4: listen 'h1:65536': port must be 0..65535");
  CHECK_THROWS_WITH(as_host_port(doc, doc.root["f"], "listen"), "c.yaml:6:4: listen 'h1:8x': port must be 0..65535");
}
