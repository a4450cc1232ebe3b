#include "ocslab/probes/eeprom_reader.h"

#include <fmt/format.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ocslab/common/error.h"
#include "ocslab/common/netlink_socket.h"

namespace ocslab::probes {

namespace {

// Upper pages are 128 bytes, addressed at offsets 128..255 of the selected page.
constexpr unsigned kHalfPage = 128;

std::string no_interface(const std::string& ifname) { return fmt::format("no such interface {}", ifname); }

bool interface_exists(const std::string& ifname, unsigned* index) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return false;
  *index = if_nametoindex(ifname.c_str());
  return *index != 0;
}

// Attribute walk through a C callback: libmnl's iteration macros need C's implicit void* casts.
struct AttrTable {
  const nlattr* tb[64] = {};
};
int collect_ethtool_attr(const nlattr* attr, void* data) {
  auto* t = static_cast<AttrTable*>(data);
  unsigned type = mnl_attr_get_type(attr);
  if (type < 64) t->tb[type] = attr;
  return MNL_CB_OK;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

struct EthtoolEepromReader::Netlink {
  NetlinkSocket sock{NETLINK_GENERIC};
  uint16_t family = 0;
};

EthtoolEepromReader::EthtoolEepromReader() {
  auto nl = std::make_unique<Netlink>();
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = GENL_ID_CTRL;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
  genl->cmd = CTRL_CMD_GETFAMILY;
  genl->version = 1;
  mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, ETHTOOL_GENL_NAME);
  try {
    nl->sock.request(nlh, [&](const nlmsghdr* reply) {
      AttrTable t;
      mnl_attr_parse(reply, sizeof(genlmsghdr), collect_ethtool_attr, &t);
      if (t.tb[CTRL_ATTR_FAMILY_ID]) nl->family = mnl_attr_get_u16(t.tb[CTRL_ATTR_FAMILY_ID]);
    });
  } catch (const SystemError& e) {
    // ENOENT: a kernel older than 5.6 has no ethtool genl family; the ioctl is all there is.
    if (e.code() != ENOENT) throw;
  }
  if (nl->family == 0) {
    use_ioctl_ = true;
  } else {
    nl_ = std::move(nl);
  }
}

EthtoolEepromReader::~EthtoolEepromReader() = default;

std::string EthtoolEepromReader::method() const {
  return use_ioctl_ ? "SIOCETHTOOL ETHTOOL_GMODULEEEPROM" : "ethtool netlink MODULE_EEPROM_GET";
}

EepromReadResult EthtoolEepromReader::read(const std::string& ifname, const EepromRead& r) {
  unsigned index = 0;
  if (!interface_exists(ifname, &index)) return {std::nullopt, no_interface(ifname), ENODEV};
  if (use_ioctl_) return read_module_eeprom_ioctl(ifname, r);
  int err = 0;
  EepromReadResult res = read_netlink(ifname, r, &err);
  if (res.ok() || err != EOPNOTSUPP) return res;
  // EOPNOTSUPP is also what a kernel with the family but without MODULE_EEPROM_GET (5.6..5.12)
  // answers; the ioctl then still reaches drivers that implement get_module_eeprom.
  EepromReadResult legacy = read_module_eeprom_ioctl(ifname, r);
  if (legacy.ok()) return legacy;
  return {std::nullopt,
          fmt::format("no module / module EEPROM not supported on {} (ethtool netlink: {}; legacy ioctl: {})", ifname,
                      res.unavailable, legacy.unavailable),
          legacy.error};
}

EepromReadResult EthtoolEepromReader::read_netlink(const std::string& ifname, const EepromRead& r, int* err) {
  *err = 0;
  if (r.length == 0 || r.length > kHalfPage || (r.offset < kHalfPage && r.offset + r.length > kHalfPage)) {
    throw Error(fmt::format("{}: EEPROM read {} crosses byte 128 or is empty", ifname, to_string(r)));
  }
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = nl_->family;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
  genl->cmd = ETHTOOL_MSG_MODULE_EEPROM_GET;
  genl->version = ETHTOOL_GENL_VERSION;
  nlattr* hdr = mnl_attr_nest_start(nlh, ETHTOOL_A_MODULE_EEPROM_HEADER);
  mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
  mnl_attr_nest_end(nlh, hdr);
  mnl_attr_put_u32(nlh, ETHTOOL_A_MODULE_EEPROM_OFFSET, r.offset);
  mnl_attr_put_u32(nlh, ETHTOOL_A_MODULE_EEPROM_LENGTH, r.length);
  mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_PAGE, r.page);
  mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_BANK, r.bank);
  mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS, r.i2c_address);

  std::optional<std::vector<uint8_t>> data;
  try {
    nl_->sock.request(nlh, [&](const nlmsghdr* reply) {
      AttrTable t;
      mnl_attr_parse(reply, sizeof(genlmsghdr), collect_ethtool_attr, &t);
      if (const nlattr* a = t.tb[ETHTOOL_A_MODULE_EEPROM_DATA]) {
        const auto* p = static_cast<const uint8_t*>(mnl_attr_get_payload(a));
        data.emplace(p, p + mnl_attr_get_payload_len(a));
      }
    });
  } catch (const SystemError& e) {
    *err = e.code();
    // The kernel's refusal (no module, no driver support, page absent, no permission) is this
    // interface's outcome, reported with the kernel's own words.
    if (e.code() == ENODEV) return {std::nullopt, no_interface(ifname), ENODEV};
    return {std::nullopt, fmt::format("{}: {}: {}", ifname, to_string(r), e.what()), e.code()};
  }
  if (!data) return {std::nullopt, fmt::format("{}: {}: reply without DATA attribute", ifname, to_string(r))};
  if (data->size() != r.length) {
    return {std::nullopt,
            fmt::format("{}: {}: kernel returned {} bytes, asked {}", ifname, to_string(r), data->size(), r.length)};
  }
  return {std::move(data), {}};
}

