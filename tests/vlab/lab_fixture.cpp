#include "lab_fixture.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_spec.h"

namespace vlab_test {

std::string source_path(const std::string& rel) {
  const char* s = std::getenv("OCSLAB_SOURCE_DIR");
  return std::string(s && *s ? s : ".") + "/" + rel;
}

std::string test_tool_path(const std::string& name) {
  if (const char* d = std::getenv("OCSLAB_TEST_BIN_DIR"); d && *d) return std::string(d) + "/" + name;
  std::string ocslab = testing::bin_path("ocslab");
  return ocslab.substr(0, ocslab.rfind("/bin/")) + "/tests/" + name;
}

ProgramResult ocslab_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {testing::bin_path("ocslab")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program_status(argv);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Lab::Lab(const std::string& lab_file, std::chrono::milliseconds command_timeout) : command_timeout_(command_timeout) {
  name_ = vlab::load_lab_spec(source_path(lab_file)).name;
  // A lab left behind by an aborted earlier run would block `up`.
  if (fs::exists(vlab::labs_dir(vlab::default_cache_dir()) + "/" + name_)) ocslab_cli({"vlab", "down", name_});
  auto t0 = std::chrono::steady_clock::now();
  ProgramResult r = ocslab_cli({"vlab", "up", source_path(lab_file), "--timeout", "400"});
  std::cout << r.out << r.err;
  std::cout << "lab up in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  REQUIRE(r.status == 0);
  up_ = true;
  REQUIRE_THAT(r.out + r.err, Catch::Matchers::Contains("host(s) ready in"));
  for (const auto& l : vlab::list_labs(vlab::default_cache_dir())) {
    if (l.name == name_) state_ = l;
  }
  REQUIRE_FALSE(state_.dir.empty());
}

Lab::~Lab() {
  if (up_) ocslab_cli({"vlab", "down", name_});
}

void Lab::down() {
  ProgramResult r = ocslab_cli({"vlab", "down", name_});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  up_ = false;
}

ocs::SshOptions Lab::ssh(const std::string& host) const {
  ocs::SshOptions o;
  o.host = "127.0.0.1";
  o.port = state_.host(host).ssh_port;
  o.user = "root";
  o.identity_file = state_.client_key();
  o.known_hosts_file = state_.known_hosts();
  return o;
}

ocs::ExecResult Lab::exec(const std::string& host, const std::string& cmd, std::chrono::milliseconds timeout) const {
  ocs::SshSession s(ssh(host));
  return s.exec(cmd, timeout.count() > 0 ? timeout : command_timeout_);
}

std::string Lab::run(const std::string& host, const std::string& cmd, std::chrono::milliseconds timeout) const {
  ocs::ExecResult r = exec(host, cmd, timeout);
  INFO(host << "$ " << cmd << "\n" << r.out << r.err);
  REQUIRE(r.exit_status == 0);
  return r.out;
}

}  // namespace vlab_test
