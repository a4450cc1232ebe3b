// libFuzzer target for parse_mktemp_output: a lab host's answer to `mktemp -d PREFIX.XXXXXXXXXX`.
// A path that is taken must be exactly the prefix, '.', and ten letters or digits (it is later
// removed with rm -rf); anything else must be an Error.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/runner/remote_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string prefix = ocslab::runner::remote_dir_prefix("fuzz-run", "on-demand");
  std::string in(reinterpret_cast<const char*>(data), size);
  // Half the inputs start with the real prefix, so the checks after it are reached.
  if (size > 0 && data[0] % 2 == 0) in = prefix + in.substr(1);
  try {
    std::string path = ocslab::runner::parse_mktemp_output(in, prefix);
    if (path.size() != prefix.size() + 11 || path.compare(0, prefix.size(), prefix) != 0 || path[prefix.size()] != '.')
      __builtin_trap();
    for (size_t i = prefix.size() + 1; i < path.size(); ++i)
      if (!std::isalnum(static_cast<unsigned char>(path[i]))) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  return 0;
}
