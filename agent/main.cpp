#include <iostream>

#include "ocslab/agent/cli.h"

int main(int argc, char** argv) {
  return ocslab::agent::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
