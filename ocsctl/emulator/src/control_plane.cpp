#include "ocslab/emulator/control_plane.h"

#include <libssh/libssh.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <future>
#include <mutex>

#include "ocslab/common/error.h"
#include "ocslab/emulator/netconf_session.h"
#include "ocslab/emulator/scpi_session.h"
#include "ocslab/emulator/tl1_session.h"
#include "gated_session.h"
#include "ssh_listener.h"
#include "tcp_listener.h"

namespace ocslab::emu {

// The host key as OpenSSH base64 (each SSH listener imports its own copy) plus the public
// half for known_hosts. Named, not anonymous: ControlPlane::Impl holds one.
namespace control_plane_detail {
struct HostKey {
  std::string private_b64;
  std::string type;        // ssh-ed25519
  std::string public_b64;
};
}  // namespace control_plane_detail
using control_plane_detail::HostKey;

namespace {

HostKey load_host_key(const std::string& file) {
  ssh_key key = nullptr;
  if (file.empty()) {
    if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK) throw Error("cannot generate an ed25519 host key");
  } else if (ssh_pki_import_privkey_file(file.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
    throw Error("cannot read SSH host key '" + file + "'");
  }
  HostKey out;
  char* priv = nullptr;
  char* pub = nullptr;
  bool ok = ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &priv) == SSH_OK &&
            ssh_pki_export_pubkey_base64(key, &pub) == SSH_OK;
  if (ok) {
    out.private_b64 = priv;
    out.public_b64 = pub;
    out.type = ssh_key_type_to_char(ssh_key_type(key));
  }
  ssh_string_free_char(priv);
  ssh_string_free_char(pub);
  ssh_key_free(key);
  if (!ok) throw Error("cannot export the SSH host key" + (file.empty() ? std::string() : " '" + file + "'"));
  return out;
}

}  // namespace

struct ControlPlane::Impl {
  Impl(boost::asio::io_context& i, SwitchModel& m, GroundTruth& t, ControlPlaneConfig c)
      : io(i), model(m), truth(t), config(std::move(c)) {}

  boost::asio::io_context& io;
  SwitchModel& model;
  GroundTruth& truth;
  ControlPlaneConfig config;
  std::shared_ptr<LightEvents> events = std::make_shared<LightEvents>();
  SessionCounter open = std::make_shared<std::atomic<size_t>>(0);
  std::shared_ptr<ControlGate> gate = std::make_shared<ControlGate>();
  boost::asio::steady_timer reachable_again{io};  // records the end of an unreachable spell
  std::shared_ptr<TcpListener> tl1, scpi;
  std::unique_ptr<SshListener> tl1_ssh, netconf;
  HostKey key;
  BoundPorts ports;
  bool started = false;
  mutable std::mutex mutex;  // ports, key

  // Factories copy what they need: a session may be created from work still queued after stop().
  SessionFactory tl1_factory(bool over_ssh) {
    SwitchModel* m = &model;
    GroundTruth* t = &truth;
    auto cfg = config;
    auto ev = events;
    return gated([m, t, cfg, ev, over_ssh](ProtocolSession::SendFn send, ProtocolSession::CloseFn close) {
      return std::make_unique<Tl1Session>(*m, *t, cfg, std::move(send), Tl1SessionOptions{over_ssh, ev}, std::move(close));
    });
  }
  template <class S>
  SessionFactory factory() {
    SwitchModel* m = &model;
    GroundTruth* t = &truth;
    auto cfg = config;
    return gated([m, t, cfg](ProtocolSession::SendFn send, ProtocolSession::CloseFn close) {
      return std::make_unique<S>(*m, *t, cfg, std::move(send), std::move(close));
    });
  }
  // Every session behind the control plane's gate (silence()).
  SessionFactory gated(SessionFactory make) {
    SwitchModel* m = &model;
    GroundTruth* t = &truth;
    boost::asio::io_context* loop = &io;
    auto cfg = config;
    auto g = gate;
    return [m, t, cfg, g, loop, make](ProtocolSession::SendFn send,
                                      ProtocolSession::CloseFn close) -> std::unique_ptr<ProtocolSession> {
      return std::make_unique<GatedSession>(make(std::move(send), std::move(close)), g, *loop, *m, *t, cfg);
    };
  }

