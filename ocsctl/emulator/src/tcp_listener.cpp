#include "tcp_listener.h"
#include "listen_socket.h"

#include <spdlog/spdlog.h>
#include <array>
#include <boost/asio/write.hpp>
#include <deque>

#include "ocslab/common/error.h"

namespace ocslab::emu {

namespace asio = boost::asio;
using asio::ip::tcp;

struct TcpListener::Conn : std::enable_shared_from_this<Conn> {
  static constexpr size_t kMaxQueuedBytes = 4 << 20;  // replies not yet sent

  Conn(tcp::socket s, std::weak_ptr<TcpListener> owner) : socket(std::move(s)), owner(std::move(owner)) {}

  tcp::socket socket;
  std::weak_ptr<TcpListener> owner;
  std::unique_ptr<ProtocolSession> session;
  SessionCounter open;
  std::deque<std::string> out;
  size_t queued = 0;  // bytes in out
  bool writing = false;
  bool close_after_flush = false;
  bool done = false;
  std::array<char, 16384> buf{};

  void begin(const SessionFactory& make, SessionCounter counter) {
    open = std::move(counter);
    ++*open;
    std::weak_ptr<Conn> weak = shared_from_this();
    session = make(
        [weak](std::string bytes) {
          if (auto c = weak.lock()) c->write(std::move(bytes));
        },
        [weak] {
          if (auto c = weak.lock()) c->close_later();
        });
    session->on_open();
    read();
  }

  void read() {
    if (done) return;
    auto self = shared_from_this();
    socket.async_read_some(asio::buffer(buf), [self](const boost::system::error_code& ec, size_t n) {
      if (self->done) return;
      if (ec) {
        self->finish();  // client gone (or reset): its pending work is dropped
        return;
      }
      self->session->on_bytes(std::string_view(self->buf.data(), n));
      if (!self->close_after_flush) self->read();
    });
  }

  void write(std::string bytes) {
    if (done || close_after_flush) return;
    if (queued + bytes.size() > kMaxQueuedBytes) {
      // A client that sends commands but never reads the replies: dropped, not buffered
      // without end; the other sessions are not affected.
      spdlog::warn("a client read nothing of its last {} bytes of replies; dropping it", queued);
      finish();
      return;
    }
    queued += bytes.size();
    out.push_back(std::move(bytes));
    if (!writing) pump();
  }

  void pump() {
    if (done) return;
    if (out.empty()) {
      writing = false;
      if (close_after_flush) finish();
      return;
    }
    writing = true;
    auto self = shared_from_this();
    asio::async_write(socket, asio::buffer(out.front()), [self](const boost::system::error_code& ec, size_t) {
      if (ec) {
        self->finish();
        return;
      }
      self->queued -= self->out.front().size();
      self->out.pop_front();
      self->pump();
    });
  }

  void close_later() {
    close_after_flush = true;
    if (!writing) finish();
  }

  void finish() {
    if (done) return;
    done = true;
    session->closed();
    boost::system::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    --*open;
    if (auto l = owner.lock()) l->conns_.erase(shared_from_this());
  }
};

TcpListener::TcpListener(asio::io_context& io, const ListenAddress& where, std::string protocol, SessionFactory make,
                         SessionCounter open)
    : acceptor_(io), protocol_(std::move(protocol)), make_(std::move(make)), open_(std::move(open)) {
  port_ = open_listener(acceptor_, where, protocol_);
}

void TcpListener::start() { accept(); }

void TcpListener::accept() {
  auto self = shared_from_this();
  acceptor_.async_accept([self](const boost::system::error_code& ec, tcp::socket s) {
    if (self->closed_) return;
    if (ec) {
      // Out of descriptors and the like: keep serving the sessions we have, try again.
      spdlog::warn("{} accept failed: {}", self->protocol_, ec.message());
      if (ec != asio::error::operation_aborted) self->accept();
      return;
    }
    boost::system::error_code opt_ec;
    s.set_option(tcp::no_delay(true), opt_ec);  // replies are small and latency matters
    auto conn = std::make_shared<Conn>(std::move(s), self);
    self->conns_.insert(conn);
    conn->begin(self->make_, self->open_);
    self->accept();
  });
}

void TcpListener::close() {
  closed_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  auto conns = conns_;
  for (const auto& c : conns) c->finish();
  conns_.clear();
}

}  // namespace ocslab::emu
