// One SCPI session of the emulated Polatis switch (docs/protocols.md#scpi): CRLF lines of :OXC
// commands and IEEE 488.2 common commands, an error queue read with :SYST:ERR?, compound
// ';' lines. A CONNect command is overlapped, as on a real instrument: it is done once
// accepted and the next command runs while the mirrors move. *OPC? (and *WAI) are the
// operation-complete commands: with ack_after_settle they hold the session until every move
// this session started has settled, so replies stay in order. Runs only on the emulator's loop.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ocslab/emulator/protocol_session.h"
#include "ocslab/ocsctl/scpi_codec.h"

namespace ocslab::emu {

class ScpiSession final : public ProtocolSession {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;
  static constexpr size_t kMaxQueued = 4096;  // lines waiting behind a settling connect
  static constexpr size_t kQueueDepth = 16;   // error queue entries

  ScpiSession(SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config, SendFn send,
              CloseFn close = {});

  void on_bytes(std::string_view bytes) override;
  void closed() override;
  size_t queued_errors() const { return errors_.size(); }

 private:
  // One parsed line in progress: its commands, the next to run, the replies so far.
  struct Line {
    std::vector<ocs::ScpiCommand> commands;
    size_t next = 0;
    std::vector<std::string> replies;
  };

  void pump();
  void start_line(const std::string& text);
  void finish_line();
  // Runs one command; false when it completes later (*OPC? or *WAI waiting for the mirrors).
  bool run(const ocs::ScpiCommand& c);
  std::optional<std::string> execute(const ocs::ScpiCommand& c, bool& later, bool& ok);
  std::optional<std::string> common(const ocs::ScpiCommand& c, bool& later, bool& ok);
  std::optional<std::vector<ocs::Circuit>> circuits_arg(const ocs::ScpiCommand& c);
  std::optional<std::string> port_query(const ocs::ScpiCommand& c);
  std::optional<std::string> power_query(const ocs::ScpiCommand& c);
  bool connect(std::vector<ocs::Circuit> circuits);
  // The last pending move settled: completes a waiting *OPC? or *WAI and resumes the session.
  void operation_complete();
  void model_error(const ModelError& e);
  void push_error(int code, const std::string& message);
  static std::string subject_of(const ocs::ScpiCommand& c);

  std::string buf_;
  bool discarding_ = false;
  std::deque<std::string> lines_;
  std::optional<Line> line_;
  bool busy_ = false;
  size_t pending_moves_ = 0;  // CONNect commands of this session whose mirrors still move
  // The *OPC? (reply "1") or *WAI holding the session until pending_moves_ is 0.
  struct OpcWait {
    std::string subject;
    bool query = false;
  };
  std::optional<OpcWait> waiting_;
  ocs::ScpiErrorQueue errors_{kQueueDepth};
  uint64_t errors_pushed_ = 0;  // tells whether a command failed, even with a full queue
};

}  // namespace ocslab::emu
