#include "ocslab/emulator/emulator.h"

#include "listen_socket.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cmath>
#include <deque>
#include <nlohmann/json.hpp>

#include "ocslab/common/error.h"
#include "ocslab/emulator/link_delivery.h"

namespace ocslab::emu {

namespace asio = boost::asio;
using asio::ip::tcp;

// Streams the ground truth live as JSON lines to every connected client (loopback only by
// default). A client that does not read is dropped rather than stalling the emulator or
// growing its memory; so is one whose connection failed. At most kMaxClients at once.
struct Emulator::EventsServer {
  static constexpr size_t kMaxClients = 64;
  static constexpr size_t kMaxQueuedBytes = 4 << 20;  // a client's unsent lines before it is dropped

  struct Client : std::enable_shared_from_this<Client> {
    explicit Client(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::deque<std::string> queue;
    size_t queued_bytes = 0;
    bool writing = false;
    void drop() {
      boost::system::error_code ec;
      socket.close(ec);  // the server forgets a closed client on the next sample
      if (!writing) {    // else the write in flight still uses queue.front(): its handler clears
        queue.clear();
        queued_bytes = 0;
      }
    }
    void push(std::string line) {
      if (!socket.is_open()) return;
      if (queued_bytes + line.size() > kMaxQueuedBytes) {
        spdlog::warn("events: a client read nothing of its last {} bytes; dropping it", queued_bytes);
        drop();
        return;
      }
      queued_bytes += line.size();
      queue.push_back(std::move(line));
      if (!writing) pump();
    }
    void pump() {
      if (queue.empty() || !socket.is_open()) {
        writing = false;
        return;
      }
      writing = true;
      auto self = shared_from_this();
      asio::async_write(socket, asio::buffer(queue.front()), [self](const boost::system::error_code& ec, size_t) {
        if (ec || !self->socket.is_open()) {  // gone or dropped: closed now, so it is removed, not kept
          self->writing = false;
          self->drop();
          return;
        }
        self->queued_bytes -= self->queue.front().size();
        self->queue.pop_front();
        self->pump();
      });
    }
  };

  EventsServer(asio::io_context& io, GroundTruth& truth, const ListenAddress& where)
      : io_(io), truth_(truth), acceptor_(io) {
    port_ = open_listener(acceptor_, where, "events");
    sub_ = truth_.subscribe([this](const Sample& s) {
      std::string line =
          nlohmann::json{{"t_ns", s.t_ns},       {"mono_ns", s.mono_ns}, {"host", s.host},   {"source", s.source},
                         {"subject", s.subject}, {"signal", s.signal},   {"value", s.value}, {"unit", s.unit}}
              .dump() +
          "\n";
      asio::post(io_, [this, line = std::move(line)] {
        forget_closed();
        for (auto& c : clients_) c->push(line);
      });
    });
    accept();
  }
  ~EventsServer() { truth_.unsubscribe(sub_); }

  void forget_closed() {
    std::erase_if(clients_, [](const auto& c) { return !c->socket.is_open(); });
  }

  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket s) {
      if (!acceptor_.is_open() || ec == asio::error::operation_aborted) return;  // closed
      if (ec) {
        // Out of descriptors and the like: the clients we have keep their stream; try again.
        // A pause, not a spin: the failed connection stays queued until descriptors free up.
        spdlog::warn("events: accept failed: {}", ec.message());
        retry_.expires_after(std::chrono::milliseconds(100));
        retry_.async_wait([this](const boost::system::error_code& wait_ec) {
          if (!wait_ec && acceptor_.is_open()) accept();
        });
        return;
      }
      forget_closed();
      if (clients_.size() >= kMaxClients) {
        boost::system::error_code close_ec;
        s.close(close_ec);  // refused: the stream is for a few watchers, not a crowd
      } else {
        clients_.push_back(std::make_shared<Client>(std::move(s)));
      }
      accept();
    });
  }
  void close() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    for (auto& c : clients_) c->socket.close(ec);
    clients_.clear();
  }
  int port() const { return port_; }

 private:
  asio::io_context& io_;
  GroundTruth& truth_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_{io_};
  int port_ = 0;
  int sub_ = 0;
  std::vector<std::shared_ptr<Client>> clients_;
};

Emulator::Emulator(EmulatorConfig config) : config_(std::move(config)), truth_(config_.sw.name) {
  model_ = std::make_unique<SwitchModel>(io_, config_.sw, truth_);
}

Emulator::~Emulator() { stop(); }

