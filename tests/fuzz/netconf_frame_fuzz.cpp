// libFuzzer target for the NETCONF framing decoder and the reply/hello parsers: the input
// is fed in splits chosen by its own first bytes, once per framing, and every message the
// decoder yields is parsed as a hello, an rpc-reply (with the optical-switch payloads) and
// an rpc. ocslab::Error is the only acceptable failure; anything else crashes the run.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ocslab/ocsctl/netconf_codec.h"

using namespace ocslab::ocs;

namespace {

void parse_all(const std::string& msg) {
  NetconfMessage m;
  try {
    m = parse_netconf_message(msg);
  } catch (const ocslab::Error&) {
    return;
  }
  try {
    auto h = parse_hello(m);
    (void)pair_list_name(h.optical_revision);
  } catch (const ocslab::Error&) {
  }
  try {
    auto r = parse_rpc_reply(m);
    (void)parse_cross_connects(r.data);
    (void)parse_opm_power(r.data);
    (void)parse_port_config_ids(r.data);
    auto pi = parse_product_information(r.data);
    (void)switch_size_from_model(pi.model);
  } catch (const ocslab::Error&) {
  }
  try {
    (void)parse_rpc(m);
  } catch (const ocslab::Error&) {
  }
}

void run(std::string_view input, Framing framing, uint8_t seed) {
  // A small bound so the size checks are reached too.
  FrameDecoder d(framing, 4096);
  size_t step = 1 + seed % 17;
  try {
    for (size_t off = 0; off < input.size(); off += step) {
      d.feed(input.substr(off, step));
      while (auto m = d.next()) parse_all(*m);
      step = 1 + (step * 7 + seed) % 31;
    }
  } catch (const ocslab::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  run(input, Framing::kEndOfMessage, data[0]);
  run(input, Framing::kChunked, data[0]);
  // A hello in end-of-message framing followed by chunked traffic, as on a real session.
  FrameDecoder d(Framing::kEndOfMessage, 4096);
  try {
    d.feed(input);
    if (auto hello = d.next()) {
      parse_all(*hello);
      d.set_framing(Framing::kChunked);
      while (auto m = d.next()) parse_all(*m);
    }
  } catch (const ocslab::Error&) {
  }
  return 0;
}
