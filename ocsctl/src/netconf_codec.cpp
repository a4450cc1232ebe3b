#include "ocslab/ocsctl/netconf_codec.h"
#include "ocslab/common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <limits>
#include <map>
#include <set>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace ocslab::ocs {

namespace {

constexpr std::string_view kEom = "]]>]]>";
constexpr uint64_t kMaxChunk = 4294967295ULL;  // RFC 6242 chunk-size upper bound

std::string describe_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u == '\n') return "LF";
  if (std::isprint(u)) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

struct StringWriter : pugi::xml_writer {
  std::string out;
  void write(const void* data, size_t size) override { out.append(static_cast<const char*>(data), size); }
};

std::string serialise(const pugi::xml_node& node) {
  StringWriter w;
  node.print(w, "", pugi::format_raw, pugi::encoding_utf8);
  return w.out;
}

// Appends a well-formed fragment under parent; a malformed one is our own bug.
void append_fragment(pugi::xml_node parent, std::string_view fragment) {
  if (fragment.empty()) return;
  auto r = parent.append_buffer(fragment.data(), fragment.size());
  if (!r) throw std::invalid_argument(std::string("malformed XML fragment: ") + r.description());
}

std::string document_text(const pugi::xml_document& doc) {
  StringWriter w;
  w.out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";
  doc.save(w, "", pugi::format_raw | pugi::format_no_declaration, pugi::encoding_utf8);
  return w.out;
}

pugi::xml_node reply_root(pugi::xml_document& doc, std::string_view message_id) {
  auto root = doc.append_child("rpc-reply");
  root.append_attribute("xmlns") = kNetconfNs;
  if (!message_id.empty()) root.append_attribute("message-id") = std::string(message_id).c_str();
  return root;
}

pugi::xml_node find_container(pugi::xml_node data, std::string_view local) {
  if (!data) return {};
  if (local_name(data.name()) == local) return data;
  return child_local(data, local);
}

double parse_double(const std::string& text, std::string_view what) {
  const char* b = text.c_str();
  char* end = nullptr;
  double v = std::strtod(b, &end);
  if (text.empty() || end != b + text.size()) {
    throw ProtocolError(fmt::format("{}: '{}' is not a number", what, text));
  }
  return v;
}

}  // namespace

// ---- framing --------------------------------------------------------------------------

FrameDecoder::FrameDecoder(Framing framing, size_t max_message) : framing_(framing), max_message_(max_message) {}

void FrameDecoder::set_framing(Framing framing) {
  if (framing_ == Framing::kChunked && (state_ != State::kLf || !message_.empty())) {
    throw std::logic_error("FrameDecoder: framing changed inside a chunked message");
  }
  framing_ = framing;
  state_ = State::kLf;
  eom_scan_ = pos_;
}

void FrameDecoder::feed(std::string_view bytes) {
  // Drop consumed bytes once they dominate the buffer, keeping feed/next amortised O(n).
  if (pos_ > 4096 && pos_ * 2 > buffer_.size()) {
    buffer_.erase(0, pos_);
    eom_scan_ -= std::min(eom_scan_, pos_);
    pos_ = 0;
  }
  buffer_.append(bytes);
}

void FrameDecoder::fail(const std::string& what) {
  failed_ = true;
  throw ProtocolError("NETCONF framing error: " + what);
}

std::optional<std::string> FrameDecoder::next() {
  if (failed_) throw ProtocolError("NETCONF framing error: decoder used after an earlier error");
  return framing_ == Framing::kEndOfMessage ? next_eom() : next_chunked();
}

std::optional<std::string> FrameDecoder::next_eom() {
  size_t from = std::max(pos_, eom_scan_);
  size_t at = buffer_.find(kEom, from);
  if (at == std::string::npos) {
    if (buffer_.size() - pos_ > max_message_) {
      fail(fmt::format("no end-of-message marker ]]>]]> within {} bytes", max_message_));
    }
    eom_scan_ = buffer_.size() >= kEom.size() - 1 ? std::max(pos_, buffer_.size() - (kEom.size() - 1)) : pos_;
    return std::nullopt;
  }
  if (at - pos_ > max_message_) fail(fmt::format("message of {} bytes exceeds the {} byte limit", at - pos_, max_message_));
  std::string msg = buffer_.substr(pos_, at - pos_);
  pos_ = at + kEom.size();
  eom_scan_ = pos_;
  return msg;
}