void Emulator::start() {
  if (started_) return;
  try {
    if (!config_.ground_truth_csv.empty()) truth_.write_csv(config_.ground_truth_csv);
    if (!config_.nics.empty()) {
      std::vector<NicAttachment> attachments;
      for (const auto& n : config_.nics) attachments.push_back(n.attachment);
      data_plane_ = std::make_unique<DataPlane>(attachments, model_->total_ports());
      data_plane_->set_rate_gbps(config_.link_gbps);
      if (config_.link_gbps > 0) truth_.record("switch", "timing", "link_gbps", config_.link_gbps, "Gbit/s");
      data_plane_->start();
    }
    for (size_t i = 0; i < config_.nics.size(); ++i) {
      const auto& a = config_.nics[i].attachment;
      // TUNSETCARRIER returns at once; QMP waits for that host's QEMU, so it is delivered on a
      // thread of its own (link_delivery.h).
      auto driver = a.kind == NicAttachment::Kind::kTap
                        ? make_tap_carrier_driver(data_plane_->tap_fd(i), a.tap_name)
                        : make_async_link_driver(make_qmp_link_driver(a.qmp_socket, a.qmp_netdev), truth_, a.name);
      DataPlane* dp = data_plane_.get();
      links_.push_back(std::make_unique<NicLinkModel>(
          io_, a.name, config_.nics[i].link, std::move(driver), truth_, [dp, i](bool up) { dp->set_nic_link(i, up); },
          config_.sw.seed * 1000003 + i));
    }
    if (data_plane_) {
      DataPlane* dp = data_plane_.get();
      model_->on_path([dp](Port in, std::optional<Port> out) { dp->set_path(in, out); });
      model_->on_light([this](Port egress, bool lit, double) {
        for (size_t i = 0; i < config_.nics.size(); ++i) {
          if (config_.nics[i].attachment.rx_port == egress) links_[i]->on_light(lit);
        }
      });
    }
    control_ = std::make_unique<ControlPlane>(io_, *model_, truth_, config_.control);
    control_->start();
    if (config_.control.events) {
      events_ = std::make_unique<EventsServer>(io_, truth_, *config_.control.events);
      events_port_ = events_->port();
    }
    work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(io_.get_executor());
    loop_ = std::thread([this] { io_.run(); });
    started_ = true;
    // No circuit is lit yet: every NIC starts with its link down, as on a dark fibre.
    call([this] {
      for (auto& l : links_) l->force(false);
      apply_holds();  // those a retime before start asked for
      return 0;
    });
  } catch (...) {
    stop();
    throw;
  }
}

void Emulator::stop() {
  if (control_) control_->stop();
  if (events_) {
    if (loop_.joinable()) {
      call([this] {
        events_->close();
        return 0;
      });
    } else {
      events_->close();
    }
  }
  work_.reset();
  io_.stop();
  if (loop_.joinable()) loop_.join();
  links_.clear();
  if (data_plane_) data_plane_->stop();
  started_ = false;
}

void Emulator::retime(const TimingUpdate& update) {
  // Refused before anything changes: an update applies whole or not at all. NIC names never
  // change after construction, so reading them off the loop thread is safe.
  for (const auto& name : update.hold_down.value_or(std::vector<std::string>{})) {
    bool known = false;
    for (const auto& n : config_.nics) known = known || n.attachment.name == name;
    if (!known) throw Error("hold_down: unknown NIC '" + name + "'");
  }
  const int total = config_.sw.ingress_ports + config_.sw.egress_ports;
  for (Port p : update.dark_ports.value_or(std::vector<Port>{})) {
    if (p < 1 || p > total) throw Error(fmt::format("dark_ports: the switch has no port {} (ports 1..{})", p, total));
  }
  if (update.dark_spell) {
    for (Port p : update.dark_spell->ports) {
      if (p < 1 || p > total) {
        throw Error(fmt::format("dark_spell: the switch has no port {} (ports 1..{})", p, total));
      }
    }
  }
  if (update.link_gbps && *update.link_gbps != 0 &&
      !(*update.link_gbps >= kMinLinkGbps && *update.link_gbps <= kMaxLinkGbps)) {
    throw Error(fmt::format("link_gbps: {} Gbit/s is outside {}..{} (0: no cap)", *update.link_gbps, kMinLinkGbps,
                            kMaxLinkGbps));
  }
  if (!started_) {
    if (update.dark_spell) throw Error("dark_spell: the emulator is not running (a spell is timed by its loop)");
    apply_timing(update);  // no loop thread yet: nothing else touches the model
    return;
  }
  call([this, &update] {
    // Checked on the loop, where the shutters live, before anything of the update applies.
    if (update.dark_spell) check_dark_spell(*update.dark_spell);
    apply_timing(update);
    return 0;
  });
}

