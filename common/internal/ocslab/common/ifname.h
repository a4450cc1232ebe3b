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

// Throws Error "<what>: '<name>' is not an interface name (<why>)" when ifname_problem says so.
// what names where the name came from (a file and key, an option).
void check_ifname(std::string_view name, std::string_view what);

}  // namespace ocslab
