#include "ocslab/ocsctl/ssh_session.h"

#include <algorithm>

#include "ocslab/ocsctl/errors.h"

namespace ocslab::ocs {

SshSession::SshSession(const SshOptions& o) : what_("ssh " + o.user + "@" + o.host + ":" + std::to_string(o.port)) {
  session_ = ssh_new();
  if (!session_) throw ConnectionError(what_ + ": cannot allocate an SSH session");
  long timeout_s = std::max<long>(1, static_cast<long>(o.connect_timeout.count() / 1000));
  int port = o.port;
  ssh_options_set(session_, SSH_OPTIONS_HOST, o.host.c_str());
  ssh_options_set(session_, SSH_OPTIONS_PORT, &port);
  ssh_options_set(session_, SSH_OPTIONS_USER, o.user.c_str());
  ssh_options_set(session_, SSH_OPTIONS_TIMEOUT, &timeout_s);
  // Never read ~/.ssh/config: the URL and options are the whole truth.
  int no = 0;
  ssh_options_set(session_, SSH_OPTIONS_PROCESS_CONFIG, &no);
  // TCP_NODELAY, as the TCP transports set it: a request over one SSH packet (32 KiB, e.g. an
  // edit-config of 600+ circuits) otherwise sends its tail only when the peer's delayed ACK of
  // the first packet comes, 40 ms later.
  int yes = 1;
  ssh_options_set(session_, SSH_OPTIONS_NODELAY, &yes);
  if (!o.known_hosts_file.empty()) {
    ssh_options_set(session_, SSH_OPTIONS_KNOWNHOSTS, o.known_hosts_file.c_str());
    ssh_options_set(session_, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  }
  if (ssh_connect(session_) != SSH_OK) fail("connect");
  verify_host(o);
  authenticate(o);
}

SshSession::~SshSession() { close(); }

void SshSession::close() {
  if (session_) {
    ssh_disconnect(session_);
    ssh_free(session_);
    session_ = nullptr;
  }
}

void SshSession::fail(const std::string& step) {
  std::string err = session_ ? ssh_get_error(session_) : "";
  close();
  throw ConnectionError(what_ + ": " + step + " failed" + (err.empty() ? "" : ": " + err));
}

void SshSession::verify_host(const SshOptions& o) {
  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      close();
      throw ConnectionError(what_ + ": host key differs from the one in known_hosts; refusing to connect");
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN:
      if (o.accept_unknown_host) return;
      close();
      throw ConnectionError(what_ + ": host key is not in known_hosts" +
                            (o.known_hosts_file.empty() ? "" : " (" + o.known_hosts_file + ")") +
                            "; add it (ssh-keyscan) or pass the lab's known_hosts file");
    default:
      fail("host key check");
  }
}

void SshSession::authenticate(const SshOptions& o) {
  if (!o.identity_file.empty()) {
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(o.identity_file.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
      close();
      throw ConnectionError(what_ + ": cannot read private key '" + o.identity_file + "'");
    }
    int rc = ssh_userauth_publickey(session_, nullptr, key);
    ssh_key_free(key);
    if (rc == SSH_AUTH_SUCCESS) return;
  } else if (ssh_userauth_publickey_auto(session_, nullptr, nullptr) == SSH_AUTH_SUCCESS) {
    return;
  }
  if (o.password) {
    if (ssh_userauth_password(session_, nullptr, o.password->c_str()) == SSH_AUTH_SUCCESS) return;
    if (keyboard_interactive(*o.password)) return;
  }
  close();
  throw ConnectionError(what_ + ": authentication refused (tried " +
                        std::string(o.identity_file.empty() ? "agent/default keys" : "key " + o.identity_file) +
                        (o.password ? ", password" : "") + ")");
}

bool SshSession::keyboard_interactive(const std::string& password) {
  int rc = ssh_userauth_kbdint(session_, nullptr, nullptr);
  while (rc == SSH_AUTH_INFO) {
    int prompts = ssh_userauth_kbdint_getnprompts(session_);
    for (int i = 0; i < prompts; ++i)
      ssh_userauth_kbdint_setanswer(session_, static_cast<unsigned>(i), password.c_str());
    rc = ssh_userauth_kbdint(session_, nullptr, nullptr);
  }
  return rc == SSH_AUTH_SUCCESS;
}

namespace {

// One stream of a command's output, bounded: the first half of the cap as it came, then the
// latest bytes (held up to twice the other half between trims, so trimming stays amortised).
class KeptOutput {
 public:
  explicit KeptOutput(size_t cap) : head_cap_(cap / 2), tail_cap_(cap - cap / 2) {}

