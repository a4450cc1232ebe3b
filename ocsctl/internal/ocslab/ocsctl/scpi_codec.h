// Text codec for the Polatis SCPI command set (docs/protocols.md#scpi): parses the replies the
// driver reads, and parses/formats command lines so test peers and the OCS emulator speak
// the same grammar as the driver. Pure functions; malformed input throws ProtocolError
// quoting the offending text.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

// Upper bounds that keep a hostile or corrupt reply from expanding into gigabytes:
// (@1:2000000000) is syntactically fine but no switch has that many ports.
inline constexpr Port kScpiMaxPort = 1'000'000;
inline constexpr size_t kScpiMaxChannels = 65'536;  // per parsed line

// "text" for error messages: control bytes escaped, cut to about 200 characters.
std::string scpi_quote(std::string_view text);

// ---- reply side (what the switch prints) ----

// One or more comma-separated channel lists: "(@1,2,5:8),(@17, 18)". Ranges expand in the
// order written (5:8 -> 5,6,7,8; 8:5 -> 8,7,6,5); "(@)" is an empty list.
std::vector<std::vector<Port>> parse_scpi_channel_lists(std::string_view text);

// :OXC:SWITch:CONNect:STATe? -> "(@1,2),(@17,18)": the two lists pair up in order.
std::vector<Circuit> parse_scpi_connections(std::string_view line);

// :PMON:POW? -> "(-29.55,-30.05)" (parentheses optional), one finite value per port asked.
std::vector<double> parse_scpi_power(std::string_view line);

struct ScpiIdentity {
  std::string vendor, model, serial, version;
};
// *IDN? -> "Polatis,<model>,<serial>,<version>".
ScpiIdentity parse_scpi_idn(std::string_view line);

// :OXC:SWITch:SIZE? -> "192,192": {ingress ports, egress ports}.
std::pair<int, int> parse_scpi_size(std::string_view line);

struct ScpiErrorEntry {
  int code = 0;         // 0: no error; negative: SCPI standard classes; positive: device specific
  std::string message;  // unquoted, "" escapes undone
};
// :SYST:ERR? -> '0,"No error"' or '-222,"Data out of range"'.
ScpiErrorEntry parse_scpi_error(std::string_view line);

// *OPC? -> "1" (or "+1"), sent only once every operation the earlier commands started has
// finished (IEEE 488.2 operation complete: for a switch, the end of switching). No other
// answer is defined; anything else, "0" included, throws ProtocolError quoting it.
void parse_scpi_opc(std::string_view line);

// :OXC:SWITch:CONNect:PORT? 2 -> '"18"'; nullopt when the port is not connected ("" or "0").
std::optional<Port> parse_scpi_port_reply(std::string_view line);

// ---- request side (what the client sends) ----

struct ScpiCommand {
  std::string text;                 // the command as written (trimmed), for logs and records
  std::vector<std::string> header;  // absolute path, upper-cased: {"OXC","SWITCH","CONNECT","ADD"}
                                    // or {"*IDN"} for a common command
  bool query = false;               // header ended in '?'
  std::vector<std::string> args;    // top-level comma-separated arguments, trimmed
  std::vector<std::vector<Port>> channel_lists;  // the arguments written as (@...), in order

  bool common() const { return !header.empty() && header[0].starts_with('*'); }
  // Does the header match a pattern in SCPI manual notation, e.g. "OXC:SWITch:CONNect:ADD"
  // or "SYSTem:ERRor[:NEXT]"? Each mnemonic matches its short form (the upper-case letters)
  // or its long form, in any case; [..] marks an optional mnemonic. The '?' is not part of it.
  bool is(std::string_view pattern) const;
};

// Splits a line at top-level ';' and parses each command. A header without a leading ':'
// after the first command is relative to the previous command's path, as SCPI specifies
// (":OXC:SWIT:CONN:ADD (@1),(@17);SUB (@2),(@18)"). Throws ProtocolError on bad syntax.
std::vector<ScpiCommand> parse_scpi_command_line(std::string_view line);

// "(@1:4,7,9)": runs of three or more consecutive ascending ports become a:b.
std::string format_scpi_channel_list(const std::vector<Port>& ports);
// "(@1,2),(@17,18)": ingress list, egress list, paired in order.
std::string format_scpi_connections(const std::vector<Circuit>& circuits);

// ---- server side (test peer, emulator) ----

// SCPI string data for a reply field: "text" with embedded quotes doubled.
std::string format_scpi_string(std::string_view text);

// The IEEE 488.2 error queue behind :SYST:ERR?, the same in the emulator and the test peer.
class ScpiErrorQueue {
 public:
  explicit ScpiErrorQueue(size_t depth) : depth_(depth) {}
  // A full queue keeps its oldest entries and marks the loss at the end (-350 Queue overflow).
  void push(int code, std::string message);
  // The :SYST:ERR? reply for the oldest entry, which it removes; '0,"No error"' when empty.
  std::string pop_reply();
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  size_t depth_;
  std::deque<ScpiErrorEntry> entries_;
};

}  // namespace ocslab::ocs