std::optional<std::string> FrameDecoder::next_chunked() {
  while (pos_ < buffer_.size()) {
    char c = buffer_[pos_];
    switch (state_) {
      case State::kLf:
        if (c != '\n') fail("chunk header must start with LF, got " + describe_byte(c));
        state_ = State::kHash;
        ++pos_;
        break;
      case State::kHash:
        if (c != '#') fail("expected '#' after LF in chunk header, got " + describe_byte(c));
        state_ = State::kSizeOrEnd;
        ++pos_;
        break;
      case State::kSizeOrEnd:
        if (c == '#') {
          state_ = State::kEndLf;
        } else if (c >= '1' && c <= '9') {
          size_digits_.assign(1, c);
          state_ = State::kSize;
        } else if (c == '0') {
          fail("chunk size must be 1..4294967295 without leading zeros, got a size starting with '0'");
        } else {
          fail("expected chunk size or '#' after \"\\n#\", got " + describe_byte(c));
        }
        ++pos_;
        break;
      case State::kSize:
        if (c >= '0' && c <= '9') {
          if (size_digits_.size() >= 10) fail("chunk size " + size_digits_ + "... has more than 10 digits");
          size_digits_ += c;
          ++pos_;
        } else if (c == '\n') {
          uint64_t size = std::stoull(size_digits_);
          if (size > kMaxChunk) fail(fmt::format("chunk size {} exceeds 4294967295", size));
          if (message_.size() + size > max_message_) {
            fail(fmt::format("message would grow to {} bytes, over the {} byte limit", message_.size() + size,
                             max_message_));
          }
          chunk_left_ = size;
          state_ = State::kData;
          ++pos_;
        } else {
          fail("chunk size " + size_digits_ + " must be followed by LF, got " + describe_byte(c));
        }
        break;
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_left_, buffer_.size() - pos_));
        message_.append(buffer_, pos_, n);
        pos_ += n;
        chunk_left_ -= n;
        if (chunk_left_ == 0) state_ = State::kLf;
        break;
      }
      case State::kEndLf:
        if (c != '\n') fail("end-of-chunks marker \"\\n##\" must be followed by LF, got " + describe_byte(c));
        ++pos_;
        state_ = State::kLf;
        if (message_.empty()) fail("end-of-chunks marker without any chunk before it");
        return std::exchange(message_, std::string());
    }
  }
  return std::nullopt;
}

std::string encode_frame(std::string_view message, Framing framing, size_t max_chunk) {
  if (framing == Framing::kEndOfMessage) return std::string(message) + std::string(kEom);
  if (message.empty()) throw std::invalid_argument("chunked framing cannot carry an empty message");
  size_t step = max_chunk == 0 ? message.size() : std::min<size_t>(max_chunk, kMaxChunk);
  step = std::min<size_t>(step, kMaxChunk);
  std::string out;
  out.reserve(message.size() + 32);
  for (size_t off = 0; off < message.size(); off += step) {
    size_t n = std::min(step, message.size() - off);
    out += fmt::format("\n#{}\n", n);
    out.append(message.substr(off, n));
  }
  out += "\n##\n";
  return out;
}

// ---- XML helpers ----------------------------------------------------------------------

std::string_view local_name(const char* qualified) {
  std::string_view q(qualified ? qualified : "");
  size_t colon = q.rfind(':');
  return colon == std::string_view::npos ? q : q.substr(colon + 1);
}

pugi::xml_node child_local(pugi::xml_node parent, std::string_view local) {
  for (auto c : parent.children()) {
    if (c.type() == pugi::node_element && local_name(c.name()) == local) return c;
  }
  return {};
}

std::vector<pugi::xml_node> children_local(pugi::xml_node parent, std::string_view local) {
  std::vector<pugi::xml_node> out;
  for (auto c : parent.children()) {
    if (c.type() == pugi::node_element && local_name(c.name()) == local) out.push_back(c);
  }
  return out;
}

std::optional<std::string> child_text(pugi::xml_node parent, std::string_view local) {
  auto c = child_local(parent, local);
  if (!c) return std::nullopt;
  return std::string(trim_space(c.child_value()));
}

std::optional<std::string> attribute_local(pugi::xml_node node, std::string_view local) {
  for (auto a : node.attributes()) {
    std::string_view name(a.name());
    if (name.substr(0, 6) == "xmlns:" || name == "xmlns") continue;
    if (local_name(a.name()) == local) return std::string(a.value());
  }
  return std::nullopt;
}

