// The one place where executables turn exceptions into a clear error line and a non-zero exit.
#pragma once

#include <functional>

namespace lab {

// Runs body(argc, argv); any exception prints "<program>: error: <message>" to stderr and returns 1.
int run_main(int argc, char** argv, const std::function<int(int, char**)>& body);

}  // namespace lab
