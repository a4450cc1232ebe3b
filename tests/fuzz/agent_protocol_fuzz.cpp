// libFuzzer target for ocslab-agent protocol v1. The bytes are a session's input: split into
// lines (whole and in input-chosen pieces, which must agree, since a client's bytes arrive in
// arbitrary SSH segments), each line through the request parser, the client's message parser
// and the sample parser. A request that parses must survive request_line() and parse to the
// same thing again. ocslab::Error (ProtocolError) is the documented way to reject input;
// anything else must crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/agent/protocol.h"
#include "ocslab/common/error.h"

using namespace ocslab::agent;

namespace {

std::vector<LineReader::Line> split(std::string_view input, size_t cut) {
  LineReader r(4096);
  std::vector<LineReader::Line> out;
  for (size_t at = 0; at < input.size(); at += cut) {
    r.feed(input.substr(at, cut));
    while (auto l = r.next()) out.push_back(std::move(*l));
  }
  return out;
}

void check_request(const std::string& line) {
  Request r;
  try {
    r = parse_request(line);
  } catch (const ProtocolError& e) {
    if (!(e.id().is_null() || e.id().is_string() || e.id().is_number_integer())) __builtin_trap();
    return;
  }
  if (!(r.id.is_string() || r.id.is_number_integer())) __builtin_trap();
  if (r.type == RequestType::kProbesStart && r.probes.empty()) __builtin_trap();
  if (r.type == RequestType::kSpoolFetch && (r.from_seq < 1 || r.max_count > kMaxFetchPage)) __builtin_trap();
  // Names that end up in file names: only [A-Za-z0-9._-], never starting with '.'.
  for (const std::string* name : {&r.run, &r.capture}) {
    if (name->empty()) continue;
    if ((*name)[0] == '.' ||
        name->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
            std::string::npos) {
      __builtin_trap();
    }
  }
  if (r.type == RequestType::kSpoolDelete && r.capture.empty()) __builtin_trap();
  std::string again = request_line(r);
  if (again.empty() || again.back() != '\n') __builtin_trap();
  Request back = parse_request(std::string_view(again).substr(0, again.size() - 1));  // must not throw
  if (back.type != r.type || back.id != r.id || back.version != r.version || back.t1 != r.t1 ||
      back.from_seq != r.from_seq || back.follow != r.follow || back.max_count != r.max_count || back.run != r.run ||
      back.capture != r.capture || back.probes.size() != r.probes.size()) {
    __builtin_trap();
  }
  for (size_t i = 0; i < r.probes.size(); ++i) {
    if (back.probes[i].name != r.probes[i].name || back.probes[i].interfaces != r.probes[i].interfaces ||
        back.probes[i].interval_ms != r.probes[i].interval_ms) {
      __builtin_trap();
    }
  }
}

void check_message(const std::string& line) {
  try {
    nlohmann::json m = parse_message(line);
    if (!m.is_object() || !m["type"].is_string()) __builtin_trap();
    SeqSample s = parse_sample(m);
    if (s.seq == 0) __builtin_trap();
    // What the agent would store and send for it reads back to the same sample.
    std::string again = sample_line(s.seq, s.sample);
    std::string_view body(again.data(), again.size() - 1);
    if (body.find('\n') != std::string_view::npos || sample_line_seq(body) != s.seq) __builtin_trap();
    SeqSample back = parse_sample(parse_message(body));
    if (back.sample.host != s.sample.host || back.sample.t_ns != s.sample.t_ns || back.sample.unit != s.sample.unit) {
      __builtin_trap();
    }
  } catch (const ProtocolError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t cut = data[0] % 17 + 1;  // the first byte picks the segment size
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  auto whole = split(input, input.size() + 1);
  auto pieces = split(input, cut);
  if (whole.size() != pieces.size()) __builtin_trap();
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].text != pieces[i].text || whole[i].too_long != pieces[i].too_long) __builtin_trap();
    if (whole[i].too_long) continue;
    check_request(whole[i].text);
    check_message(whole[i].text);
  }
  return 0;
}
