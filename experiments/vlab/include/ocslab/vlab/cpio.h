// A minimal writer of the "newc" cpio format the kernel unpacks as an initramfs.
#pragma once

#include <cstdint>
#include <string>

namespace ocslab::vlab {

class CpioWriter {
 public:
  void add_dir(const std::string& path, uint32_t mode = 0755);
  void add_file(const std::string& path, const std::string& data, uint32_t mode = 0644);
  // Appends the trailer and returns the archive.
  std::string finish();

 private:
  void entry(const std::string& path, uint32_t mode, const std::string& data);
  std::string out_;
  uint32_t ino_ = 1;
};

}  // namespace ocslab::vlab