std::vector<pugi::xml_node> descendants_local(pugi::xml_node node, std::string_view local) {
  std::vector<pugi::xml_node> out;
  if (!node) return out;
  if (node.type() == pugi::node_element && local_name(node.name()) == local) out.push_back(node);
  // Iterative walk: a hostile reply must not be able to exhaust the stack.
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::vector<pugi::xml_node> stack{*it};
    while (!stack.empty()) {
      auto n = stack.back();
      stack.pop_back();
      if (n.type() != pugi::node_element) continue;
      if (local_name(n.name()) == local) out.push_back(n);
      std::vector<pugi::xml_node> kids(n.begin(), n.end());
      for (auto k = kids.rbegin(); k != kids.rend(); ++k) stack.push_back(*k);
    }
  }
  return out;
}

std::string xml_text(pugi::xml_node node) { return serialise(node); }

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

NetconfMessage parse_netconf_message(std::string_view xml) {
  NetconfMessage m;
  m.doc = std::make_shared<pugi::xml_document>();
  auto r = m.doc->load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r) {
    std::string head(xml.substr(0, 120));
    std::replace(head.begin(), head.end(), '\n', ' ');
    throw ProtocolError(fmt::format("malformed XML from the peer ({} at offset {}): {}", r.description(), r.offset, head));
  }
  m.root = m.doc->document_element();
  if (!m.root) throw ProtocolError("NETCONF message without an XML element");
  m.kind = std::string(local_name(m.root.name()));
  return m;
}

// ---- hello ----------------------------------------------------------------------------

std::string build_hello(const std::vector<std::string>& capabilities, std::string_view session_id) {
  pugi::xml_document doc;
  auto hello = doc.append_child("hello");
  hello.append_attribute("xmlns") = kNetconfNs;
  auto caps = hello.append_child("capabilities");
  for (const auto& c : capabilities) caps.append_child("capability").text().set(c.c_str());
  if (!session_id.empty()) hello.append_child("session-id").text().set(std::string(session_id).c_str());
  return document_text(doc);
}

Hello parse_hello(const NetconfMessage& msg) {
  if (msg.kind != "hello") throw ProtocolError("expected <hello>, got <" + msg.kind + ">");
  Hello h;
  if (auto sid = child_text(msg.root, "session-id")) h.session_id = *sid;
  for (auto cap : children_local(child_local(msg.root, "capabilities"), "capability")) {
    std::string c = std::string(trim_space(cap.child_value()));
    if (c.empty()) continue;
    h.capabilities.push_back(c);
    if (c == kNetconfBase10) h.base10 = true;
    if (c == kNetconfBase11) h.base11 = true;
    size_t q = c.find('?');
    if (q == std::string::npos) continue;
    bool optical = false;
    std::string revision;
    std::string_view params(c);
    params.remove_prefix(q + 1);
    while (!params.empty()) {
      size_t amp = params.find('&');
      std::string_view kv = params.substr(0, amp);
      params = amp == std::string_view::npos ? std::string_view{} : params.substr(amp + 1);
      // Some servers escape the '&' twice; "amp;revision=" then survives XML decoding.
      if (kv.substr(0, 4) == "amp;") kv.remove_prefix(4);
      if (kv == "module=optical-switch") optical = true;
      if (kv.substr(0, 9) == "revision=") revision = std::string(kv.substr(9));
    }
    bool date = revision.size() == 10 && revision[4] == '-' && revision[7] == '-' &&
                std::all_of(revision.begin(), revision.end(), [](char ch) { return ch == '-' || std::isdigit(static_cast<unsigned char>(ch)); });
    if (optical && date) h.optical_revision = revision;
  }
  if (!h.base10 && !h.base11) {
    throw ProtocolError("hello advertises neither " + std::string(kNetconfBase10) + " nor " + kNetconfBase11);
  }
  return h;
}

std::string pair_list_name(std::string_view revision) {
  if (revision.size() == 10 && revision < std::string_view(kPairRenameRevision)) return "pairs";
  return "pair";
}

// ---- rpc / rpc-reply ------------------------------------------------------------------

std::string build_rpc(uint64_t message_id, std::string_view body) {
  pugi::xml_document doc;
  auto rpc = doc.append_child("rpc");
  rpc.append_attribute("message-id") = std::to_string(message_id).c_str();
  rpc.append_attribute("xmlns") = kNetconfNs;
  append_fragment(rpc, body);
  return document_text(doc);
}

