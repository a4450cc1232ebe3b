// libFuzzer target for parse_sizes: a lab host's answer to the file listing of the ranks'
// folder (one "NAME SIZE" line per file). Whatever a compromised host prints, a name that is
// taken must be a plain file name (it is joined to a local folder's path); anything else must
// be an Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/runner/remote_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& f : ocslab::runner::parse_sizes(in)) {
      if (!ocslab::runner::plain_file_name_problem(f.name).empty()) __builtin_trap();
      if (f.name.find('/') != std::string::npos || f.name == "." || f.name == "..") __builtin_trap();
      for (char c : f.name)
        if (static_cast<unsigned char>(c) < 0x20) __builtin_trap();
    }
  } catch (const ocslab::Error&) {
  }
  return 0;
}
