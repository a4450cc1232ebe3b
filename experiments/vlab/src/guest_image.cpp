#include "ocslab/vlab/guest_image.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/vlab/cpio.h"
#include "ocslab/vlab/kernel_image.h"

namespace fs = std::filesystem;

namespace ocslab::vlab {

namespace {

// What the initramfs needs to reach the 9p root: virtio PCI transport, 9p over virtio and
// overlayfs. Everything else loads with modprobe once the real root is up.
const char* const kInitramfsModules[] = {"virtio_pci", "9pnet_virtio", "9p", "overlay"};

std::optional<std::string> kernel_package_from_apt() {
  std::string out;
  try {
    out = run_program({"apt-cache", "depends", "linux-image-amd64"});
  } catch (const Error&) {
    return std::nullopt;
  }
  std::smatch m;
  static const std::regex re("Depends: (linux-image-[0-9][^\\s]*-amd64)");
  if (std::regex_search(out, m, re)) return m[1].str();
  return std::nullopt;
}

std::optional<KernelImage> cached_kernel(const fs::path& dir) {
  if (!fs::exists(dir / ".ready")) return std::nullopt;
  KernelImage k;
  k.package = dir.filename().string();
  k.root = dir / "root";
  for (const auto& e : fs::directory_iterator(dir / "root/lib/modules")) k.version = e.path().filename().string();
  k.vmlinuz = (dir / "root/boot" / ("vmlinuz-" + k.version)).string();
  if (k.version.empty() || !fs::exists(k.vmlinuz)) return std::nullopt;
  k.boot_image = k.vmlinuz;
  return k;
}

// The kernel's ELF for a direct boot, unpacked once beside vmlinuz; a kernel it cannot be made
// for is tried once (the reason is kept in boot/vmlinux-<version>.none) and boots as vmlinuz.
KernelImage with_boot_image(KernelImage k, const ProgressFn& progress) {
  const fs::path elf = fs::path(k.root) / "boot" / ("vmlinux-" + k.version);
  const fs::path none = elf.string() + ".none";
  if (fs::exists(elf)) {
    k.boot_image = elf.string();
    return k;
  }
  if (fs::exists(none)) return k;
  progress("unpacking " + fs::path(k.vmlinuz).filename().string() + " for a direct (PVH) boot");
  PvhKernel pvh = unpack_pvh_kernel(k.vmlinuz, elf.string());
  if (!pvh.path.empty()) {
    k.boot_image = pvh.path;
  } else {
    progress("the guests boot " + k.vmlinuz + ": " + pvh.why);
    std::ofstream(none) << pvh.why << "\n";
  }
  return k;
}

}  // namespace

KernelImage ensure_kernel(const std::string& cache_dir, const ProgressFn& progress) {
  fs::path kernels = fs::path(cache_dir) / "kernel";
  fs::create_directories(kernels);
  auto package = kernel_package_from_apt();
  if (!package) {
    progress("updating apt's package lists (apt-get update)");
    try {
      run_program({"apt-get", "update", "-qq"});
    } catch (const Error& e) {
      progress(std::string("apt-get update failed: ") + e.what());
    }
    package = kernel_package_from_apt();
  }
  if (!package) {
    // Offline: the newest kernel already in the cache will do.
    std::optional<KernelImage> best;
    for (const auto& e : fs::directory_iterator(kernels)) {
      auto k = cached_kernel(e.path());
      if (k && (!best || k->package > best->package)) best = k;
    }
    if (best) return with_boot_image(*best, progress);
    throw Error(
        "cannot find Debian's kernel package: 'apt-cache depends linux-image-amd64' names none, even after "
        "apt-get update, and " +
        kernels.string() + " holds no kernel yet");
  }
  fs::path dir = kernels / *package;
  if (auto k = cached_kernel(dir)) return with_boot_image(*k, progress);

  progress("fetching " + *package + " with apt into " + dir.string());
  fs::path debs = kernels / "debs";
  fs::create_directories(debs);
  run_program({"apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", *package}, debs.string());
  fs::path deb;
  for (const auto& e : fs::directory_iterator(debs)) {
    if (e.path().filename().string().rfind(*package + "_", 0) == 0) deb = e.path();
  }
  if (deb.empty()) throw Error("apt-get download " + *package + " left no .deb in " + debs.string());
  fs::path staging = kernels / (*package + ".partial");
  fs::remove_all(staging);
  fs::create_directories(staging / "root");
  progress("extracting " + deb.filename().string());
  run_program({"dpkg-deb", "-x", deb.string(), (staging / "root").string()});
  std::string version;
  for (const auto& e : fs::directory_iterator(staging / "root/lib/modules")) version = e.path().filename().string();
  if (version.empty()) throw Error(deb.string() + " holds no module tree under lib/modules");
  progress("indexing modules of " + version + " (depmod)");
  run_program({"depmod", "-b", (staging / "root").string(), version});
  std::ofstream(staging / ".ready") << *package << "\n";
  fs::remove_all(dir);
  fs::rename(staging, dir);
  fs::remove(deb);
  auto k = cached_kernel(dir);
  if (!k) throw Error(dir.string() + ": the extracted kernel has no vmlinuz");
  return with_boot_image(*k, progress);
}

std::vector<std::string> initramfs_modules(const KernelImage& kernel) {
  // modules.dep: "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko ..."
  std::map<std::string, std::vector<std::string>> deps;
  std::map<std::string, std::string> by_name;
  std::istringstream in(read_file(kernel.modules_dir() + "/modules.dep"));
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string mod = line.substr(0, colon);
    std::istringstream rest(line.substr(colon + 1));
    std::vector<std::string> d;
    for (std::string dep; rest >> dep;) d.push_back(dep);
    deps[mod] = d;
    std::string base = fs::path(mod).filename().string();
    by_name[base.substr(0, base.find(".ko"))] = mod;
  }
  std::vector<std::string> order;
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& mod) {
    if (!seen.insert(mod).second) return;
    for (const auto& d : deps[mod]) visit(d);
    order.push_back(mod);
  };
  for (const char* name : kInitramfsModules) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      // Built into this kernel: nothing to load.
      if (read_file(kernel.modules_dir() + "/modules.builtin").find("/" + std::string(name) + ".ko") !=
          std::string::npos)
        continue;
      throw Error(fmt::format("kernel {} has no module '{}' (needed to mount the 9p root)", kernel.version, name));
    }
    visit(it->second);
  }
  return order;
}

