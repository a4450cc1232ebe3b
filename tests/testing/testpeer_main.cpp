// ocs-testpeer: runs one grammar peer session on stdin/stdout (how sshd starts it for
// TL1-over-SSH and the NETCONF subsystem) or serves TCP on a loopback port.
//   ocs-testpeer --proto tl1|scpi|netconf [--listen PORT] [--state FILE] [--size NxM]
//                [--prompt] [--bare-lf] [--autonomous] [--split] [--netconf-base10]
//                [--netconf-revision YYYY-MM-DD] [--drop-on TEXT] [--never-reply-to TEXT]
//                [--garbage-on TEXT] [--deny-on TEXT] [--faults-after N] [--delay-ms N] [--replace-patched]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "ocslab/testing/peers.h"

using namespace ocslab::testing;

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  std::string proto = "tl1", state, size = "32x32";
  int listen_port = -1;
  PeerQuirks q;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ocs-testpeer: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--proto")
      proto = value();
    else if (a == "--listen")
      listen_port = std::stoi(value());
    else if (a == "--state")
      state = value();
    else if (a == "--size")
      size = value();
    else if (a == "--prompt")
      q.prompt = true;
    else if (a == "--bare-lf")
      q.bare_lf = true;
    else if (a == "--autonomous")
      q.autonomous = true;
    else if (a == "--split")
      q.split_writes = true;
    else if (a == "--netconf-base10")
      q.netconf_base11 = false;
    else if (a == "--netconf-revision")
      q.netconf_revision = value();
    else if (a == "--drop-on")
      q.drop_on = value();
    else if (a == "--never-reply-to")
      q.never_reply_to = value();
    else if (a == "--garbage-on")
      q.garbage_on = value();
    else if (a == "--deny-on")
      q.deny_on = value();
    else if (a == "--faults-after")
      q.faults_after = std::stoi(value());
    else if (a == "--delay-ms")
      q.reply_delay_ms = std::stoi(value());
    else if (a == "--replace-patched")
      q.replace_patched = true;
    else {
      std::fprintf(stderr, "ocs-testpeer: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  int n = 0, m = 0;
  if (std::sscanf(size.c_str(), "%dx%d", &n, &m) != 2 || n < 1 || m < 1) {
    std::fprintf(stderr, "ocs-testpeer: bad --size '%s' (want NxM)\n", size.c_str());
    return 2;
  }
  PeerSwitch sw(n, m, state);
  PeerProtocol p = proto == "scpi"      ? PeerProtocol::kScpi
                   : proto == "netconf" ? PeerProtocol::kNetconf
                                        : PeerProtocol::kTl1;
  if (listen_port >= 0) {
    TcpPeer peer(p, sw, q);
    std::printf("%d\n", peer.port());
    std::fflush(stdout);
    // load-safe: an idle main thread; the peer's work runs on its own threads until it is killed.
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // kept: serve until killed
  }
  switch (p) {
    case PeerProtocol::kTl1:
      serve_tl1_session(0, 1, sw, q);
      break;
    case PeerProtocol::kScpi:
      serve_scpi_session(0, 1, sw, q);
      break;
    case PeerProtocol::kNetconf:
      serve_netconf_session(0, 1, sw, q);
      break;
  }
  return 0;
}
