#include "ocslab/vlab/kernel_image.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"

namespace fs = std::filesystem;

namespace ocslab::vlab {

namespace {

template <typename T>
std::optional<T> read_le(std::string_view b, uint64_t off) {
  if (off > b.size() || b.size() - off < sizeof(T)) return std::nullopt;
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<unsigned char>(b[off + i])) << (8 * i);
  return v;
}

bool starts_with_bytes(std::string_view data, std::string_view magic) {
  return data.size() >= magic.size() && data.substr(0, magic.size()) == magic;
}

std::string payload_format(std::string_view p) {
  using namespace std::string_view_literals;
  if (starts_with_bytes(p, "\x1f\x8b"sv)) return "gzip";
  if (starts_with_bytes(p, "\xfd" "7zXZ\x00"sv)) return "xz";
  if (starts_with_bytes(p, "\x28\xb5\x2f\xfd"sv)) return "zstd";
  if (starts_with_bytes(p, "\x02\x21\x4c\x18"sv)) return "lz4";
  if (starts_with_bytes(p, "\x5d\x00\x00"sv)) return "lzma";
  if (starts_with_bytes(p, "BZh"sv)) return "bzip2";
  if (starts_with_bytes(p, "\x89\x4c\x5a"sv)) return "lzo";
  return "unknown";
}

// The notes of one PT_NOTE segment: true when one is ("Xen", 18).
bool notes_have_pvh(std::string_view notes) {
  uint64_t off = 0;
  while (off + 12 <= notes.size()) {
    const uint32_t namesz = *read_le<uint32_t>(notes, off);
    const uint32_t descsz = *read_le<uint32_t>(notes, off + 4);
    const uint32_t type = *read_le<uint32_t>(notes, off + 8);
    const uint64_t name_at = off + 12;
    const uint64_t desc_at = name_at + ((uint64_t{namesz} + 3) & ~uint64_t{3});
    const uint64_t next = desc_at + ((uint64_t{descsz} + 3) & ~uint64_t{3});
    if (next > notes.size()) return false;
    if (type == 18 && namesz == 4 && notes.substr(name_at, 4) == std::string_view("Xen\0", 4)) return true;
    off = next;
  }
  return false;
}

}  // namespace

std::optional<BzPayload> bzimage_payload(std::string_view image) {
  // The setup header (Documentation/arch/x86/boot.rst): "HdrS" at 0x202, the protocol version at
  // 0x206, setup_sects at 0x1f1 (0 means 4), payload_offset / payload_length at 0x248 / 0x24c,
  // counted from the protected-mode code, which follows the (setup_sects + 1) 512-byte sectors.
  if (image.size() < 0x250 || image.substr(0x202, 4) != "HdrS") return std::nullopt;
  const uint16_t version = *read_le<uint16_t>(image, 0x206);
  if (version < 0x0208) return std::nullopt;
  uint64_t setup_sects = static_cast<unsigned char>(image[0x1f1]);
  if (setup_sects == 0) setup_sects = 4;
  const uint64_t pm_start = (setup_sects + 1) * 512;
  const uint64_t offset = *read_le<uint32_t>(image, 0x248);
  const uint64_t length = *read_le<uint32_t>(image, 0x24c);
  if (pm_start > image.size() || offset > image.size() - pm_start || length > image.size() - pm_start - offset ||
      length == 0)
    return std::nullopt;
  BzPayload p;
  p.data = image.substr(pm_start + offset, length);
  p.format = payload_format(p.data);
  return p;
}

bool elf_has_pvh_entry(std::string_view elf) {
  // ELF64, little-endian, executable, x86-64.
  if (elf.size() < 64 || elf.substr(0, 4) != "\x7f" "ELF" || elf[4] != 2 || elf[5] != 1) return false;
  if (*read_le<uint16_t>(elf, 16) != 2 || *read_le<uint16_t>(elf, 18) != 62) return false;
  const uint64_t phoff = *read_le<uint64_t>(elf, 32);
  const uint16_t phentsize = *read_le<uint16_t>(elf, 54);
  const uint16_t phnum = *read_le<uint16_t>(elf, 56);
  if (phentsize < 56) return false;
  for (uint64_t i = 0; i < phnum; ++i) {
    const uint64_t ph = phoff + i * phentsize;
    if (phoff > elf.size() || ph > elf.size() || elf.size() - ph < 56) return false;
    if (*read_le<uint32_t>(elf, ph) != 4) continue;  // PT_NOTE
    const uint64_t off = *read_le<uint64_t>(elf, ph + 8);
    const uint64_t size = *read_le<uint64_t>(elf, ph + 32);
    if (off > elf.size() || size > elf.size() - off) return false;
    if (notes_have_pvh(elf.substr(off, size))) return true;
  }
  return false;
}

PvhKernel unpack_pvh_kernel(const std::string& vmlinuz, const std::string& out) {
  PvhKernel r;
  std::error_code ec;
  if (fs::exists(out, ec)) {
    r.path = out;
    return r;
  }
  std::string image;
  try {
    image = read_file(vmlinuz);
  } catch (const std::exception& e) {
    r.why = e.what();
    return r;
  }
  auto payload = bzimage_payload(image);
  if (!payload) {
    r.why = vmlinuz + " is not a bzImage of boot protocol 2.08 or later";
    return r;
  }
  if (payload->format != "gzip" && payload->format != "xz" && payload->format != "zstd") {
    r.why = fmt::format("{}: the kernel is {}-compressed (gzip, xz and zstd are unpacked)", vmlinuz, payload->format);
    return r;
  }
  // Every compressor but gzip is followed by the kernel's size (4 bytes) that the build appends.
  std::string_view data = payload->data;
  if (payload->format != "gzip" && data.size() > 4) data.remove_suffix(4);
  const std::string tmp = fmt::format("{}.partial-{}", out, ::getpid());
  const std::string packed = tmp + "." + payload->format;
  auto cleanup = [&] {
    fs::remove(packed, ec);
    fs::remove(tmp, ec);
  };
  try {
    std::ofstream(packed, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
    std::string elf = run_program({payload->format, "-d", "-c", packed});
    if (!elf_has_pvh_entry(elf)) {
      cleanup();
      r.why = vmlinuz + ": the unpacked kernel has no PVH entry note (a kernel built without CONFIG_PVH)";
      return r;
    }
    std::ofstream f(tmp, std::ios::binary);
    f.write(elf.data(), static_cast<std::streamsize>(elf.size()));
    f.close();
    if (!f) throw Error("cannot write " + tmp);
    fs::rename(tmp, out);
  } catch (const std::exception& e) {
    cleanup();
    r.why = fmt::format("{}: cannot unpack the {} payload: {}", vmlinuz, payload->format, e.what());
    return r;
  }
  fs::remove(packed, ec);
  r.path = out;
  return r;
}

}  // namespace ocslab::vlab