RpcReply parse_rpc_reply(const NetconfMessage& msg) {
  if (msg.kind != "rpc-reply") throw ProtocolError("expected <rpc-reply>, got <" + msg.kind + ">");
  RpcReply r;
  r.msg = msg;
  if (auto id = msg.root.attribute("message-id")) r.message_id = id.value();
  for (auto err : children_local(msg.root, "rpc-error")) {
    std::string severity = child_text(err, "error-severity").value_or("error");
    if (severity == "warning") continue;
    std::string tag = child_text(err, "error-tag").value_or("");
    std::string type = child_text(err, "error-type").value_or("");
    std::string text = child_text(err, "error-message").value_or("");
    std::string path = child_text(err, "error-path").value_or("");
    std::string what = "rpc-error " + (tag.empty() ? std::string("(no error-tag)") : tag);
    if (!type.empty()) what += " (" + type + ")";
    what += ": " + (text.empty() ? std::string("(no error-message)") : text);
    if (!path.empty()) what += " at " + path;
    throw DenyError(what, tag, text);
  }
  r.ok = static_cast<bool>(child_local(msg.root, "ok"));
  r.data = child_local(msg.root, "data");
  return r;
}

RpcRequest parse_rpc(const NetconfMessage& msg) {
  if (msg.kind != "rpc") throw ProtocolError("expected <rpc>, got <" + msg.kind + ">");
  RpcRequest r;
  r.msg = msg;
  if (auto id = msg.root.attribute("message-id")) r.message_id = id.value();
  for (auto c : msg.root.children()) {
    if (c.type() != pugi::node_element) continue;
    if (r.op) throw ProtocolError("<rpc> carries more than one operation");
    r.op = c;
  }
  if (!r.op) throw ProtocolError("<rpc> without an operation");
  r.operation = std::string(local_name(r.op.name()));
  return r;
}

std::string build_ok_reply(std::string_view message_id) {
  pugi::xml_document doc;
  reply_root(doc, message_id).append_child("ok");
  return document_text(doc);
}

std::string build_data_reply(std::string_view message_id, std::string_view data_inner) {
  pugi::xml_document doc;
  auto data = reply_root(doc, message_id).append_child("data");
  append_fragment(data, data_inner);
  return document_text(doc);
}

std::string build_error_reply(std::string_view message_id, const RpcError& error) {
  pugi::xml_document doc;
  auto e = reply_root(doc, message_id).append_child("rpc-error");
  e.append_child("error-type").text().set(error.type.c_str());
  e.append_child("error-tag").text().set(error.tag.c_str());
  e.append_child("error-severity").text().set(error.severity.c_str());
  if (!error.message.empty()) {
    auto m = e.append_child("error-message");
    m.append_attribute("xml:lang") = "en";
    m.text().set(error.message.c_str());
  }
  return document_text(doc);
}

// ---- optical-switch payloads ----------------------------------------------------------

std::string build_get(std::string_view filter_inner) {
  return "<get><filter type=\"subtree\">" + std::string(filter_inner) + "</filter></get>";
}

std::string build_edit_config(std::string_view config_inner) {
  return "<edit-config><target><running/></target><config>" + std::string(config_inner) +
         "</config></edit-config>";
}

std::string build_cross_connects(const std::vector<Circuit>& add, const std::vector<Port>& delete_ingress,
                                 std::string_view list_name) {
  // Unqualified operation attribute as docs/protocols.md#netconf and working Polatis clients send it;
  // the peer accepts any prefix.
  std::string out = fmt::format("<cross-connects xmlns=\"{}\">", kOpticalSwitchNs);
  for (Port p : delete_ingress) {
    out += fmt::format("<{0} operation=\"delete\"><ingress>{1}</ingress></{0}>", list_name, p);
  }
  for (const auto& c : add) {
    out += fmt::format("<{0}><ingress>{1}</ingress><egress>{2}</egress></{0}>", list_name, c.ingress, c.egress);
  }
  return out + "</cross-connects>";
}

std::string build_opm_power_filter(const std::vector<Port>& ports) {
  std::string out = fmt::format("<opm-power xmlns=\"{}\">", kOpticalSwitchNs);
  for (Port p : ports) out += fmt::format("<port><port-id>{}</port-id><power/></port>", p);
  return out + "</opm-power>";
}

Port parse_port_number(std::string_view text, std::string_view what) {
  std::string t = std::string(trim_space(text));
  int v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || v < 1) {
    throw ProtocolError(fmt::format("{}: '{}' is not a port number", what, t));
  }
  return v;
}

