#include <libssh/libssh.h>

#include <cstdlib>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

namespace {

class SshStream final : public Stream {
 public:
  explicit SshStream(const SshOptions& o)
      : what_("ssh " + o.user + "@" + o.host + ":" + std::to_string(o.port) +
              (o.subsystem.empty() ? " (shell)" : " (" + o.subsystem + ")")) {
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
    if (!o.known_hosts_file.empty()) {
      ssh_options_set(session_, SSH_OPTIONS_KNOWNHOSTS, o.known_hosts_file.c_str());
      ssh_options_set(session_, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
    }
    if (ssh_connect(session_) != SSH_OK) fail("connect");
    verify_host(o);
    authenticate(o);
    channel_ = ssh_channel_new(session_);
    if (!channel_ || ssh_channel_open_session(channel_) != SSH_OK) fail("open channel");
    int rc = o.subsystem.empty() ? ssh_channel_request_shell(channel_)
                                 : ssh_channel_request_subsystem(channel_, o.subsystem.c_str());
    if (rc != SSH_OK) fail(o.subsystem.empty() ? "request shell" : "request subsystem " + o.subsystem);
  }

  ~SshStream() override { close(); }

  void write(std::string_view data) override {
    if (!channel_) throw ConnectionError(what_ + " is closed");
    while (!data.empty()) {
      int n = ssh_channel_write(channel_, data.data(), static_cast<uint32_t>(data.size()));
      if (n == SSH_ERROR) throw ConnectionError("write to " + what_ + " failed: " + ssh_get_error(session_));
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string read_some(Deadline deadline) override {
    if (!channel_) throw ConnectionError(what_ + " is closed");
    char buf[16384];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) left = 0;
      int n = ssh_channel_read_timeout(channel_, buf, sizeof(buf), 0, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (n == SSH_ERROR) throw ConnectionError("read from " + what_ + " failed: " + ssh_get_error(session_));
      if (n > 0) return std::string(buf, static_cast<size_t>(n));
      if (ssh_channel_is_eof(channel_) || !ssh_channel_is_open(channel_)) {
        throw ConnectionError("connection closed by " + what_);
      }
      if (Clock::now() >= deadline) return {};
    }
  }

  void close() override {
    if (channel_) {
      ssh_channel_close(channel_);
      ssh_channel_free(channel_);
      channel_ = nullptr;
    }
    if (session_) {
      ssh_disconnect(session_);
      ssh_free(session_);
      session_ = nullptr;
    }
  }

  std::string describe() const override { return what_; }

 private:
  [[noreturn]] void fail(const std::string& step) {
    std::string err = session_ ? ssh_get_error(session_) : "";
    close();
    throw ConnectionError(what_ + ": " + step + " failed" + (err.empty() ? "" : ": " + err));
  }

  void verify_host(const SshOptions& o) {
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

  void authenticate(const SshOptions& o) {
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

  bool keyboard_interactive(const std::string& password) {
    int rc = ssh_userauth_kbdint(session_, nullptr, nullptr);
    while (rc == SSH_AUTH_INFO) {
      int prompts = ssh_userauth_kbdint_getnprompts(session_);
      for (int i = 0; i < prompts; ++i) ssh_userauth_kbdint_setanswer(session_, static_cast<unsigned>(i), password.c_str());
      rc = ssh_userauth_kbdint(session_, nullptr, nullptr);
    }
    return rc == SSH_AUTH_SUCCESS;
  }

  ssh_session session_ = nullptr;
  ssh_channel channel_ = nullptr;
  std::string what_;
};

}  // namespace

std::unique_ptr<Stream> ssh_open(const SshOptions& options) { return std::make_unique<SshStream>(options); }

}  // namespace ocslab::ocs
