// std::from_chars for a double on every standard library. Some lack the floating-point overload (libc++ 16
// declares it deleted); there a stand-in on std::strtod keeps from_chars's contract, so a flag or a JSON
// number is read the same whichever library the program is built with.
#pragma once

#include <charconv>

namespace lab {

// As std::from_chars(first, last, value) (chars_format::general): no leading whitespace or '+', no
// hexadecimal. On success ec is std::errc() and ptr points past the number, which need not reach `last`.
// A number beyond a double's range says std::errc::result_out_of_range and leaves `value` as it was; no
// number at all says std::errc::invalid_argument, with ptr == first.
std::from_chars_result from_chars_double(const char* first, const char* last, double& value);

}  // namespace lab
