// The guest kernel's headers are read from a file apt fetched (kernel_image.h): any bytes as a
// bzImage must give nullopt or a payload inside the input with a known compressor name, and as
// an ELF a PVH verdict without reading outside the input (ASan checks the reads).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "ocslab/vlab/kernel_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto p = ocslab::vlab::bzimage_payload(in)) {
    static const std::set<std::string> kFormats = {"gzip", "xz", "zstd", "lz4", "lzma", "bzip2", "lzo", "unknown"};
    if (!kFormats.count(p->format)) __builtin_trap();
    if (p->data.empty() || p->data.data() < in.data() || p->data.data() + p->data.size() > in.data() + in.size())
      __builtin_trap();
    if (in.substr(0x202, 4) != "HdrS") __builtin_trap();
  }
  if (ocslab::vlab::elf_has_pvh_entry(in) && in.substr(0, 4) != "\x7f" "ELF") __builtin_trap();
  return 0;
}