std::vector<Circuit> parse_cross_connects(pugi::xml_node data) {
  std::vector<Circuit> out;
  auto cc = find_container(data, "cross-connects");
  if (!cc) return out;
  for (auto p : cc.children()) {
    auto name = local_name(p.name());
    if (p.type() != pugi::node_element || (name != "pair" && name != "pairs")) continue;
    // In an edit-config payload a deleted pair is not a circuit (and may omit egress).
    auto op = attribute_local(p, "operation");
    if (op && (*op == "delete" || *op == "remove")) continue;
    auto in = child_text(p, "ingress");
    auto eg = child_text(p, "egress");
    if (!in || !eg) throw ProtocolError("cross-connect entry without ingress or egress: " + xml_text(p));
    out.push_back({parse_port_number(*in, "cross-connect ingress"), parse_port_number(*eg, "cross-connect egress")});
  }
  return out;
}

std::vector<PortPower> parse_opm_power(pugi::xml_node data) {
  std::vector<PortPower> out;
  auto opm = find_container(data, "opm-power");
  if (!opm) return out;
  for (auto port : children_local(opm, "port")) {
    auto id = child_text(port, "port-id");
    auto power = child_text(port, "power");
    if (!id || !power) continue;  // a port without a monitor reading
    out.push_back({parse_port_number(*id, "opm-power port-id"), parse_double(*power, "opm-power power")});
  }
  return out;
}

std::vector<Port> parse_port_config_ids(pugi::xml_node data) {
  std::vector<Port> out;
  auto pc = find_container(data, "port-config");
  if (!pc) return out;
  for (auto port : children_local(pc, "port")) {
    if (auto id = child_text(port, "port-id")) out.push_back(parse_port_number(*id, "port-config port-id"));
  }
  return out;
}

ProductInformation parse_product_information(pugi::xml_node data) {
  ProductInformation p;
  auto pi = find_container(data, "product-information");
  if (!pi) return p;
  p.manufacturer = child_text(pi, "manufacturer").value_or("");
  p.model = child_text(pi, "model-name").value_or("");
  p.serial = child_text(pi, "serial-number").value_or("");
  p.software_version = child_text(pi, "software-version").value_or("");
  return p;
}

std::optional<std::pair<int, int>> switch_size_from_model(std::string_view model) {
  // Find "<digits>x<digits|CC>" with digit runs not glued to more digits.
  for (size_t x = 1; x + 1 < model.size(); ++x) {
    if (model[x] != 'x' && model[x] != 'X') continue;
    size_t b = x;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(model[b - 1]))) --b;
    if (b == x) continue;
    size_t e = x + 1;
    while (e < model.size() && std::isdigit(static_cast<unsigned char>(model[e]))) ++e;
    int n = 0, m = 0;
    if (std::from_chars(model.data() + b, model.data() + x, n).ec != std::errc() || n < 1) continue;
    if (e > x + 1) {
      if (std::from_chars(model.data() + x + 1, model.data() + e, m).ec != std::errc() || m < 1) continue;
      return std::pair{n, m};
    }
    if (model.substr(x + 1, 2) == "CC" && n >= 2) return std::pair{n / 2, n / 2};
  }
  return std::nullopt;
}

namespace {

// Thrown inside evaluate_cross_connect_edit only; becomes its RpcError result.
struct EditRefused {
  RpcError error;
};

[[noreturn]] void refuse(std::string tag, std::string message, std::string type = "application") {
  RpcError e;
  e.type = std::move(type);
  e.tag = std::move(tag);
  e.message = std::move(message);
  throw EditRefused{std::move(e)};
}

class CrossConnectEditor {
 public:
  explicit CrossConnectEditor(const CrossConnectEditRules& rules) : r_(rules) {}

