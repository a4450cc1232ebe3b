// libFuzzer target for what the GID probe parses: the input's first byte picks a sysfs GID line
// (`gids/<i>`), a GID type line (`gid_attrs/types/<i>`) or an RTM_NEWNEIGH message, the rest is
// the text or message. Checks the parsers' contracts (gid_table.h, neigh_table.h), not only that
// they survive: a parsed GID prints back to the same 16 bytes, a neighbour entry has an address.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "ocslab/probes/gid_table.h"
#include "ocslab/probes/neigh_table.h"

using namespace ocslab::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0] % 3;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (pick == 0) {
    auto g = parse_sysfs_gid(text);
    if (g) {
      // Exactly 39 characters before any trailing newlines or spaces.
      std::string_view t = text;
      while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
      if (t.size() != 39) __builtin_trap();
      std::string a = gid_address(*g);
      in6_addr back{};
      if (::inet_pton(AF_INET6, a.c_str(), &back) != 1 || std::memcmp(&back, g->data(), 16) != 0) __builtin_trap();
      if (gid_empty(*g) && gid_link_local(*g)) __builtin_trap();
    }
  } else if (pick == 1) {
    GidType t = parse_gid_type(text);
    if (t != GidType::kUnknown && text.find('v') == std::string_view::npos) __builtin_trap();
    (void)gid_type_name(t);
  } else {
    // Copied so that a read past `size` is caught by the sanitizers.
    std::vector<uint8_t> msg(data + 1, data + size);
    int ifindex = size > 1 ? data[1] : 0;
    auto e = parse_neigh_message(msg.data(), msg.size(), ifindex);
    if (e) {
      if (e->address.empty() || e->lladdr.size() > 32 * 3) __builtin_trap();
      (void)nud_state_name(e->state);
    }
  }
  return 0;
}
