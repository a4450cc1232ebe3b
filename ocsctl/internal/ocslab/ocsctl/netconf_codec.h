// NETCONF wire format shared by the driver, the grammar test peer and the OCS emulator:
// RFC 6242 framing (end-of-message and chunked) as an incremental decoder/encoder, and the
// RFC 6241 XML messages (hello, rpc, rpc-reply, rpc-error) plus the Polatis optical-switch
// payloads (cross-connects, opm-power, product-information) built and parsed with pugixml.
#pragma once

#include <pugixml.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

inline constexpr const char* kNetconfBase10 = "urn:ietf:params:netconf:base:1.0";
inline constexpr const char* kNetconfBase11 = "urn:ietf:params:netconf:base:1.1";
inline constexpr const char* kNetconfNs = "urn:ietf:params:xml:ns:netconf:base:1.0";
inline constexpr const char* kOpticalSwitchNs = "http://www.polatis.com/yang/optical-switch";
inline constexpr const char* kPolatisSwitchNs = "http://www.polatis.com/yang/polatis-switch";
// The optical-switch module renamed the cross-connect list from "pairs" to "pair" here.
inline constexpr const char* kPairRenameRevision = "2017-08-04";
inline constexpr size_t kDefaultMaxNetconfMessage = size_t{64} << 20;

enum class Framing {
  kEndOfMessage,  // base:1.0, "]]>]]>" after each message (always used for <hello>)
  kChunked,       // base:1.1, "\n#<len>\n<data>...\n##\n"
};

// Splits a byte stream into NETCONF messages. Bytes are buffered by feed() and only cut
// into messages by next(), so the framing can be switched right after the hello has been
// taken out even when the peer's first chunked message arrived in the same read.
class FrameDecoder {
 public:
  explicit FrameDecoder(Framing framing = Framing::kEndOfMessage,
                        size_t max_message = kDefaultMaxNetconfMessage);

  void set_framing(Framing framing);
  Framing framing() const { return framing_; }
  void feed(std::string_view bytes);
  // The next complete message, or nullopt when more bytes are needed. Throws
  // ProtocolError describing the violation (bad chunk header, size out of range, message
  // larger than max_message); the decoder is then unusable.
  std::optional<std::string> next();
  // Bytes received but not yet part of a returned message.
  size_t pending() const { return buffer_.size() - pos_ + message_.size(); }

 private:
  std::optional<std::string> next_eom();
  std::optional<std::string> next_chunked();
  [[noreturn]] void fail(const std::string& what);

  enum class State { kLf, kHash, kSizeOrEnd, kSize, kEndLf, kData };
  Framing framing_;
  size_t max_message_;
  std::string buffer_;
  size_t pos_ = 0;       // first unconsumed byte of buffer_
  size_t eom_scan_ = 0;  // EOM: where to resume searching for the delimiter
  State state_ = State::kLf;
  std::string message_;  // chunked: data of the message being assembled
  uint64_t chunk_left_ = 0;
  std::string size_digits_;
  bool failed_ = false;
};

// One message framed for the wire. max_chunk > 0 splits chunked output into several chunks.
std::string encode_frame(std::string_view message, Framing framing, size_t max_chunk = 0);

// ---- XML ----------------------------------------------------------------------------

// A parsed NETCONF message; root is the document element (hello, rpc, rpc-reply, ...).
struct NetconfMessage {
  std::shared_ptr<pugi::xml_document> doc;
  pugi::xml_node root;
  std::string kind;  // root's local name
};

// Throws ProtocolError (with the parser's reason and offset) for malformed XML.
NetconfMessage parse_netconf_message(std::string_view xml);

// Element names without a namespace prefix ("nc:rpc-reply" -> "rpc-reply").
std::string_view local_name(const char* qualified);
pugi::xml_node child_local(pugi::xml_node parent, std::string_view local);
std::vector<pugi::xml_node> children_local(pugi::xml_node parent, std::string_view local);
// Trimmed text of a child element; nullopt when the child is absent.
std::optional<std::string> child_text(pugi::xml_node parent, std::string_view local);
// An attribute by local name (operation, nc:operation, xc:operation).
std::optional<std::string> attribute_local(pugi::xml_node node, std::string_view local);
// Every element under (and including) node with this local name, depth-first.
std::vector<pugi::xml_node> descendants_local(pugi::xml_node node, std::string_view local);
// Compact one-line serialisation, used for logs and test histories.
std::string xml_text(pugi::xml_node node);
std::string xml_escape(std::string_view text);

struct Hello {
  std::vector<std::string> capabilities;
  std::string session_id;         // empty in a client hello
  bool base10 = false;
  bool base11 = false;
  std::string optical_revision;   // YYYY-MM-DD from the optical-switch capability, or empty
};

std::string build_hello(const std::vector<std::string>& capabilities, std::string_view session_id = {});
// Throws ProtocolError when msg is not a hello or advertises no base capability.
Hello parse_hello(const NetconfMessage& msg);
// "pairs" for optical-switch revisions before 2017-08-04, else "pair" (also when unknown:
// the newer name is the one current firmware uses).
std::string pair_list_name(std::string_view revision);

