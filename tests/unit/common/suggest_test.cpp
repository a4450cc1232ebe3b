#include "ocslab/common/suggest.h"

#include <catch2/catch.hpp>

#include "ocslab/common/version.h"

using namespace ocslab;

TEST_CASE("edit distance counts a swap of neighbours as one edit") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("list", "list") == 0);
  CHECK(edit_distance("lsit", "list") == 1);
  CHECK(edit_distance("lis", "list") == 1);
  CHECK(edit_distance("lisst", "list") == 1);
  CHECK(edit_distance("lust", "list") == 1);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("abcd", "badc") == 2);
}

TEST_CASE("the closest word is suggested only when it is near enough to be a typo") {
  const std::vector<std::string> commands = {"info", "list", "connect", "disconnect", "apply", "watch-power"};
  CHECK(closest_word("lsit", commands) == "list");
  CHECK(closest_word("conect", commands) == "connect");
  CHECK(closest_word("disconect", commands) == "disconnect");
  CHECK(closest_word("watch-pwoer", commands) == "watch-power");
  CHECK_FALSE(closest_word("frobnicate", commands).has_value());
  CHECK_FALSE(closest_word("ls", commands).has_value());  // 2 edits from "list" is too far for 2 letters
  CHECK_FALSE(closest_word("list", commands).has_value());
  CHECK_FALSE(closest_word("lsit", {}).has_value());
  // Dashes do not make a short option look long enough for 2 edits.
  CHECK(closest_word("--jsno", {"--json", "--csv"}) == "--json");
  CHECK_FALSE(closest_word("--xy", {"--json"}).has_value());
  CHECK(closest_word("--interval", {"--interval-ms", "--count"}) == "--interval-ms");  // cut short
  CHECK(closest_word("--coun", {"--interval-ms", "--count"}) == "--count");
  CHECK_FALSE(closest_word("--c", {"--interval-ms", "--cache"}).has_value());  // too short to be sure
  CHECK(closest_word("--cach", {"--cache-dir", "--cache"}) == "--cache");      // a typo beats a prefix
}

TEST_CASE("the message names the word and the suggestion") {
  CHECK(unknown_word_message("command", "lsit", {"info", "list"}) == "unknown command 'lsit'. Did you mean 'list'?");
  CHECK(unknown_word_message("command", "zzz", {"info", "list"}) == "unknown command 'zzz'.");
  CHECK(did_you_mean("--jsn", {"--json"}) == " Did you mean '--json'?");
  CHECK(did_you_mean("--foo", {"--json"}).empty());
}

TEST_CASE("options are read out of a help text") {
  const char* help = R"(Usage: tool run SPEC [--json] [--out=DIR]
  --json          machine-readable output
  --results-dir D where to write; see also --json and a-b--c or ---x
  -h, --help      this help; 10--20 is a range, -- ends options
)";
  CHECK(options_in_text(help) == std::vector<std::string>{"--json", "--out", "--results-dir", "--help"});
}

TEST_CASE("every program prints the project's version") {
  CHECK(std::string(project_version()) == OCSLAB_TEST_PROJECT_VERSION);
}
