// libFuzzer target for the TL1 codec. The reply parser gets the input fed whole and in
// input-chosen splits: both must yield the same blocks (or both throw), since a switch's
// bytes arrive in arbitrary TCP/SSH segments. Each is also read with next_block() as the
// driver does (the block stays in the parser, which may reuse it for a repeated reply), and
// must give the same blocks as next(). The command and port-list parsers see the same
// bytes. ocslab::Error is the documented way to reject input; anything else must crash.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/tl1_codec.h"

using namespace ocslab::ocs;

namespace {

struct Outcome {
  std::vector<Tl1Block> blocks;
  bool failed = false;
};

bool same(const Tl1Block& a, const Tl1Block& b) {
  return a.kind == b.kind && a.sid == b.sid && a.date == b.date && a.time == b.time && a.code == b.code &&
         a.tag == b.tag && a.status == b.status && a.data == b.data && a.error_code == b.error_code &&
         a.comment == b.comment && a.text == b.text;
}

Outcome run(std::string_view input, const std::vector<size_t>& cuts, bool in_place) {
  Outcome out;
  Tl1ReplyParser p;
  try {
    size_t at = 0;
    for (size_t k = 0; at < input.size(); ++k) {
      size_t n = cuts.empty() ? input.size() : cuts[k % cuts.size()];
      n = std::min(n, input.size() - at);
      p.feed(input.substr(at, n));
      at += n;
      if (in_place) {
        while (Tl1Block* b = p.next_block()) out.blocks.push_back(*b);
      } else {
        while (auto b = p.next()) out.blocks.push_back(std::move(*b));
      }
    }
  } catch (const ocslab::Error&) {
    out.failed = true;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the split pattern, the rest is what the switch sent.
  if (size == 0) return 0;
  std::vector<size_t> cuts;
  uint8_t pattern = data[0];
  if (pattern == 0) {
    cuts = {1};
  } else {
    cuts = {static_cast<size_t>(pattern % 7 + 1), static_cast<size_t>(pattern / 7 % 13 + 1), 1};
  }
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

  Outcome whole = run(input, {}, false);
  Outcome split = run(input, cuts, false);
  Outcome whole_in_place = run(input, {}, true);
  Outcome split_in_place = run(input, cuts, true);
  for (const Outcome* o : {&split, &whole_in_place, &split_in_place}) {
    if (whole.failed != o->failed || whole.blocks.size() != o->blocks.size()) __builtin_trap();
  }
  for (size_t i = 0; i < whole.blocks.size(); ++i) {
    const auto& b = whole.blocks[i];
    if (!same(b, split.blocks[i]) || !same(b, whole_in_place.blocks[i]) || !same(b, split_in_place.blocks[i])) {
      __builtin_trap();
    }
    if (b.tag.empty() || b.status.empty()) __builtin_trap();
    if (b.kind == Tl1Block::Kind::kResponse && b.code != "M") __builtin_trap();
  }

  try {
    Tl1Command c = parse_tl1_command(input);
    if (c.verb.empty() || c.ctag.empty()) __builtin_trap();
    for (char ch : c.verb) {
      if (ch >= 'a' && ch <= 'z') __builtin_trap();
    }
  } catch (const ocslab::Error&) {
  }

  try {
    auto ports = parse_tl1_port_list(input, 640);
    for (Port p : ports) {
      if (p < 1 || p > 640) __builtin_trap();
    }
    if (!ports.empty() && parse_tl1_port_list(format_tl1_port_list(ports), 640) != ports) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  try {
    auto circuits = parse_tl1_patch_aid(input, 640);
    if (parse_tl1_patch_aid(format_tl1_patch_aid(circuits), 640) != circuits) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  return 0;
}
