#include "ocslab/emulator/qmp_reader.h"

#include "ocslab/common/error.h"

namespace ocslab::emu {

void QmpReader::feed(std::string_view bytes) {
  if (!lines_.feed(bytes)) {
    throw Error("QEMU sent a line longer than " + std::to_string(lines_.max_line()) + " bytes");
  }
}

std::optional<nlohmann::json> QmpReader::next() {
  while (auto line = lines_.next_line()) {
    if (line->find_first_not_of(" \r\t") == std::string::npos) continue;
    try {
      return nlohmann::json::parse(*line);
    } catch (const nlohmann::json::exception&) {
      throw Error("QEMU sent a line that is not JSON: '" + line->substr(0, 200) + "'");
    }
  }
  return std::nullopt;
}

QmpReply classify_qmp_reply(const nlohmann::json& m) {
  QmpReply r;
  if (!m.is_object()) {
    r.text = m.dump();
    return r;
  }
  if (m.contains("event")) {
    r.kind = QmpReply::Kind::kEvent;
    return r;
  }
  // Only strings are taken from QEMU's error: json::value would throw on another type.
  auto string_at = [](const nlohmann::json& o, const char* key, const char* absent) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string(absent);
  };
  if (auto e = m.find("error"); e != m.end()) {
    r.kind = QmpReply::Kind::kError;
    r.text = e->is_object() ? string_at(*e, "class", "?") + ": " + string_at(*e, "desc", "") : "?: " + e->dump();
    return r;
  }
  if (auto v = m.find("return"); v != m.end()) {
    r.kind = QmpReply::Kind::kReturn;
    r.empty_return = *v == nlohmann::json::object();
    r.text = v->dump();
    return r;
  }
  r.text = m.dump();
  return r;
}

}  // namespace ocslab::emu
