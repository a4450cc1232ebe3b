// The processes of this machine, read from /proc while they come and go. Every test that looks
// for processes (an agent daemon, a rank, a lab's QEMU) reads them through this: a process that
// exits between the directory listing and the read of its command line (read(2) then fails with
// ESRCH) is skipped, never an error, and nothing here throws.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ocslab::testing {

struct ProcessEntry {
  pid_t pid = 0;
  std::string cmdline;  // /proc/PID/cmdline as the kernel has it: arguments separated by '\0'

  // The command line with the separators as spaces, for matching and messages.
  std::string args_text() const;
};

// Every process whose command line could be read (kernel threads, whose command line is empty,
// included).
std::vector<ProcessEntry> list_processes();

// The processes whose command line (in args_text() form) contains `needle`.
std::vector<ProcessEntry> processes_matching(const std::string& needle);

// Every process under `root` (its children, theirs, ...; not root itself), from one pass over
// each process's /proc/PID/stat.
std::vector<pid_t> descendants_of(pid_t root);

}  // namespace ocslab::testing
