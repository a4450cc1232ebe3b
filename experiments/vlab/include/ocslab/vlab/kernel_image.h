// The guest kernel in the form QEMU boots fastest under emulation. A distribution's vmlinuz is
// a bzImage: a compressed kernel behind a small decompressor, which the guest runs at every boot,
// in software emulation (about 3.4 s of CPU for Debian's xz-compressed 6.1 kernel on the 2-core
// build machine). Unpacked once into the ELF `vmlinux`, a kernel built with CONFIG_PVH (Debian's
// and Ubuntu's are) is loaded by QEMU itself and entered through its PVH entry point: the same
// kernel, command line and initramfs, without the decompression (docs/virtual-lab.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ocslab::vlab {

// The compressed kernel inside a bzImage, as its setup header locates it (x86 boot protocol
// 2.08 or later: payload_offset / payload_length). `format` is the compressor its magic bytes
// name: "gzip", "xz", "zstd", "lz4", "lzma", "bzip2", "lzo" or "unknown".
struct BzPayload {
  std::string format;
  std::string_view data;  // inside the image passed in
};

// Nullopt when `image` is not a bzImage of protocol 2.08+ or its header points outside it.
std::optional<BzPayload> bzimage_payload(std::string_view image);

// True for a 64-bit little-endian x86-64 ELF executable whose notes carry the PVH entry point
// (name "Xen", type XEN_ELFNOTE_PHYS32_ENTRY = 18): what QEMU needs to boot it with -kernel.
// Every offset and size is checked against `elf`; anything malformed is false.
bool elf_has_pvh_entry(std::string_view elf);

// The outcome of unpack_pvh_kernel: the path of the ELF kernel, or why there is none.
struct PvhKernel {
  std::string path;  // empty when the kernel cannot be booted this way
  std::string why;   // for a progress line when `path` is empty
};

// Unpacks the bzImage `vmlinuz` into `out` (written beside it under a temporary name and renamed,
// so a concurrent `vlab up` never sees half a file) when its payload is gzip, xz or zstd (the
// program of that name decompresses it) and the result is an ELF with the PVH entry note. An
// existing `out` is kept. Never throws for a kernel that cannot be unpacked: `why` says what.
PvhKernel unpack_pvh_kernel(const std::string& vmlinuz, const std::string& out);

}  // namespace ocslab::vlab