  CrossConnectEdit run(const std::vector<Circuit>& circuits, pugi::xml_node op) {
    auto target = child_local(op, "target");
    if (!child_local(target, "running")) refuse("invalid-value", "Only the running datastore can be edited", "protocol");
    auto config = child_local(op, "config");
    if (!config) refuse("missing-element", "edit-config without <config>", "protocol");

    std::map<Port, Port> current;
    for (const auto& c : circuits) current[c.ingress] = c.egress;
    std::map<Port, Port> result = current;
    std::vector<Circuit> merges;
    for (auto cc : config.children()) {
      if (cc.type() != pugi::node_element) continue;
      if (local_name(cc.name()) != "cross-connects") {
        refuse("unknown-element", "Unknown element '" + echo(std::string(local_name(cc.name()))) + "'");
      }
      auto cc_op = attribute_local(cc, "operation").value_or("merge");
      if (cc_op == "delete" || cc_op == "remove") {
        result.clear();
        continue;
      }
      for (auto pr : cc.children()) {
        if (pr.type() != pugi::node_element) continue;
        std::string name(local_name(pr.name()));
        if (name != r_.list_name) {
          refuse("unknown-element", fmt::format("Unknown element '{}' in cross-connects (optical-switch {} uses '{}')",
                                                echo(name), r_.revision, r_.list_name));
        }
        auto pair_op = attribute_local(pr, "operation").value_or("merge");
        Port in = port_value(pr, "ingress");
        if (!r_.is_ingress(in)) refuse("invalid-value", invalid_port(in));
        if (pair_op == "delete" || pair_op == "remove") {
          if (!result.count(in) && pair_op == "delete") {
            refuse("data-missing", fmt::format("No cross-connect on ingress port {}", in));
          }
          result.erase(in);
        } else if (pair_op == "merge" || pair_op == "replace" || pair_op == "create") {
          Port eg = port_value(pr, "egress");
          if (!r_.is_egress(eg)) refuse("invalid-value", invalid_port(eg));
          if (pair_op == "create" && result.count(in)) {
            refuse("data-exists", fmt::format("Cross-connect on ingress port {} exists", in));
          }
          merges.push_back({in, eg});
        } else {
          refuse("bad-attribute", "Unknown operation '" + echo(pair_op) + "'", "protocol");
        }
      }
    }
    // Deletes first, then merges; a merge re-keys its ingress to the new egress.
    std::set<Port> merge_in, merge_out;
    for (const auto& m : merges) {
      if (!merge_in.insert(m.ingress).second || !merge_out.insert(m.egress).second) {
        refuse("invalid-value", r_.name_pair_used_twice ? "Port used twice in request: " + to_string(m)
                                                        : std::string("Port used twice in request"));
      }
      result.erase(m.ingress);
    }
    // result by egress, then ingress: the pair holding an egress is found without a scan of
    // result per merge (n merges onto an empty switch cost n^2 that way). The lowest ingress
    // first, as a scan of result in ingress order would meet it.
    std::set<std::pair<Port, Port>> by_egress;
    for (auto [i, e] : result) by_egress.emplace(e, i);
    for (const auto& m : merges) {
      auto held = by_egress.lower_bound({m.egress, std::numeric_limits<Port>::min()});
      if (held != by_egress.end() && held->first == m.egress) {
        if (!r_.replace_patched) refuse("in-use", fmt::format("Port already connected: {}", m.egress));
        result.erase(held->second);
        by_egress.erase(held);
      }
      result[m.ingress] = m.egress;
      by_egress.emplace(m.egress, m.ingress);
    }
    CrossConnectEdit edit;
    for (auto [i, e] : current) {
      auto it = result.find(i);
      if (it == result.end() || it->second != e) edit.drop.push_back(i);
    }
    for (auto [i, e] : result) {
      auto it = current.find(i);
      if (it == current.end() || it->second != e) edit.add.push_back({i, e});
    }
    return edit;
  }

 private:
  std::string echo(const std::string& text) const { return text.substr(0, r_.echo_limit); }
  std::string invalid_port(Port p) const { return fmt::format("Invalid {}: {}", r_.port_noun, p); }

  Port port_value(pugi::xml_node parent, std::string_view leaf) const {
    auto t = child_text(parent, leaf);
    if (!t) refuse("missing-element", "Missing element '" + std::string(leaf) + "'", "protocol");
    try {
      return parse_port_number(*t, leaf);
    } catch (const ProtocolError&) {
      refuse("invalid-value", fmt::format("Invalid {}: {}", r_.port_noun, echo(*t)));
    }
  }

  const CrossConnectEditRules& r_;
};

}  // namespace

std::variant<CrossConnectEdit, RpcError> evaluate_cross_connect_edit(const std::vector<Circuit>& current,
                                                                     pugi::xml_node op,
                                                                     const CrossConnectEditRules& rules) {
  try {
    return CrossConnectEditor(rules).run(current, op);
  } catch (const EditRefused& e) {
    return e.error;
  }
}

}  // namespace ocslab::ocs