  // Runs fn on the loop and waits; runs it here when this is the loop thread or when no
  // thread runs the loop (then nothing else can touch the listeners either).
  void on_loop(const std::function<void()>& fn) {
    if (io.get_executor().running_in_this_thread() || io.stopped()) {
      fn();
      return;
    }
    auto claimed = std::make_shared<std::atomic<bool>>(false);
    auto finished = std::make_shared<std::promise<void>>();
    auto fut = finished->get_future();
    boost::asio::post(io, [fn, claimed, finished] {
      if (claimed->exchange(true)) return;
      fn();
      finished->set_value();
    });
    if (fut.wait_for(std::chrono::seconds(2)) == std::future_status::ready) return;
    if (!claimed->exchange(true)) {
      fn();  // nobody is running the loop
      return;
    }
    fut.wait();
  }

  void close_all() {
    if (tl1_ssh) tl1_ssh->stop();
    if (netconf) netconf->stop();
    on_loop([this] {
      if (tl1) tl1->close();
      if (scpi) scpi->close();
    });
  }
};

ControlPlane::ControlPlane(boost::asio::io_context& io, SwitchModel& model, GroundTruth& truth, ControlPlaneConfig config)
    : impl_(std::make_unique<Impl>(io, model, truth, std::move(config))) {
  // The model keeps observers forever; the registry lets sessions come and go.
  std::weak_ptr<LightEvents> weak = impl_->events;
  model.on_light([weak](Port egress, bool lit, double dbm) {
    if (auto ev = weak.lock()) ev->publish(egress, lit, dbm);
  });
}

ControlPlane::~ControlPlane() { stop(); }

void ControlPlane::start() {
  auto& d = *impl_;
  if (d.started) return;
  const auto& c = d.config;
  try {
    if (c.tl1_ssh || c.netconf) {
      HostKey key = load_host_key(c.host_key);
      std::lock_guard lock(d.mutex);
      d.key = std::move(key);
    }
    BoundPorts ports;
    if (c.tl1) {
      d.tl1 = std::make_shared<TcpListener>(d.io, *c.tl1, "tl1", d.tl1_factory(false), d.open);
      ports.tl1 = d.tl1->port();
    }
    if (c.scpi) {
      d.scpi = std::make_shared<TcpListener>(d.io, *c.scpi, "scpi", d.factory<ScpiSession>(), d.open);
      ports.scpi = d.scpi->port();
    }
    if (c.tl1_ssh) {
      d.tl1_ssh = std::make_unique<SshListener>(d.io, *c.tl1_ssh, "tl1+ssh", SshListener::Mode::kShell, d.key.private_b64,
                                                c, d.tl1_factory(true), d.open);
      ports.tl1_ssh = d.tl1_ssh->port();
    }
    if (c.netconf) {
      d.netconf = std::make_unique<SshListener>(d.io, *c.netconf, "netconf", SshListener::Mode::kNetconf,
                                                d.key.private_b64, c, d.factory<NetconfSession>(), d.open);
      ports.netconf = d.netconf->port();
    }
    {
      std::lock_guard lock(d.mutex);
      d.ports = ports;
    }
    // Arming the first accept from this thread is safe: nothing else uses the new acceptors yet.
    if (d.tl1) d.tl1->start();
    if (d.scpi) d.scpi->start();
    if (d.tl1_ssh) d.tl1_ssh->start();
    if (d.netconf) d.netconf->start();
    d.started = true;
  } catch (...) {
    d.close_all();
    d.tl1.reset();
    d.scpi.reset();
    d.tl1_ssh.reset();
    d.netconf.reset();
    throw;
  }
}

void ControlPlane::stop() {
  auto& d = *impl_;
  if (!d.started) return;
  d.started = false;
  d.close_all();
  d.tl1_ssh.reset();
  d.netconf.reset();
}

BoundPorts ControlPlane::ports() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->ports;
}

std::string ControlPlane::known_hosts(const std::string& host, int port) const {
  std::lock_guard lock(impl_->mutex);
  if (impl_->key.public_b64.empty()) throw Error("the control plane has no SSH listener (no host key)");
  std::string where = port == 22 ? host : "[" + host + "]:" + std::to_string(port);
  return where + " " + impl_->key.type + " " + impl_->key.public_b64;
}

size_t ControlPlane::open_sessions() const { return *impl_->open; }

void ControlPlane::silence(std::chrono::milliseconds for_how_long) {
  auto& d = *impl_;
  const auto until = std::chrono::steady_clock::now() + for_how_long;
  if (until <= d.gate->closed_until) return;  // inside a longer spell already
  if (!d.gate->closed()) d.truth.record("switch", "control", "unreachable", 1, "bool");
  d.gate->closed_until = until;
  d.reachable_again.expires_at(until);
  GroundTruth* truth = &d.truth;
  d.reachable_again.async_wait([truth](const boost::system::error_code& ec) {
    if (!ec) truth->record("switch", "control", "unreachable", 0, "bool");
  });
}

}  // namespace ocslab::emu