EepromReadResult read_module_eeprom_ioctl(const std::string& ifname, const EepromRead& r) {
  unsigned index = 0;
  if (!interface_exists(ifname, &index)) return {std::nullopt, no_interface(ifname), ENODEV};
  Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw SystemError("socket(AF_INET, SOCK_DGRAM) for SIOCETHTOOL", errno);

  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
  ethtool_modinfo info{};
  info.cmd = ETHTOOL_GMODULEINFO;
  ifr.ifr_data = reinterpret_cast<char*>(&info);
  if (::ioctl(fd.get(), SIOCETHTOOL, &ifr) < 0) {
    int err = errno;
    return {std::nullopt, fmt::format("{}: SIOCETHTOOL ETHTOOL_GMODULEINFO: {}", ifname, std::strerror(err)), err};
  }

  // The ioctl sees one flat array: page p's upper half at p*128 + offset, and SFF-8472's A2h
  // (i2c 0x51) right after the 256 bytes of A0h. Banks cannot be selected.
  if (r.bank != 0) return {std::nullopt, fmt::format("{}: legacy ioctl cannot select bank {}", ifname, r.bank)};
  if (r.page != 0 && r.offset < kHalfPage) {
    return {std::nullopt, fmt::format("{}: {}: lower memory is not paged", ifname, to_string(r))};
  }
  unsigned flat = r.page * kHalfPage + r.offset;
  if (r.i2c_address == 0x51) {
    if (info.type != ETH_MODULE_SFF_8472) {
      return {std::nullopt, fmt::format("{}: i2c 0x51 needs an SFF-8472 module (module type {})", ifname, info.type)};
    }
    flat += 2 * kHalfPage;
  } else if (r.i2c_address != 0x50) {
    return {std::nullopt, fmt::format("{}: legacy ioctl reaches only i2c 0x50/0x51", ifname)};
  }
  if (flat + r.length > info.eeprom_len) {
    return {std::nullopt,
            fmt::format("{}: {} lies past the module's {} legacy EEPROM bytes", ifname, to_string(r), info.eeprom_len)};
  }

  std::vector<uint8_t> raw(sizeof(ethtool_eeprom) + r.length);
  auto* ee = reinterpret_cast<ethtool_eeprom*>(raw.data());
  ee->cmd = ETHTOOL_GMODULEEEPROM;
  ee->offset = flat;
  ee->len = r.length;
  ifr.ifr_data = reinterpret_cast<char*>(ee);
  if (::ioctl(fd.get(), SIOCETHTOOL, &ifr) < 0) {
    int err = errno;
    return {std::nullopt,
            fmt::format("{}: SIOCETHTOOL ETHTOOL_GMODULEEEPROM {}: {}", ifname, to_string(r), std::strerror(err)), err};
  }
  return {std::vector<uint8_t>(raw.begin() + sizeof(ethtool_eeprom), raw.end()), {}};
}

}  // namespace ocslab::probes