  void add(std::string_view s) {
    total_ += s.size();
    size_t h = std::min(s.size(), head_cap_ - head_.size());
    head_.append(s.substr(0, h));
    s.remove_prefix(h);
    if (s.empty()) return;
    tail_.append(s);
    if (tail_.size() > 2 * tail_cap_ + 1) trim();
  }

  uint64_t total() const { return total_; }

  // The kept text; `dropped` gets how many bytes were left out between head and tail.
  std::string take(uint64_t& dropped) {
    trim();
    dropped = total_ - head_.size() - tail_.size();
    if (dropped == 0) return std::move(head_) + tail_;
    return std::move(head_) + "\n[... " + std::to_string(dropped) + " bytes dropped ...]\n" + tail_;
  }

 private:
  void trim() {
    if (tail_.size() > tail_cap_) tail_.erase(0, tail_.size() - tail_cap_);
  }
  size_t head_cap_, tail_cap_;
  std::string head_, tail_;
  uint64_t total_ = 0;
};

}  // namespace

ExecResult SshSession::exec(const std::string& command, std::chrono::milliseconds timeout, const std::string& input,
                            const std::function<void(std::string_view)>& on_output,
                            const std::function<void()>& on_tick, size_t max_kept) {
  if (!session_) throw ConnectionError(what_ + " is closed");
  ssh_channel ch = ssh_channel_new(session_);
  if (!ch) fail("open channel");
  // fail() closes the session, and ssh_free frees the session's channels with it: the guard then
  // has nothing left to free (freeing it again crashed when a dropped connection failed an exec).
  struct ChannelGuard {
    ssh_channel c;
    const ssh_session& session;
    ~ChannelGuard() {
      if (!session) return;
      ssh_channel_close(c);
      ssh_channel_free(c);
    }
  } guard{ch, session_};
  if (ssh_channel_open_session(ch) != SSH_OK) fail("open channel");
  if (ssh_channel_request_exec(ch, command.c_str()) != SSH_OK) fail("exec '" + command + "'");
  std::string_view in = input;
  while (!in.empty()) {
    int n = ssh_channel_write(ch, in.data(), static_cast<uint32_t>(in.size()));
    if (n == SSH_ERROR) fail("write to '" + command + "'");
    in.remove_prefix(static_cast<size_t>(n));
  }
  ssh_channel_send_eof(ch);

  ExecResult r;
  KeptOutput out(max_kept), err(max_kept);
  auto deadline = Clock::now() + timeout;
  char buf[16384];
  for (;;) {
    if (on_tick) on_tick();
    // Before every read, not only when the streams are quiet: a command that prints without
    // end must still be stopped at its deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      throw TimeoutError(what_ + ": '" + command + "' did not finish within " + std::to_string(timeout.count()) +
                         " ms (" + std::to_string(out.total()) + " bytes of output, " + std::to_string(err.total()) +
                         " of error output)");
    }
    bool got = false;
    for (int is_stderr = 0; is_stderr < 2; ++is_stderr) {
      int n = ssh_channel_read_nonblocking(ch, buf, sizeof(buf), is_stderr);
      if (n == SSH_ERROR) fail("read from '" + command + "'");
      if (n > 0) {
        std::string_view piece(buf, static_cast<size_t>(n));
        (is_stderr ? err : out).add(piece);
        if (!is_stderr && on_output) on_output(piece);
        got = true;
      }
    }
    if (got) continue;
    if (ssh_channel_is_eof(ch) || !ssh_channel_is_open(ch)) break;
    // Waits for either stream (libssh polls the session for both).
    int n = ssh_channel_read_timeout(ch, buf, sizeof(buf), 0, static_cast<int>(std::min<long long>(left, 200)));
    if (n == SSH_ERROR) fail("read from '" + command + "'");
    if (n > 0) {
      std::string_view piece(buf, static_cast<size_t>(n));
      out.add(piece);
      if (on_output) on_output(piece);
    }
  }
  r.out = out.take(r.out_dropped);
  r.err = err.take(r.err_dropped);
  r.exit_status = ssh_channel_get_exit_status(ch);
  return r;
}

}  // namespace ocslab::ocs
