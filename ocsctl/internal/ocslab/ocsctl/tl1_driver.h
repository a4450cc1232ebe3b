// OcsDriver for TL1 (Polatis dialect, docs/protocols.md#tl1) over raw TCP or an SSH shell channel.
// Over raw TCP the driver logs in with ACT-USER (a password is required); over SSH the SSH
// login authenticates the session and ACT-USER is sent only when a password is configured.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/ocsctl/tl1_codec.h"

namespace ocslab::ocs {

class Tl1Driver final : public OcsDriver {
 public:
  Tl1Driver(SwitchUrl url, DriverOptions options);
  ~Tl1Driver() override;

  std::vector<std::string> render_commands(const MappingDiff& diff) const override;

 protected:
  void do_open() override;
  void do_close() override;
  SwitchInfo do_info() override;
  std::vector<Circuit> do_list() override;
  void do_connect(const std::vector<Circuit>& circuits) override;
  void do_disconnect(const std::vector<Port>& ports) override;
  std::vector<PortPower> do_power(const std::vector<Port>& ports) override;

 private:
  // Sends one command (`line`: as written, with its "\r\n") and waits for the response carrying
  // its ctag; autonomous blocks seen meanwhile go to emit_event. `shown` is what timings and
  // errors may reveal (the command without its line end; a redacted login).
  // The response lives in the parser (no copy per round trip): it is valid until the next
  // request. Throws DenyError, TimeoutError, ConnectionError, ProtocolError.
  const Tl1Block& transact(std::string_view line, std::string_view shown, std::string_view ctag, bool timed = true,
                           std::chrono::milliseconds timeout = std::chrono::milliseconds{0});
  const Tl1Block& exchange(std::string_view line, std::string_view shown, std::string_view ctag, bool timed,
                           std::chrono::milliseconds timeout);
  const Tl1Block& request(std::string_view verb_and_fields_before_ctag, std::string_view after_ctag);
  // Sends the request in line_: the text before the ctag written there up to `at`, then the
  // ctag, after_ctag and the line end, for which the caller left kAfterHead +
  // after_ctag.size() bytes of room. The response's text is built only on demand
  // (parser_.block_text()).
  const Tl1Block& send_line(char* at, std::string_view after_ctag);
  // line_ with room for `size` bytes; what it held is not kept.
  char* line_buffer(size_t size);
  static constexpr size_t kMaxCtag = 20;  // digits of ctag_
  static constexpr size_t kAfterHead = kMaxCtag + 2;  // ctag and "\r\n"
  std::string next_ctag() { return std::to_string(ctag_++); }
  std::string user() const;
  void close_stream();
  void keepalive_loop();
  void stop_keepalive();

  std::unique_ptr<Stream> stream_;
  Tl1ReplyParser parser_;
  // Reused across round trips, so that a steady stream of requests allocates nothing.
  std::unique_ptr<char[]> line_;          // the request being built, then written
  size_t line_capacity_ = 0;
  std::vector<Circuit> sorted_circuits_;  // request ports in ascending order
  std::vector<Port> sorted_ports_;
  unsigned long ctag_ = 1;
  bool logged_in_ = false;  // ACT-USER accepted on the current stream
  Clock::time_point last_io_{};  // guarded by call_mutex()

  std::thread keepalive_;
  std::mutex keepalive_mutex_;
  std::condition_variable keepalive_cv_;
  bool stopping_ = false;  // guarded by keepalive_mutex_
};

}  // namespace ocslab::ocs
