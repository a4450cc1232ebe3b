// Words for a remote shell and interface names from specs: what reaches `sh -c` on a lab host.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/common/ifname.h"
#include "ocslab/common/shell.h"
#include "ocslab/common/file.h"

using namespace ocslab;

TEST_CASE("shell_quote keeps plain words and makes anything else one literal word") {
  CHECK(shell_quote("eth1") == "eth1");
  CHECK(shell_quote("/var/lib/ocslab") == "/var/lib/ocslab");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_join({"a b", "it's", "", "x=1,y"}) == "'a b' 'it'\\''s' '' x=1,y");
}

TEST_CASE("a real shell reads each quoted word back unchanged, whatever it holds") {
  // The words an attacker would try: command separators, substitutions, globs, quotes, newlines.
  const std::string words[] = {"e;touch PWNED", "$(touch PWNED)", "`touch PWNED`", "a'b\"c", "*", "x\ny", "-n", "'"};
  for (const auto& w : words) {
    std::string out = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/ocslab-shell-quote-" +
                      std::to_string(::getpid());
    std::string cmd = "cd /tmp && printf '%s' " + shell_quote(w) + " > " + shell_quote(out);
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(read_file(out) == w);
    std::remove(out.c_str());
    CHECK(std::system("test ! -e /tmp/PWNED") == 0);
  }
}

TEST_CASE("interface names follow the kernel's rule") {
  for (const char* ok : {"eth1", "enp65s0f0np0", "rxe_eth1", "a-b.c", "123456789012345", "e;x", "e$x"}) {
    INFO(ok);
    CHECK(ifname_problem(ok).empty());
  }
  CHECK(ifname_problem("") == "empty");
  CHECK(ifname_problem("1234567890123456") == "longer than 15 bytes");
  CHECK(ifname_problem(".") == "'.' and '..' are reserved");
  CHECK(ifname_problem("..") == "'.' and '..' are reserved");
  CHECK(ifname_problem("../etc") == "'/' is not allowed");
  CHECK(ifname_problem("eth0:1") == "':' is not allowed");
  CHECK(ifname_problem("eth 1") == "whitespace is not allowed");
  CHECK(ifname_problem("eth\n1") == "whitespace is not allowed");
  CHECK(ifname_problem(std::string("e\x01")) == "control characters are not allowed");
  CHECK_THROWS_WITH(check_ifname("eth0:1", "spec.yaml:4: nics"),
                    "spec.yaml:4: nics: 'eth0:1' is not an interface name (':' is not allowed)");
  CHECK_NOTHROW(check_ifname("eth1", "x"));
}