void Emulator::apply_timing(const TimingUpdate& update) {
  if (update.switching) {
    config_.sw.switching = *update.switching;
    model_->set_switching(*update.switching);
    truth_.record("switch", "timing", "switching_mean", update.switching->mean_ms(), "ms");
  }
  if (update.nic_link) {
    for (size_t i = 0; i < config_.nics.size(); ++i) {
      config_.nics[i].link = *update.nic_link;
      config_.nics[i].link_preset = update.nic_preset;
      if (i < links_.size()) links_[i]->set_params(*update.nic_link);
      truth_.record("emulator", config_.nics[i].attachment.name, "firmware_up_mean",
                    update.nic_link->firmware_up.mean_ms(), "ms");
    }
  }
  if (update.hold_down) {
    held_down_ = *update.hold_down;
    apply_holds();
  }
  if (update.dark_ports) apply_dark_ports(*update.dark_ports);
  if (update.unreachable_ms && control_) {
    control_->silence(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(*update.unreachable_ms))));
  }
  if (update.dark_spell) apply_dark_spell(*update.dark_spell);
  if (update.link_gbps) {
    config_.link_gbps = *update.link_gbps;
    if (data_plane_) data_plane_->set_rate_gbps(*update.link_gbps);
    truth_.record("switch", "timing", "link_gbps", *update.link_gbps, "Gbit/s");
  }
}

void Emulator::check_dark_spell(const DarkSpell& spell) const {
  for (Port p : spell.ports) {
    if (std::find(spell_ports_.begin(), spell_ports_.end(), p) != spell_ports_.end()) {
      throw Error(fmt::format("dark_spell: port {} is in a dark spell already", p));
    }
    if (model_->shutter_closed(p))
      throw Error(fmt::format("dark_spell: port {} is dark already (its shutter is closed)", p));
  }
}

void Emulator::apply_dark_spell(const DarkSpell& spell) {
  truth_.record("switch", "dark_spell", "dark_spell", spell.ms, "ms");
  model_->set_shutter(spell.ports, true);
  spell_ports_.insert(spell_ports_.end(), spell.ports.begin(), spell.ports.end());
  auto timer = std::make_unique<boost::asio::steady_timer>(io_);
  timer->expires_after(std::chrono::nanoseconds(static_cast<int64_t>(std::llround(spell.ms * 1e6))));
  boost::asio::steady_timer* raw = timer.get();
  spell_timers_.push_back(std::move(timer));
  raw->async_wait([this, raw, ports = spell.ports](const boost::system::error_code& ec) {
    if (ec) return;  // the emulator stopped: its shutters go with it
    // A port dark_ports darkened during the spell stays dark: that channel lights it.
    std::vector<Port> open;
    for (Port p : ports) {
      if (std::find(dark_ports_.begin(), dark_ports_.end(), p) == dark_ports_.end()) open.push_back(p);
    }
    if (!open.empty()) model_->set_shutter(open, false);
    for (Port p : ports) spell_ports_.erase(std::find(spell_ports_.begin(), spell_ports_.end(), p));
    std::erase_if(spell_timers_, [raw](const auto& t) { return t.get() == raw; });
  });
}

void Emulator::apply_dark_ports(const std::vector<Port>& dark) {
  std::vector<Port> open;
  for (Port p : dark_ports_) {
    if (std::find(dark.begin(), dark.end(), p) == dark.end()) open.push_back(p);
  }
  std::vector<Port> close;
  for (Port p : dark) {
    if (std::find(dark_ports_.begin(), dark_ports_.end(), p) == dark_ports_.end()) close.push_back(p);
  }
  // Ports checked by retime(); the model records each change in the ground truth.
  if (!open.empty()) model_->set_shutter(open, false);
  if (!close.empty()) model_->set_shutter(close, true);
  dark_ports_ = dark;
}

void Emulator::apply_holds() {
  for (auto& link : links_) {
    link->set_held_down(std::find(held_down_.begin(), held_down_.end(), link->name()) != held_down_.end());
  }
}

BoundPorts Emulator::ports() const { return control_ ? control_->ports() : BoundPorts{}; }

std::string Emulator::known_hosts(const std::string& host, int port) const {
  return control_ ? control_->known_hosts(host, port) : std::string();
}

}  // namespace ocslab::emu
