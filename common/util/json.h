// A small JSON value: parse and dump. Objects keep their insertion order (so logs read naturally);
// lookups are linear, which suits the small objects this project writes (headers, state, logs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lab {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : value_(b) {}
  Json(int v) : value_(static_cast<double>(v)) {}
  Json(int64_t v) : value_(static_cast<double>(v)) {}
  Json(uint64_t v) : value_(static_cast<double>(v)) {}
  Json(double v) : value_(v) {}
  Json(const char* s) : value_(std::string(s)) {}
  Json(std::string s) : value_(std::move(s)) {}
  Json(Array a) : value_(std::move(a)) {}
  Json(Object o) : value_(std::move(o)) {}
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  // Throws Error(Format) with the line and column of the problem.
  static Json parse(std::string_view text);
  // Compact on one line when indent < 0, else pretty-printed with that many spaces.
  std::string dump(int indent = -1) const;

  bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  bool is_number() const { return std::holds_alternative<double>(value_); }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  bool is_array() const { return std::holds_alternative<Array>(value_); }
  bool is_object() const { return std::holds_alternative<Object>(value_); }

  // Typed access; each throws Error(Format) naming the expected type when the value is another.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;  // a number that must be integral
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Objects: `at` throws Format naming a missing key; `find` returns nullptr; `set` replaces or appends.
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Json* find(std::string_view key) const;
  const Json& at(std::string_view key) const;
  Json& set(std::string_view key, Json value);
  // Arrays.
  void push_back(Json value);
  size_t size() const;  // elements of an array or members of an object

 private:
  std::variant<std::monostate, bool, double, std::string, Array, Object> value_;
};

}  // namespace lab