// <rpc message-id="id" xmlns=base>body</rpc>; body must be well-formed XML (one or more
// elements). Throws std::invalid_argument otherwise (a programming error, not the switch's).
std::string build_rpc(uint64_t message_id, std::string_view body);

struct RpcReply {
  std::string message_id;  // empty when the server omitted it (allowed for malformed-message)
  bool ok = false;         // <ok/>
  pugi::xml_node data;     // <data>, or null
  NetconfMessage msg;      // keeps data alive
};

// Throws DenyError("rpc-error <tag> (<type>): <message>", tag, message) for the first
// rpc-error of severity error; ProtocolError when msg is not an rpc-reply.
RpcReply parse_rpc_reply(const NetconfMessage& msg);

// Request side (test peer, emulator).
struct RpcRequest {
  std::string message_id;
  std::string operation;  // local name of the operation element (get, edit-config, ...)
  pugi::xml_node op;      // the operation element
  NetconfMessage msg;     // keeps op alive
};
// Throws ProtocolError when msg is not an <rpc> with exactly one operation element.
RpcRequest parse_rpc(const NetconfMessage& msg);

struct RpcError {
  std::string type = "application";  // transport, rpc, protocol, application
  std::string tag;                   // invalid-value, operation-not-supported, ...
  std::string severity = "error";
  std::string message;
};
std::string build_ok_reply(std::string_view message_id);
// data_inner: XML placed inside <data> (may be empty).
std::string build_data_reply(std::string_view message_id, std::string_view data_inner);
std::string build_error_reply(std::string_view message_id, const RpcError& error);

// ---- Polatis optical-switch payloads --------------------------------------------------

// <get><filter type="subtree">filter_inner</filter></get>
std::string build_get(std::string_view filter_inner);
// <edit-config> on running with config_inner inside <config>.
std::string build_edit_config(std::string_view config_inner);
// <cross-connects> merging `add` and deleting the pairs keyed by `delete_ingress`, with the
// list element named list_name ("pair" or "pairs").
std::string build_cross_connects(const std::vector<Circuit>& add, const std::vector<Port>& delete_ingress,
                                 std::string_view list_name);
std::string build_opm_power_filter(const std::vector<Port>& ports);

// Circuits under data's cross-connects, accepting both list names and skipping pairs
// marked operation="delete"/"remove". Throws ProtocolError
// for a pair without a numeric ingress/egress.
std::vector<Circuit> parse_cross_connects(pugi::xml_node data);
// (port, dBm) under data's opm-power. Throws ProtocolError for non-numeric values.
std::vector<PortPower> parse_opm_power(pugi::xml_node data);
// Port ids under data's port-config.
std::vector<Port> parse_port_config_ids(pugi::xml_node data);

struct ProductInformation {
  std::string manufacturer, model, serial, software_version;
};
ProductInformation parse_product_information(pugi::xml_node data);

// "N x M" from a Polatis model name such as "...-48x48-..." or "384x384"; "NxCC" (any port
// to any port) is returned as N/2 x N/2 since ocslab addresses circuits as ingress->egress.
std::optional<std::pair<int, int>> switch_size_from_model(std::string_view model);

// ---- Server side of a cross-connects edit-config (test peer, emulator) ----------------
//
// The emulator and the grammar test peer must agree on what an edit-config on
// cross-connects means (RFC 6241 §7.2 operations on the Polatis pair list), so the
// evaluation lives here once; each server only applies the result to its own switch.

struct CrossConnectEditRules {
  std::string_view list_name;  // the pair list element the server expects ("pair" or "pairs")
  std::string_view revision;   // optical-switch revision, named when the list name is wrong
  // A merge onto an egress that is already connected moves it (else the edit fails in-use).
  bool replace_patched = false;
  std::function<bool(Port)> is_ingress, is_egress;
  // Wording only (tags and outcomes never differ): the emulator speaks like the switch
  // firmware ("Invalid OXC port: 9", request text cut to 64 characters, the pair used twice
  // named); the test peer keeps its shorter texts, which its own tests were written against.
  std::string_view port_noun = "OXC port";
  size_t echo_limit = 64;  // std::string::npos: echo request text whole
  bool name_pair_used_twice = true;
};

// What the server must do to its switch: disconnect `drop` (by ingress), then connect `add`.
// Both empty when the edit changes nothing.
struct CrossConnectEdit {
  std::vector<Port> drop;
  std::vector<Circuit> add;
};

// Evaluates <edit-config> (`op`, the operation element) against the `current` circuits:
// target must be running; per cross-connects container operation delete/remove clears all;
// per pair merge/replace/create/delete/remove; deletes apply first, then merges re-key their
// ingress; a port used twice, a taken egress (unless replace_patched), a bad port or operation
// yields the RpcError the server should reply with. Nothing is applied: the result is
// all-or-nothing by construction.
std::variant<CrossConnectEdit, RpcError> evaluate_cross_connect_edit(const std::vector<Circuit>& current,
                                                                     pugi::xml_node op,
                                                                     const CrossConnectEditRules& rules);

// Strict decimal port number (1..INT_MAX); throws ProtocolError naming `what`.
Port parse_port_number(std::string_view text, std::string_view what);

}  // namespace ocslab::ocs
