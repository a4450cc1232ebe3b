#include "ssh_listener.h"

#include <libssh/callbacks.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <chrono>
#include <deque>

#include "ocslab/common/error.h"

namespace ocslab::emu {

namespace {

constexpr int kPollMs = 200;
constexpr auto kLoginTime = std::chrono::seconds(10);  // key exchange, auth and channel setup
constexpr int kMaxAuthFailures = 6;

}  // namespace

// Shared by the SSH thread (drains `out`) and the loop (owns `session`).
struct SshListener::Bridge {
  Bridge() : wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Bridge() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  void push(std::string bytes) {
    {
      std::lock_guard lock(mutex);
      out.push_back(std::move(bytes));
    }
    wake();
  }
  void close_later() {
    {
      std::lock_guard lock(mutex);
      close = true;
    }
    wake();
  }
  void wake() const {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
  }

  const int wake_fd;
  std::mutex mutex;
  std::deque<std::string> out;
  bool close = false;
  std::unique_ptr<ProtocolSession> session;  // loop thread only
};

struct SshListener::Conn {
  std::thread thread;
  std::mutex mutex;  // fd
  int fd = -1;       // the session's socket while libssh owns it; -1 once freed
  std::atomic<bool> finished{false};
  std::shared_ptr<Bridge> bridge = std::make_shared<Bridge>();
};

namespace {

// What the libssh callbacks of one session learn; lives on the SSH thread's stack.
struct SshState {
  ControlPlaneConfig config;  // only its user and password: the login
  SshListener::Mode mode;
  bool authed = false;
  int auth_failures = 0;
  ssh_channel channel = nullptr;
  bool ready = false;  // shell / subsystem accepted
  bool eof = false;
  std::string incoming;
  ssh_channel_callbacks_struct channel_cb{};
};

int on_password(ssh_session, const char* user, const char* password, void* userdata) {
  auto* st = static_cast<SshState*>(userdata);
  if (user && password && login_matches(st->config, user, password)) {
    st->authed = true;
    return SSH_AUTH_SUCCESS;
  }
  ++st->auth_failures;
  return SSH_AUTH_DENIED;
}

int on_data(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* userdata) {
  auto* st = static_cast<SshState*>(userdata);
  if (!is_stderr) st->incoming.append(static_cast<const char*>(data), len);
  return static_cast<int>(len);
}

void on_eof(ssh_session, ssh_channel, void* userdata) { static_cast<SshState*>(userdata)->eof = true; }

int on_pty(ssh_session, ssh_channel, const char*, int, int, int, int, void*) { return 0; }  // accepted, unused

int on_shell(ssh_session, ssh_channel, void* userdata) {
  auto* st = static_cast<SshState*>(userdata);
  if (st->mode != SshListener::Mode::kShell || st->ready) return 1;
  st->ready = true;
  return 0;
}

int on_subsystem(ssh_session, ssh_channel, const char* name, void* userdata) {
  auto* st = static_cast<SshState*>(userdata);
  if (st->mode != SshListener::Mode::kNetconf || st->ready || !name || std::string(name) != "netconf") return 1;
  st->ready = true;
  return 0;
}

ssh_channel on_channel_open(ssh_session session, void* userdata) {
  auto* st = static_cast<SshState*>(userdata);
  if (st->channel || !st->authed) return nullptr;  // one session channel per connection
  st->channel = ssh_channel_new(session);
  if (!st->channel) return nullptr;
  st->channel_cb = {};
  st->channel_cb.userdata = st;
  st->channel_cb.channel_data_function = on_data;
  st->channel_cb.channel_eof_function = on_eof;
  st->channel_cb.channel_pty_request_function = on_pty;
  st->channel_cb.channel_shell_request_function = on_shell;
  st->channel_cb.channel_subsystem_request_function = on_subsystem;
  ssh_callbacks_init(&st->channel_cb);
  ssh_set_channel_callbacks(st->channel, &st->channel_cb);
  return st->channel;
}

int drain_wake_fd(socket_t fd, int, void*) {
  uint64_t v;
  while (::read(fd, &v, sizeof(v)) > 0) {
  }
  return 0;
}

}  // namespace

SshListener::SshListener(boost::asio::io_context& io, const ListenAddress& where, std::string protocol, Mode mode,
                         const std::string& host_key, const ControlPlaneConfig& config, SessionFactory make,
                         SessionCounter open)
    : io_(io),
      protocol_(std::move(protocol)),
      mode_(mode),
      user_(config.user),
      password_(config.password),
      make_(std::move(make)),
      open_(std::move(open)) {
  auto fail = [&](const std::string& what) {
    std::string err = bind_ ? ssh_get_error(bind_) : "";
    if (bind_) ssh_bind_free(bind_);
    bind_ = nullptr;
    throw Error(protocol_ + " listener on " + where.to_string() + ": " + what + (err.empty() ? "" : ": " + err));
  };
  bind_ = ssh_bind_new();
  if (!bind_) fail("cannot allocate an SSH server");
  ssh_key key = nullptr;
  if (ssh_pki_import_privkey_base64(host_key.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) fail("bad host key");
  // The bind takes ownership of the imported key.
  if (ssh_bind_options_set(bind_, SSH_BIND_OPTIONS_IMPORT_KEY, key) != SSH_OK) {
    ssh_key_free(key);
    fail("cannot use the host key");
  }
  int port = where.port;
  int no = 0;
  ssh_bind_options_set(bind_, SSH_BIND_OPTIONS_BINDADDR, where.host.c_str());
  ssh_bind_options_set(bind_, SSH_BIND_OPTIONS_BINDPORT, &port);
  ssh_bind_options_set(bind_, SSH_BIND_OPTIONS_PROCESS_CONFIG, &no);  // never read the system's sshd config
  if (ssh_bind_listen(bind_) != SSH_OK) fail("cannot listen");
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(ssh_bind_get_fd(bind_), reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
  port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

SshListener::~SshListener() {
  stop();
  if (bind_) ssh_bind_free(bind_);
}

void SshListener::start() {
  acceptor_ = std::thread([this] { accept_loop(); });
}

void SshListener::accept_loop() {
  const int fd = ssh_bind_get_fd(bind_);
  while (!stopping_) {
    reap(false);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0 || stopping_) continue;
    ssh_session session = ssh_new();
    if (!session) continue;
    if (ssh_bind_accept(bind_, session) != SSH_OK) {
      ssh_free(session);
      continue;
    }
    std::lock_guard lock(mutex_);
    if (conns_.size() >= kMaxSessions) {
      spdlog::warn("{}: {} SSH sessions open, refusing another", protocol_, conns_.size());
      ssh_free(session);  // closes the socket
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = ssh_get_fd(session);
    // As the TCP listener does: a reply over one SSH packet (32 KiB, e.g. the cross-connects of
    // 600+ circuits) must not wait for the client's delayed ACK before its tail is sent.
    int one = 1;
    ::setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn* c = conn.get();
    conns_.push_back(std::move(conn));
    c->thread = std::thread([this, c, session] {
      serve(*c, session);
      c->finished = true;
    });
  }
}

void SshListener::reap(bool all) {
  std::list<std::unique_ptr<Conn>> done;
  {
    std::lock_guard lock(mutex_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all || (*it)->finished) {
        done.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) {
    if (all) {
      // Wake a thread blocked in libssh: shutting the socket down fails its poll at once.
      std::lock_guard lock(c->mutex);
      if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
      c->bridge->wake();
    }
  }
  for (auto& c : done) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void SshListener::stop() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  reap(true);
}

void SshListener::serve(Conn& conn, ssh_session session) {
  SshState st;
  st.config.user = user_;
  st.config.password = password_;
  st.mode = mode_;
  ssh_server_callbacks_struct server_cb{};
  server_cb.userdata = &st;
  server_cb.auth_password_function = on_password;
  server_cb.channel_open_request_session_function = on_channel_open;
  ssh_callbacks_init(&server_cb);
  ssh_set_server_callbacks(session, &server_cb);
  long timeout_s = std::chrono::duration_cast<std::chrono::seconds>(kLoginTime).count();
  ssh_options_set(session, SSH_OPTIONS_TIMEOUT, &timeout_s);
  ssh_set_auth_methods(session, SSH_AUTH_METHOD_PASSWORD);

  std::shared_ptr<Bridge> bridge = conn.bridge;
  ssh_event event = nullptr;
  bool started = false;
  auto deadline = std::chrono::steady_clock::now() + kLoginTime;
  if (ssh_handle_key_exchange(session) == SSH_OK && (event = ssh_event_new()) != nullptr &&
      ssh_event_add_session(event, session) == SSH_OK) {
    // Authentication and channel setup, bounded in time so a silent client cannot hold a thread.
    while (!stopping_ && !(st.authed && st.channel && st.ready) && st.auth_failures < kMaxAuthFailures &&
           std::chrono::steady_clock::now() < deadline) {
      if (ssh_event_dopoll(event, kPollMs) == SSH_ERROR) break;
    }
    started = !stopping_ && st.authed && st.channel && st.ready &&
              ssh_event_add_fd(event, bridge->wake_fd, POLLIN, drain_wake_fd, nullptr) == SSH_OK;
  }

  if (started) {
    SessionCounter open = open_;
    SessionFactory make = make_;
    std::weak_ptr<Bridge> weak = bridge;
    boost::asio::post(io_, [bridge, make, open, weak] {
      ++*open;
      bridge->session = make(
          [weak](std::string bytes) {
            if (auto b = weak.lock()) b->push(std::move(bytes));
          },
          [weak] {
            if (auto b = weak.lock()) b->close_later();
          });
      bridge->session->on_open();
    });
    for (;;) {
      if (!st.incoming.empty()) {
        boost::asio::post(io_, [bridge, bytes = std::move(st.incoming)] {
          if (bridge->session) bridge->session->on_bytes(bytes);
        });
        st.incoming.clear();
      }
      std::deque<std::string> out;
      bool close = false;
      {
        std::lock_guard lock(bridge->mutex);
        out.swap(bridge->out);
        close = bridge->close;
      }
      bool broken = false;
      for (const auto& bytes : out) {
        std::string_view rest = bytes;
        while (!rest.empty() && !broken) {
          int n = ssh_channel_write(st.channel, rest.data(), static_cast<uint32_t>(rest.size()));
          if (n == SSH_ERROR)
            broken = true;
          else
            rest.remove_prefix(static_cast<size_t>(n));
        }
      }
      if (broken || close || stopping_ || st.eof || !ssh_channel_is_open(st.channel)) break;
      if (ssh_event_dopoll(event, kPollMs) == SSH_ERROR) break;
    }
    // The loop closes and drops the protocol session; later replies go nowhere.
    boost::asio::post(io_, [bridge, open] {
      if (!bridge->session) return;
      bridge->session->closed();
      bridge->session.reset();
      --*open;
    });
  }

  if (event) {
    if (started) ssh_event_remove_fd(event, bridge->wake_fd);
    ssh_event_remove_session(event, session);
    ssh_event_free(event);
  }
  if (st.channel) {
    if (ssh_channel_is_open(st.channel)) {
      ssh_channel_send_eof(st.channel);
      ssh_channel_close(st.channel);
    }
    ssh_channel_free(st.channel);
  }
  {
    std::lock_guard lock(conn.mutex);
    conn.fd = -1;  // after this the descriptor number may be reused: stop() must not touch it
    ssh_disconnect(session);
    ssh_free(session);
  }
}

}  // namespace ocslab::emu
