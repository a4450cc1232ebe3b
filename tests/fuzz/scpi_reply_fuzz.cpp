// libFuzzer target for the SCPI codec: every reply parser and the command-line parser see
// every input. ocslab::Error is the documented way to reject input; any other exception,
// crash or sanitizer report is a bug. Parsed channel lists must also survive a format/parse
// round trip unchanged, since the peer and the driver rely on that to agree.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ocslab/ocsctl/scpi_codec.h"

using namespace ocslab::ocs;

namespace {

template <class F>
void attempt(F&& f) {
  try {
    f();
  } catch (const ocslab::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  attempt([&] {
    auto lists = parse_scpi_channel_lists(in);
    for (const auto& l : lists) {
      auto again = parse_scpi_channel_lists(format_scpi_channel_list(l));
      if (again.size() != 1 || again[0] != l) std::abort();
    }
  });
  attempt([&] {
    auto cs = parse_scpi_connections(in);
    if (parse_scpi_connections(format_scpi_connections(cs)) != cs) std::abort();
  });
  attempt([&] { parse_scpi_power(in); });
  attempt([&] { parse_scpi_idn(in); });
  attempt([&] { parse_scpi_size(in); });
  attempt([&] { parse_scpi_error(in); });
  attempt([&] { parse_scpi_port_reply(in); });
  attempt([&] { parse_scpi_opc(in); });
  attempt([&] { (void)scpi_quote(in); });
  attempt([&] {
    for (const auto& c : parse_scpi_command_line(in)) {
      (void)c.is("OXC:SWITch:CONNect:ADD");
      (void)c.is("SYSTem:ERRor[:NEXT]");
      (void)c.is("*IDN");
      (void)c.is("*OPC");
      if (c.channel_lists.size() > c.args.size()) std::abort();
    }
  });
  return 0;
}
