#include <algorithm>
#include <memory>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

namespace {

// A shell, subsystem or command channel on an authenticated session.
class SshStream final : public Stream {
 public:
  explicit SshStream(const SshOptions& o)
      : session_(std::make_unique<SshSession>(o)),
        what_(session_->describe() + (!o.command.empty()     ? " (" + o.command + ")"
                                      : o.subsystem.empty() ? " (shell)"
                                                            : " (" + o.subsystem + ")")) {
    channel_ = ssh_channel_new(session_->get());
    if (!channel_ || ssh_channel_open_session(channel_) != SSH_OK) fail("open channel");
    if (!o.command.empty()) {
      if (ssh_channel_request_exec(channel_, o.command.c_str()) != SSH_OK) fail("exec '" + o.command + "'");
      return;
    }
    int rc = o.subsystem.empty() ? ssh_channel_request_shell(channel_)
                                 : ssh_channel_request_subsystem(channel_, o.subsystem.c_str());
    if (rc != SSH_OK) fail(o.subsystem.empty() ? "request shell" : "request subsystem " + o.subsystem);
  }

  ~SshStream() override { close(); }

  void write(std::string_view data) override {
    if (!channel_) throw ConnectionError(what_ + " is closed");
    while (!data.empty()) {
      int n = ssh_channel_write(channel_, data.data(), static_cast<uint32_t>(data.size()));
      if (n == SSH_ERROR) throw ConnectionError("write to " + what_ + " failed: " + ssh_get_error(session_->get()));
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string read_some(Deadline deadline) override {
    if (!channel_) throw ConnectionError(what_ + " is closed");
    char buf[16384];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) left = 0;
      int n =
          ssh_channel_read_timeout(channel_, buf, sizeof(buf), 0, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (n == SSH_ERROR) throw ConnectionError("read from " + what_ + " failed: " + ssh_get_error(session_->get()));
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
    if (session_) session_->close();
  }

  std::string describe() const override { return what_; }

 private:
  [[noreturn]] void fail(const std::string& step) {
    if (channel_) {
      ssh_channel_free(channel_);
      channel_ = nullptr;
    }
    session_->fail(step);
  }

  std::unique_ptr<SshSession> session_;
  ssh_channel channel_ = nullptr;
  std::string what_;
};

}  // namespace

std::unique_ptr<Stream> ssh_open(const SshOptions& options) { return std::make_unique<SshStream>(options); }

}  // namespace ocslab::ocs
