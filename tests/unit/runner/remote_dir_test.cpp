// The checks on what a lab host answers about the phase workload's remote folder: mktemp's
// output and the file listing, refused unless exactly of the expected shape.
#include <catch2/catch.hpp>

#include "ocslab/common/error.h"
#include "ocslab/runner/remote_dir.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace remote_dir_test {

using namespace ocslab::runner;
using Catch::Matchers::Contains;

TEST_CASE("mktemp's answer is taken only when it is exactly PREFIX.XXXXXXXXXX", "[runner][remote-dir]") {
  const std::string prefix = remote_dir_prefix("phases-2026 11;rm -rf ~", "on-demand");
  CHECK(prefix == "/tmp/ocslab-phase-phases-2026_11_rm_-rf__-on-demand");
  CHECK(mktemp_command(prefix) == "mktemp -d " + prefix + ".XXXXXXXXXX");
  CHECK(parse_mktemp_output(prefix + ".aB3dEfGh1J\n", prefix) == prefix + ".aB3dEfGh1J");
  for (const std::string& bad : {std::string(), std::string("/tmp\n"), prefix + ".aB3\n", prefix + ".aB3dEfGh1JK\n",
                                prefix + ".aB3dEfGh/J\n", prefix + "-aB3dEfGh1J\n", prefix + ".aB3dEfGh1J\nmore\n",
                                std::string("/home/x/ocslab-phase.aB3dEfGh1J\n"), prefix + "/../../etc\n"}) {
    CHECK_THROWS_WITH(parse_mktemp_output(bad, prefix), Contains("not a folder name " + prefix + ".XXXXXXXXXX"));
  }
}

TEST_CASE("the remote file listing is parsed strictly", "[runner][remote-dir]") {
  auto files = parse_sizes("ops-rank0.csv 3000\ntimeline-rank0.csv    12\n");
  REQUIRE(files.size() == 2u);
  CHECK(files[0].name == "ops-rank0.csv");
  CHECK(files[0].size == 3000u);
  CHECK(files[1].size == 12u);
  CHECK(parse_sizes("").empty());
  CHECK_THROWS_WITH(parse_sizes("ops-rank0.csv\n"), Contains("unexpected line in a file listing: 'ops-rank0.csv'"));
  CHECK_THROWS_WITH(parse_sizes("a 1 2\n"), Contains("unexpected line"));
  // A host's answer names files the runner writes locally: only plain file names pass.
  for (const std::string& bad :
       {std::string("../x.csv 3\n"), std::string("../../../etc/passwd 3\n"), std::string(".. 3\n"),
        std::string(". 3\n"), std::string("a/b 3\n"), std::string("/etc/passwd 3\n"), std::string("a\x01b 3\n"),
        std::string("a") + '\0' + "b 3\n", std::string(256, 'n') + " 3\n"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_sizes(bad), Contains("not a plain file name"));
  }
  CHECK(parse_sizes(std::string(255, 'n') + " 3\n").size() == 1u);
  CHECK(plain_file_name_problem("..") == "'.' and '..' are folders");
  CHECK(plain_file_name_problem("a/b") == "'/' is not allowed");
  CHECK(plain_file_name_problem("") == "empty");
  CHECK(plain_file_name_problem("ops-rank0.csv").empty());
  CHECK_THAT(sizes_command("/tmp/d.X", {"a.csv"}), Contains("[ -L /tmp/d.X ]") && Contains("for f in a.csv;"));
}

}  // namespace remote_dir_test
