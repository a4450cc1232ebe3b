// A full disk on demand: a tmpfs of a given size (e.g. "64k") mounted on a fresh folder under
// /tmp and unmounted when the fixture ends. Needs root (CI is root).
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ocslab/testing/sshd_fixture.h"

namespace ocslab::testing {

class SmallDisk {
 public:
  explicit SmallDisk(const std::string& size) {
    if (::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0) {
      throw std::runtime_error("mount -t tmpfs -o size=" + size + " " + dir_.path() + ": " + std::strerror(errno));
    }
  }
  ~SmallDisk() { ::umount2(dir_.path().c_str(), MNT_DETACH); }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;  // destroyed after the unmount
};

}  // namespace ocslab::testing
