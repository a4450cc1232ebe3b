#include "ocslab/vlab/cpio.h"

#include <fmt/format.h>
#include <sys/stat.h>

namespace ocslab::vlab {

namespace {
void pad4(std::string& s) {
  while (s.size() % 4) s.push_back('\0');
}
}  // namespace

void CpioWriter::entry(const std::string& path, uint32_t mode, const std::string& data) {
  // c_magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor,
  // rdevminor, namesize (with NUL), check: 13 fields of 8 hex digits.
  out_ += fmt::format("070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}", ino_++,
                      mode, 0, 0, 1, 0, data.size(), 0, 0, 0, 0, path.size() + 1, 0);
  out_ += path;
  out_.push_back('\0');
  pad4(out_);
  out_ += data;
  pad4(out_);
}

void CpioWriter::add_dir(const std::string& path, uint32_t mode) { entry(path, S_IFDIR | mode, ""); }
void CpioWriter::add_file(const std::string& path, const std::string& data, uint32_t mode) {
  entry(path, S_IFREG | mode, data);
}

std::string CpioWriter::finish() {
  entry("TRAILER!!!", 0, "");
  return std::move(out_);
}

}  // namespace ocslab::vlab