std::string initramfs_init_script() {
  return R"SH(#!/bin/busybox sh
# ocslab virtual-lab initramfs: mount this machine's root (9p tag hostroot) read-only under a
# tmpfs overlay, bind the lab kernel's module tree, hand over to busybox init.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "ocslab-initramfs: $*" > /dev/console; exec sh; }
for m in $(cat /modules.order); do insmod "/modules/$m" || fail "insmod $m"; done
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    ocslab.modules=*) MODULES="${arg#ocslab.modules=}" ;;
    ocslab.inittab=*) INITTAB="${arg#ocslab.inittab=}" ;;
    ocslab.busybox=*) BUSYBOX="${arg#ocslab.busybox=}" ;;
  esac
done
[ -n "$MODULES" ] && [ -n "$INITTAB" ] && [ -n "$BUSYBOX" ] || fail "missing ocslab.* kernel arguments"
mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || fail "mount 9p root"
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "mount tmpfs"
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || fail "mount overlay"
mkdir -p /newroot/lib/modules
mount -o bind "/lower$MODULES" /newroot/lib/modules || fail "bind $MODULES"
for d in run tmp; do mount -t tmpfs -o mode=1777 tmpfs "/newroot/$d" || fail "tmpfs /$d"; done
chmod 0755 /newroot/run
# What ocslab keeps on a host (agent spools, forwarding journals) is the guest's own: this
# machine's copies (a run or test on the host) would otherwise show through the overlay.
for d in var/spool/ocslab-agent var/lib/ocslab; do
  mkdir -p "/newroot/$d" && mount -t tmpfs -o mode=0755 tmpfs "/newroot/$d" || fail "tmpfs /$d"
done
cp "/lower$INITTAB" /newroot/etc/inittab || fail "copy $INITTAB"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot "$BUSYBOX" init
)SH";
}

void write_initramfs(const KernelImage& kernel, const std::string& path) {
  std::string busybox;
  for (const char* p : {"/usr/bin/busybox", "/bin/busybox"}) {
    if (fs::exists(p)) {
      busybox = p;
      break;
    }
  }
  if (busybox.empty())
    throw Error("busybox is not installed (Debian package busybox-static; scripts/install-deps installs it)");
  CpioWriter cpio;
  for (const char* d : {"bin", "dev", "proc", "sys", "modules"}) cpio.add_dir(d);
  cpio.add_file("bin/busybox", read_file(busybox), 0755);
  cpio.add_file("init", initramfs_init_script(), 0755);
  std::string order;
  for (const auto& mod : initramfs_modules(kernel)) {
    std::string base = fs::path(mod).filename().string();
    cpio.add_file("modules/" + base, read_file(kernel.modules_dir() + "/" + mod));
    order += base + "\n";
  }
  cpio.add_file("modules.order", order);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    std::string data = cpio.finish();
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw Error("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

}  // namespace ocslab::vlab
