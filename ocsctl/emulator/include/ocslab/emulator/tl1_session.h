// One TL1 session of the emulated Polatis switch (docs/protocols.md#tl1), independent of its
// transport: bytes in, replies out through the send callback. Commands are handled one at a
// time in arrival order, so a reply held back until the mirrors settle keeps later replies
// behind it. Runs only on the emulator's event loop.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/emulator/protocol_session.h"
#include "ocslab/ocsctl/tl1_codec.h"

namespace ocslab::emu {

struct Tl1SessionOptions {
  bool logged_in = false;               // SSH: the SSH login already authenticated the user
  std::shared_ptr<LightEvents> events;  // autonomous REPT messages when config.autonomous
};

class Tl1Session final : public ProtocolSession {
 public:
  static constexpr size_t kMaxCommand = 64 * 1024;  // bytes without ';' before DENY + discard
  static constexpr size_t kMaxQueued = 4096;        // commands waiting behind a settling patch

  Tl1Session(SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config, SendFn send,
             Tl1SessionOptions options = {}, CloseFn close = {});
  ~Tl1Session() override;

  void on_bytes(std::string_view bytes) override;
  void closed() override;
  bool logged_in() const { return logged_in_; }

 private:
  struct Reply {
    bool ok = true;
    std::vector<std::string> data;
    std::string code, text;  // DENY
  };
  static Reply deny(std::string code, std::string text) { return Reply{false, {}, std::move(code), std::move(text)}; }

  void pump();
  // Returns false when the reply comes later (the session is busy until then).
  bool handle(const std::string& text);
  Reply execute(const ocs::Tl1Command& c, const std::string& verb, bool& later);
  Reply enter_patch(const ocs::Tl1Command& c, const std::string& verb, bool& later);
  std::optional<Reply> port_list(const std::string& aid, std::vector<Port>& out, bool& all) const;
  void finish(const std::string& ctag, const std::string& verb, const Reply& r);
  void on_light(Port egress, bool lit, double dbm);
  std::string header() const;
  std::string terminator() const;

  std::string buf_;
  bool in_quote_ = false;  // scan state at the end of buf_
  bool escaped_ = false;
  bool discarding_ = false;
  std::deque<std::string> queue_;
  bool busy_ = false;
  bool logged_in_;
  std::shared_ptr<LightEvents> events_;
  int light_sub_ = 0;
  int atag_ = 0;
  std::map<Port, std::string> pmon_wave_;
};

}  // namespace ocslab::emu
