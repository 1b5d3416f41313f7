#include "common/util/main.h"

#include <cstdio>
#include <exception>
#include <string>

#include "common/core/error.h"

namespace lab {

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body) {
  std::string program = argc > 0 ? argv[0] : "program";
  if (const size_t slash = program.rfind('/'); slash != std::string::npos) program = program.substr(slash + 1);
  try {
    return body(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  }
  return 1;
}

}  // namespace lab
