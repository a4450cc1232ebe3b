// classify_row: every status a breakdown row can get, from the facts compute_breakdown gathers,
// including the orders of precedence between them.
#include <catch2/catch.hpp>

#include "ocslab/analysis/breakdown.h"

using namespace ocslab::analysis;

namespace {

RowFacts moved(bool went_down, bool stayed_down) {
  RowFacts f;
  f.intent = Intent::kMove;
  f.went_down = went_down;
  f.stayed_down = stayed_down;
  return f;
}

RowFacts coming_up(bool expected, bool any_up, bool came_up) {
  RowFacts f;
  f.intent = Intent::kUp;
  f.up_expected = expected;
  f.any_up = any_up;
  f.came_up = came_up;
  return f;
}

}  // namespace

TEST_CASE("a port judged by its edges: ok when all that went down came back") {
  CHECK(classify_row(moved(true, false)) == Status::kOk);
  CHECK(classify_row(moved(true, true)) == Status::kIncomplete);
  CHECK(classify_row(moved(false, false)) == Status::kUnaffected);
}

TEST_CASE("without intents, and for a port that stays or moves, the edges alone decide") {
  for (Intent i : {Intent::kUnknown, Intent::kStay, Intent::kMove}) {
    INFO(intent_name(i));
    RowFacts f = moved(true, false);
    f.intent = i;
    CHECK(classify_row(f) == Status::kOk);
    f.stayed_down = true;
    CHECK(classify_row(f) == Status::kIncomplete);
    f.went_down = f.stayed_down = false;
    CHECK(classify_row(f) == Status::kUnaffected);
    // The up facts are not read for a port that was not coming up.
    f.up_expected = f.any_up = f.came_up = true;
    CHECK(classify_row(f) == Status::kUnaffected);
  }
}

TEST_CASE("a port coming up: ok when all it awaited came up, incomplete when some did not") {
  CHECK(classify_row(coming_up(true, true, true)) == Status::kOk);
  CHECK(classify_row(coming_up(true, true, false)) == Status::kIncomplete);
  CHECK(classify_row(coming_up(true, false, false)) == Status::kIncomplete);
}

TEST_CASE("a port coming up that awaited nothing: unaffected unless something came up anyway") {
  CHECK(classify_row(coming_up(false, false, true)) == Status::kUnaffected);
  CHECK(classify_row(coming_up(false, true, true)) == Status::kOk);
  // Its down edges are not read: a port coming up has none.
  RowFacts f = coming_up(true, true, true);
  f.went_down = f.stayed_down = true;
  CHECK(classify_row(f) == Status::kOk);
}

TEST_CASE("a port going dark on purpose is disconnected whatever its edges") {
  RowFacts f;
  f.intent = Intent::kDark;
  CHECK(classify_row(f) == Status::kDisconnected);
  f.went_down = f.stayed_down = true;
  CHECK(classify_row(f) == Status::kDisconnected);
}

TEST_CASE("a failed command fails every row, before any other status") {
  for (Intent i : {Intent::kUnknown, Intent::kMove, Intent::kUp, Intent::kDark, Intent::kStay}) {
    INFO(intent_name(i));
    RowFacts f = moved(true, false);
    f.intent = i;
    f.command_failed = true;
    CHECK(classify_row(f) == Status::kFailed);
    // The switch's failure stays the row's even where the host's capture ended before it.
    f.capture_lost = true;
    CHECK(classify_row(f) == Status::kFailed);
  }
}

TEST_CASE("a capture lost before the command is lost, whatever the switch side saw") {
  RowFacts f = moved(true, false);
  f.capture_lost = true;
  CHECK(classify_row(f) == Status::kLost);
  f = coming_up(true, true, true);
  f.capture_lost = true;
  CHECK(classify_row(f) == Status::kLost);
  f.intent = Intent::kDark;
  CHECK(classify_row(f) == Status::kLost);
  f = moved(false, false);
  f.capture_lost = true;
  CHECK(classify_row(f) == Status::kLost);
}
