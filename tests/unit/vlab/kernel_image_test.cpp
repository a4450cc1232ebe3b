// The guest kernel unpacked for a direct (PVH) boot: the bzImage header's payload, the ELF's PVH
// note, and unpack_pvh_kernel end to end with the real compressors (gzip, xz) on kernel images
// laid out as the kernel's build lays them out (setup sectors, payload, size appended).
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "ocslab/common/file.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/kernel_image.h"

namespace kernel_image_test {

using Catch::Matchers::Contains;
using ocslab::vlab::bzimage_payload;
using ocslab::vlab::elf_has_pvh_entry;
using ocslab::vlab::unpack_pvh_kernel;
namespace fs = std::filesystem;

namespace {

void put(std::string& b, size_t off, uint64_t v, size_t n) {
  if (b.size() < off + n) b.resize(off + n, '\0');
  for (size_t i = 0; i < n; ++i) b[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// An x86-64 ELF executable with one PT_NOTE segment holding one note (name, type).
std::string elf_with_note(const std::string& name, uint32_t type) {
  std::string e(64, '\0');
  e.replace(0, 4, "\x7f" "ELF");
  e[4] = 2;  // 64-bit
  e[5] = 1;  // little-endian
  e[6] = 1;
  put(e, 16, 2, 2);   // ET_EXEC
  put(e, 18, 62, 2);  // EM_X86_64
  put(e, 32, 64, 8);  // e_phoff
  put(e, 54, 56, 2);  // e_phentsize
  put(e, 56, 1, 2);   // e_phnum
  std::string note;
  put(note, 0, name.size() + 1, 4);
  put(note, 4, 4, 4);
  put(note, 8, type, 4);
  note += name + '\0';
  while (note.size() % 4) note += '\0';
  note += std::string("\x00\x00\x10\x01", 4);  // the entry address
  const size_t note_at = 64 + 56;
  put(e, 64, 4, 4);              // PT_NOTE
  put(e, 64 + 8, note_at, 8);    // p_offset
  put(e, 64 + 32, note.size(), 8);  // p_filesz
  e.resize(note_at);
  e += note;
  e += std::string(4096, 'k');  // the "kernel"
  return e;
}

// A bzImage of protocol 2.15: one setup sector after the boot sector, then the payload.
std::string bzimage(const std::string& payload, uint8_t setup_sects = 1) {
  std::string b(0x250, '\0');
  b[0x1f1] = static_cast<char>(setup_sects);
  b.replace(0x202, 4, "HdrS");
  put(b, 0x206, 0x020f, 2);
  const size_t pm = (setup_sects == 0 ? 5 : setup_sects + 1) * 512;
  put(b, 0x248, 0x100, 4);  // payload_offset, from the protected-mode code
  put(b, 0x24c, payload.size(), 4);
  b.resize(pm + 0x100, '\0');
  return b + payload + std::string(64, 't');  // the decompressor's tail after the payload
}

// `data` compressed by `tool` as the kernel build does: gzip as it is, others with the size
// appended.
std::string compress(const std::string& dir, const std::string& tool, const std::string& data) {
  const std::string in = dir + "/in";
  std::ofstream(in, std::ios::binary) << data;
  std::string out = ocslab::testing::run_command(tool + " -c " + in);
  if (tool != "gzip") {
    std::string size;
    put(size, 0, data.size(), 4);
    out += size;
  }
  return out;
}

}  // namespace

TEST_CASE("the PVH entry note is found in a well-formed ELF and only there", "[vlab][kernel]") {
  CHECK(elf_has_pvh_entry(elf_with_note("Xen", 18)));
  CHECK_FALSE(elf_has_pvh_entry(elf_with_note("Xen", 17)));  // another Xen note
  CHECK_FALSE(elf_has_pvh_entry(elf_with_note("GNU", 18)));
  std::string e = elf_with_note("Xen", 18);
  CHECK_FALSE(elf_has_pvh_entry(e.substr(0, 130)));  // the note cut off
  std::string wrong_machine = e;
  put(wrong_machine, 18, 183, 2);  // aarch64
  CHECK_FALSE(elf_has_pvh_entry(wrong_machine));
  std::string far_note = e;
  put(far_note, 64 + 8, uint64_t{1} << 62, 8);
  CHECK_FALSE(elf_has_pvh_entry(far_note));
  CHECK_FALSE(elf_has_pvh_entry("not an ELF"));
}

TEST_CASE("the bzImage header locates the compressed kernel and names its compressor", "[vlab][kernel]") {
  auto p = bzimage_payload(bzimage(std::string("\xfd" "7zXZ", 5) + std::string(1, '\0') + "rest"));
  REQUIRE(p);
  CHECK(p->format == "xz");
  CHECK(p->data.size() == 10);
  p = bzimage_payload(bzimage(std::string("\x28\xb5\x2f\xfd", 4) + "zz", 0));  // setup_sects 0 means 4
  REQUIRE(p);
  CHECK(p->format == "zstd");
  CHECK(bzimage_payload(bzimage("????"))->format == "unknown");
  std::string old = bzimage("payload");
  put(old, 0x206, 0x0207, 2);  // before payload_offset existed
  CHECK_FALSE(bzimage_payload(old));
  std::string beyond = bzimage("payload");
  put(beyond, 0x24c, 1u << 30, 4);
  CHECK_FALSE(bzimage_payload(beyond));
  CHECK_FALSE(bzimage_payload(std::string(0x300, 'x')));  // no "HdrS"
}

TEST_CASE("a gzip or xz kernel is unpacked to its ELF once; one without PVH is refused and leaves nothing",
          "[vlab][kernel]") {
  ocslab::testing::TempDir dir;
  const std::string elf = elf_with_note("Xen", 18);
  for (const std::string tool : {"gzip", "xz"}) {
    INFO(tool);
    const std::string vmlinuz = dir.path() + "/vmlinuz-" + tool, out = dir.path() + "/vmlinux-" + tool;
    std::ofstream(vmlinuz, std::ios::binary) << bzimage(compress(dir.path(), tool, elf));
    auto r = unpack_pvh_kernel(vmlinuz, out);
    INFO(r.why);
    REQUIRE(r.path == out);
    CHECK(ocslab::read_file(out) == elf);
    // Made once: an existing ELF is kept as it is.
    std::ofstream(out, std::ios::binary) << "kept";
    CHECK(unpack_pvh_kernel(vmlinuz, out).path == out);
    CHECK(ocslab::read_file(out) == "kept");
  }

  const std::string no_pvh = dir.path() + "/vmlinuz-nopvh", out = dir.path() + "/vmlinux-nopvh";
  std::ofstream(no_pvh, std::ios::binary) << bzimage(compress(dir.path(), "xz", elf_with_note("Xen", 17)));
  auto r = unpack_pvh_kernel(no_pvh, out);
  CHECK(r.path.empty());
  CHECK_THAT(r.why, Contains("no PVH entry note") && Contains(no_pvh));
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find("vmlinux-nopvh") == std::string::npos);

  const std::string bz2 = dir.path() + "/vmlinuz-bzip2";
  std::ofstream(bz2, std::ios::binary) << bzimage("BZh91AY&SY");
  r = unpack_pvh_kernel(bz2, dir.path() + "/vmlinux-bzip2");
  CHECK(r.path.empty());
  CHECK_THAT(r.why, Contains("bzip2-compressed"));

  const std::string corrupt = dir.path() + "/vmlinuz-corrupt";
  std::ofstream(corrupt, std::ios::binary) << bzimage(std::string("\xfd" "7zXZ", 5) + std::string(1, '\0') + "garbage!");
  r = unpack_pvh_kernel(corrupt, dir.path() + "/vmlinux-corrupt");
  CHECK(r.path.empty());
  CHECK_THAT(r.why, Contains("cannot unpack the xz payload"));
  CHECK_FALSE(fs::exists(dir.path() + "/vmlinux-corrupt"));

  const std::string text = dir.path() + "/notes.txt";
  std::ofstream(text) << "not a kernel";
  CHECK_THAT(unpack_pvh_kernel(text, dir.path() + "/x").why, Contains("not a bzImage") && Contains(text));
  CHECK_THAT(unpack_pvh_kernel(dir.path() + "/missing", dir.path() + "/y").why, Contains("missing"));
}

}  // namespace kernel_image_test
