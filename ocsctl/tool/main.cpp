#include <iostream>

#include "ocslab/tool/cli.h"

int main(int argc, char** argv) {
  return ocslab::ocs::run_ocsctl(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
