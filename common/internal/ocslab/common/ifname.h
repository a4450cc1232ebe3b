// Network interface names from specs, lab files and command lines, checked against the
// kernel's own rule (net/core/dev.c, dev_valid_name) before they reach netlink, sysfs paths
// or a remote shell.
#pragma once

#include <string>
#include <string_view>

namespace ocslab {

// Empty when the kernel would accept name as an interface name; else why not: 1 to 15 bytes
// (IFNAMSIZ - 1), not "." or "..", no '/', ':', whitespace or control character.
std::string ifname_problem(std::string_view name);

// Empty when name passes ifname_problem and is made only of letters, digits and _-.=,@+% (the
// characters no shell treats specially): the rule for NIC names a spec or lab file gives, which
// reach remote command lines. The kernel allows `; $ ( ) \`` in a name; no real NIC has them.
std::string spec_ifname_problem(std::string_view name);

// Empty when name can be a host name or IP address (a spec's management address, joined to a
// port as HOST:PORT in remote commands): 1 to 253 bytes of letters, digits, '.', '-' and ':'
// (IPv6), not starting with '-'; else why not.
std::string host_address_problem(std::string_view name);

// Throws Error "<what>: '<name>' is not an interface name (<why>)" when ifname_problem says so.
// what names where the name came from (a file and key, an option).
void check_ifname(std::string_view name, std::string_view what);

}  // namespace ocslab
