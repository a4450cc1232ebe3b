// libFuzzer target for the emulated switch's login (login_matches, which the SSH password
// callback of tl1+ssh and NETCONF calls with what the client sent, and TL1's ACT-USER through a
// real Tl1Session). Input: the offered user, a NUL, the offered password, a NUL, then TL1
// bytes fed in splits chosen by the first byte. The check must accept exactly the configured
// pair; a session must never log in without both in its input; never a crash.
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ocslab/common/error.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/emulator/tl1_session.h"

using namespace ocslab::emu;

namespace {

SwitchParams params() {
  SwitchParams p;
  p.name = "FUZZ-OCS";
  p.ingress_ports = 8;
  p.egress_ports = 8;
  p.switching = Distribution::fixed(0);
  return p;
}

std::string_view next_field(std::string_view& in) {
  size_t nul = in.find('\0');
  std::string_view f = in.substr(0, nul);
  in.remove_prefix(nul == std::string_view::npos ? in.size() : nul + 1);
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view user = next_field(in), password = next_field(in);

  ControlPlaneConfig config;  // admin / root, the lab file's default
  bool expected = user == config.user && password == config.password;
  if (login_matches(config, user, password) != expected) __builtin_trap();
  ControlPlaneConfig theirs = config;  // whatever a lab file names is accepted as itself
  theirs.user = std::string(user);
  theirs.password = std::string(password);
  if (!login_matches(theirs, user, password)) __builtin_trap();

  boost::asio::io_context io;
  GroundTruth truth{"FUZZ-OCS"};
  SwitchModel model(io, params(), truth);
  std::string out;
  Tl1Session session(model, truth, config, [&out](std::string s) {
    if (out.size() < (1u << 20)) out += s;
  });
  size_t step = 1 + data[0] % 23;
  try {
    for (size_t off = 0; off < in.size(); off += step) {
      session.on_bytes(in.substr(off, step));
      step = 1 + (step * 5 + data[0]) % 41;
    }
  } catch (const ocslab::Error&) {
  }
  if (session.logged_in() &&
      (in.find(config.user) == std::string_view::npos || in.find(config.password) == std::string_view::npos))
    __builtin_trap();
  return 0;
}
