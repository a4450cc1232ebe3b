#include <iostream>

#include "ocslab/cli/ocslab_cli.h"

int main(int argc, char** argv) {
  return ocslab::cli::run_ocslab(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
