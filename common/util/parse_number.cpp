#include "common/util/parse_number.h"

#if !defined(__cpp_lib_to_chars)
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#endif

namespace lab {

#if defined(__cpp_lib_to_chars)

std::from_chars_result from_chars_double(const char* first, const char* last, double& value) {
  return std::from_chars(first, last, value);
}

#else

// strtod reads more than from_chars does: leading whitespace, a '+', hexadecimal ("0x1p4"). The first two
// are refused here; of a hexadecimal number from_chars reads the "0" only, so strtod gets no more than that.
std::from_chars_result from_chars_double(const char* first, const char* last, double& value) {
  if (first == last || std::isspace(static_cast<unsigned char>(*first)) || *first == '+')
    return {first, std::errc::invalid_argument};
  const char* digits = *first == '-' ? first + 1 : first;
  const bool hex = last - digits >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
  const std::string text(first, hex ? digits + 1 : last);  // strtod reads up to a NUL
  char* end = nullptr;
  errno = 0;
  const double parsed = std::strtod(text.c_str(), &end);
  const char* ptr = first + (end - text.c_str());
  if (ptr == first) return {first, std::errc::invalid_argument};
  // strtod also says ERANGE of a subnormal result, which is in range for from_chars.
  if (errno == ERANGE && (std::isinf(parsed) || parsed == 0.0)) return {ptr, std::errc::result_out_of_range};
  value = parsed;
  return {ptr, std::errc()};
}

#endif

}  // namespace lab
