// What a virtual-lab guest boots: Debian's kernel package, fetched with apt into a cache
// folder (never installed on this machine, never downloaded from anywhere else), and a small
// busybox initramfs that mounts this machine's root read-only over 9p under a tmpfs overlay
// and hands over to busybox init with the lab's inittab.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ocslab::vlab {

using ProgressFn = std::function<void(const std::string&)>;

struct KernelImage {
  std::string package;  // linux-image-6.1.0-56-amd64
  std::string version;  // 6.1.0-56-amd64 (the module tree's name)
  std::string root;     // extracted package; lib/modules/<version> is indexed with depmod
  std::string vmlinuz;
  // What QEMU's -kernel loads: the ELF unpacked from vmlinuz for a direct (PVH) boot where that
  // could be made (kernel_image.h), else vmlinuz itself.
  std::string boot_image;
  std::string modules_dir() const { return root + "/lib/modules/" + version; }
};

// Finds the kernel that Debian's linux-image-amd64 depends on (apt-get update first when the
// package lists do not know it), downloads and extracts it into <cache>/kernel/<package> once,
// and unpacks its vmlinuz for a direct boot once (boot/vmlinux-<version>; when that cannot be
// made, progress says why and the guests boot vmlinuz).
// With no package lists and no network, falls back to the newest kernel already cached.
// Throws Error naming the apt/dpkg step that failed.
KernelImage ensure_kernel(const std::string& cache_dir, const ProgressFn& progress);

// The modules the initramfs loads before switch_root, with their dependencies first, as paths
// relative to the module tree (from modules.dep). Throws Error naming a missing module.
std::vector<std::string> initramfs_modules(const KernelImage& kernel);

// Writes the initramfs (an uncompressed newc cpio) to `path`: /init, busybox, the modules.
void write_initramfs(const KernelImage& kernel, const std::string& path);

// The busybox /init script: mounts the 9p root (tag "hostroot") read-only under a tmpfs
// overlay, binds the kernel's module tree from the cache, installs the inittab found at
// ocslab.inittab=PATH on the kernel command line and switch_roots into busybox init.
std::string initramfs_init_script();

}  // namespace ocslab::vlab
