// What the emulator reads from QEMU's QMP socket: lines split anywhere, blank lines skipped,
// a line over the bound or not JSON an Error, and replies of any shape sorted without a json
// exception (QEMU's error with a non-string class used to throw one out of the link driver).
#include <catch2/catch.hpp>

#include <string>

#include "ocslab/common/error.h"
#include "ocslab/emulator/qmp_reader.h"

namespace qmp_reader_test {

using namespace ocslab::emu;
using Catch::Matchers::Contains;

TEST_CASE("qmp reader: messages split anywhere, bounded lines, replies of any shape", "[emulator][qmp]") {
  QmpReader r;
  const std::string stream = "{\"QMP\": {\"capabilities\": []}}\r\n\r\n{\"return\": {}}\r\n";
  for (char c : stream) r.feed(std::string(1, c));
  auto greeting = r.next();
  REQUIRE(greeting);
  CHECK(greeting->contains("QMP"));
  auto ret = r.next();
  REQUIRE(ret);
  auto c = classify_qmp_reply(*ret);
  CHECK(c.kind == QmpReply::Kind::kReturn);
  CHECK(c.empty_return);
  CHECK_FALSE(r.next());

  r.feed("not json\n");
  CHECK_THROWS_WITH(r.next(), Contains("QEMU sent a line that is not JSON: 'not json'"));

  QmpReader small(16);
  CHECK_THROWS_WITH(small.feed(std::string(17, 'x')), Contains("QEMU sent a line longer than 16 bytes"));

  using nlohmann::json;
  CHECK(classify_qmp_reply(json::parse(R"({"event": "X", "data": {}})")).kind == QmpReply::Kind::kEvent);
  auto e = classify_qmp_reply(json::parse(R"({"error": {"class": "DeviceNotFound", "desc": "Device 'x' not found"}})"));
  CHECK(e.kind == QmpReply::Kind::kError);
  CHECK(e.text == "DeviceNotFound: Device 'x' not found");
  CHECK(classify_qmp_reply(json::parse(R"({"error": {"class": 5, "desc": ["a"]}})")).text == "?: ");
  CHECK(classify_qmp_reply(json::parse(R"({"error": 3})")).text == "?: 3");
  auto odd = classify_qmp_reply(json::parse(R"({"return": [1]})"));
  CHECK(odd.kind == QmpReply::Kind::kReturn);
  CHECK_FALSE(odd.empty_return);
  CHECK(classify_qmp_reply(json::parse("[1, 2]")).kind == QmpReply::Kind::kOther);
  CHECK(classify_qmp_reply(json::parse(R"({"greeting": 1})")).kind == QmpReply::Kind::kOther);
}

}  // namespace qmp_reader_test
