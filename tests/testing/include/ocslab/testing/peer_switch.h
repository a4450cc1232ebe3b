// The switch state behind the grammar test peers: an N x M circuit table with port power,
// guarded by a mutex so several sessions share it, optionally persisted to a JSON file so
// peers started per SSH session by sshd share it too. Deliberately simple: the full device
// model is the OCS emulator's job.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/ocsctl/types.h"

namespace ocslab::testing {

// Behaviour switches that let one peer play many real-world dialects and faults.
struct PeerQuirks {
  bool prompt = false;              // TL1: send "<" after each reply's ';'
  bool bare_lf = false;             // LF line ends instead of CRLF
  bool autonomous = false;          // TL1: an autonomous REPT block before every reply
  bool split_writes = false;        // write replies a few bytes at a time with small pauses
  int reply_delay_ms = 0;           // sleep before each reply
  std::string drop_on;              // close the connection when a command contains this text
  std::string never_reply_to;       // swallow commands containing this text (no reply)
  std::string garbage_on;           // answer commands containing this text with junk bytes
  std::string deny_on;              // answer commands containing this text with a refusal
  int faults_after = 0;             // TL1: drop_on/deny_on spare the first N matching commands of a session
  bool netconf_base11 = true;       // NETCONF: advertise base:1.1 (chunked framing)
  std::string netconf_revision = "2018-01-09";  // optical-switch revision (< 2017-08-04: "pairs")
  bool replace_patched = false;     // entering a patch on a patched port replaces instead of denying
  std::string user = "admin";       // TL1 ACT-USER / SSH peers accept only this login
  std::string password = "root";
};

class PeerSwitch {
 public:
  PeerSwitch(int ingress, int egress, std::string state_file = {});

  int ingress_ports() const { return ingress_; }
  int egress_ports() const { return egress_; }
  bool valid(ocs::Port p) const { return p >= 1 && p <= ingress_ + egress_; }
  bool is_ingress(ocs::Port p) const { return p >= 1 && p <= ingress_; }
  bool is_egress(ocs::Port p) const { return p > ingress_ && p <= ingress_ + egress_; }

  // Returns an error text (empty on success). All-or-nothing per call.
  std::string connect(const std::vector<ocs::Circuit>& circuits, bool replace);
  // Deletes circuits with any of these ports at either end; empty = all.
  std::string disconnect(const std::vector<ocs::Port>& ports);
  std::vector<ocs::Circuit> circuits() const;
  // Lit egress ports: -3.0 dBm minus 0.1 dB per port index step; dark: -60.0.
  double power_dbm(ocs::Port p) const;

  std::mutex& mutex() { return mutex_; }

  // Every request a peer received, in order (so tests can assert what was, or was not, sent).
  // With a state file it is also appended to STATE.history, shared by every peer process.
  void record(const std::string& request);
  std::vector<std::string> history() const;
  void clear_history();

 private:
  void load() const;
  void save() const;

  int ingress_, egress_;
  std::string state_file_;
  mutable std::map<ocs::Port, ocs::Port> by_ingress_;  // reloaded from state_file_
  mutable std::mutex mutex_;
  std::vector<std::string> history_;
};

}  // namespace ocslab::testing
