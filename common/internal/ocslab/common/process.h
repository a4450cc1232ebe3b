// Child processes without a shell: run a program to completion and take its output, or start
// one in the background (QEMU, sshd) tied to this process's life. Also: a free loopback port.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ocslab {

// Runs argv[0] (searched in PATH) with its arguments; returns its standard output. Throws
// Error naming the command, its exit status and the end of its standard error when it cannot
// start or exits non-zero.
std::string run_program(const std::vector<std::string>& argv, const std::string& cwd = {});

// A program run to completion: its exit status (128 + the signal number when a signal killed
// it, 127 when it could not be executed) and everything it wrote.
struct ProgramResult {
  int status = 0;
  int signal = 0;  // the signal that killed it, else 0
  std::string out;
  std::string err;
};

// As run_program, but a non-zero exit is an outcome rather than an error: for front commands
// that forward a helper's exit code and messages. Throws SystemError when pipe or fork fails.
ProgramResult run_program_status(const std::vector<std::string>& argv, const std::string& cwd = {});

struct SpawnOptions {
  std::string log_file;         // standard output and error appended here; empty: /dev/null
  bool die_with_parent = true;  // SIGKILL the child when the spawning thread exits
  std::string cwd;
};

// Starts argv in the background, standard input from /dev/null. Throws SystemError when
// fork fails; a program that cannot be executed exits 127 (reaped by the caller).
pid_t spawn_program(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// True while pid runs and is not a zombie.
bool process_alive(pid_t pid);

// A port on 127.0.0.1 that was free a moment ago (type SOCK_STREAM or SOCK_DGRAM).
int free_loopback_port(int type);

}  // namespace ocslab
