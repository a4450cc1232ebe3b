#include "ocslab/emulator/link_driver.h"

#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ocslab/common/error.h"
#include "ocslab/emulator/qmp_reader.h"
#include "unique_fd.h"

namespace ocslab::emu {

namespace {

class TapCarrierDriver : public LinkDriver {
 public:
  TapCarrierDriver(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

  void set_link(bool up) override {
    int on = up ? 1 : 0;
    if (::ioctl(fd_, TUNSETCARRIER, &on) < 0) {
      throw SystemError("TAP " + name_ + ": cannot set carrier " + (up ? "on" : "off") + " (TUNSETCARRIER)", errno);
    }
  }
  std::string describe() const override { return "TAP " + name_ + " carrier (TUNSETCARRIER)"; }

 private:
  int fd_;  // owned by the data plane, which outlives the link models
  std::string name_;
};

// QEMU answers within microseconds; a stalled QEMU (stopped in a debugger, swapped out) must
// not hang the emulator's event loop forever.
constexpr auto kQmpTimeout = std::chrono::seconds(5);

// A failure of the connection itself, as opposed to QEMU refusing the command: only these
// are worth one reconnect.
struct QmpConnectionLost : Error {
  using Error::Error;
};

class QmpLinkDriver : public LinkDriver {
 public:
  QmpLinkDriver(std::string path, std::string netdev) : path_(std::move(path)), netdev_(std::move(netdev)) {}

  void set_link(bool up) override {
    nlohmann::json cmd = {{"execute", "set_link"}, {"arguments", {{"name", netdev_}, {"up", up}}}};
    bool fresh = !fd_.valid();
    try {
      if (fresh) connect();
      execute(cmd);
    } catch (const QmpConnectionLost& e) {
      fd_.reset();
      reader_ = QmpReader();
      // QEMU was restarted or dropped us since the last call: one fresh session, no loops.
      if (fresh) throw Error(describe() + ": " + e.what());
      try {
        connect();
        execute(cmd);
      } catch (const QmpConnectionLost& e2) {
        fd_.reset();
        reader_ = QmpReader();
        throw Error(describe() + ": " + e2.what() + " (after reconnecting)");
      }
    }
  }

  std::string describe() const override { return "QMP " + path_ + " netdev " + netdev_; }

 private:
  void connect() {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof(addr.sun_path)) throw Error(describe() + ": socket path is too long");
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw SystemError(describe() + ": socket", errno);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0) {
      int err = errno;
      throw QmpConnectionLost(std::string("cannot connect: ") + std::strerror(err));
    }
    fd_ = std::move(fd);
    reader_ = QmpReader();
    nlohmann::json greeting = read_message();
    if (!greeting.is_object() || !greeting.contains("QMP")) desync("expected the QMP greeting, got " + greeting.dump());
    execute({{"execute", "qmp_capabilities"}});
  }

  void execute(const nlohmann::json& cmd) {
    write_all(cmd.dump() + "\r\n");
    for (;;) {
      QmpReply reply = classify_qmp_reply(read_message());
      switch (reply.kind) {
        case QmpReply::Kind::kEvent:
          continue;  // asynchronous notifications interleave freely
        case QmpReply::Kind::kError:
          throw Error(describe() + ": " + cmd.value("execute", "?") + " refused: " + reply.text);
        case QmpReply::Kind::kReturn:
          if (!reply.empty_return) {
            throw Error(describe() + ": " + cmd.value("execute", "?") + " returned " + reply.text + ", expected {}");
          }
          return;
        case QmpReply::Kind::kOther:
          desync("unexpected QMP message " + reply.text);
      }
    }
  }

  // A late or garbled reply would be taken for the answer to the next command: drop the
  // session so the next call starts a fresh one.
  [[noreturn]] void desync(const std::string& what) {
    fd_.reset();
    reader_ = QmpReader();
    throw Error(describe() + ": " + what);
  }

  void write_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_.get(), data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw QmpConnectionLost(std::string("send: ") + std::strerror(errno));
      }
      off += static_cast<size_t>(n);
    }
  }

  nlohmann::json read_message() {
    auto deadline = std::chrono::steady_clock::now() + kQmpTimeout;
    for (;;) {
      try {
        if (auto m = reader_.next()) return *m;
      } catch (const Error& e) {
        desync(e.what());
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) desync("no reply within 5 s");
      pollfd p{fd_.get(), POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw SystemError(describe() + ": poll", errno);
      }
      if (r == 0) continue;  // the deadline check above reports it
      char chunk[4096];
      ssize_t n = ::recv(fd_.get(), chunk, sizeof(chunk), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw QmpConnectionLost(std::string("recv: ") + std::strerror(errno));
      }
      if (n == 0) throw QmpConnectionLost("QEMU closed the QMP connection");
      try {
        reader_.feed(std::string_view(chunk, static_cast<size_t>(n)));
      } catch (const Error& e) {
        desync(e.what());
      }
    }
  }

  std::string path_, netdev_;
  UniqueFd fd_;
  QmpReader reader_;
};

}  // namespace

std::unique_ptr<LinkDriver> make_tap_carrier_driver(int tap_fd, std::string tap_name) {
  return std::make_unique<TapCarrierDriver>(tap_fd, std::move(tap_name));
}

std::unique_ptr<LinkDriver> make_qmp_link_driver(std::string socket_path, std::string netdev_id) {
  return std::make_unique<QmpLinkDriver>(std::move(socket_path), std::move(netdev_id));
}

}  // namespace ocslab::emu
