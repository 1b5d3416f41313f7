#include "common/util/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/core/error.h"
#include "common/util/parse_number.h"

namespace lab {

namespace {

// ---------------------------------------------------------------- parser

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json parse_document() {
    Json v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) error("unexpected trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void error(const char* what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail(ErrorKind::Format, "JSON: ", what, " at line ", line, ", column ", col);
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect_word(const char* word) {
    const size_t n = std::strlen(word);
    if (text_.substr(pos_, n) != word) error("invalid literal");
    pos_ += n;
  }

  Json parse_value(int depth) {
    if (depth > kMaxDepth) error("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (c == 't') {
      expect_word("true");
      return Json(true);
    }
    if (c == 'f') {
      expect_word("false");
      return Json(false);
    }
    if (c == 'n') {
      expect_word("null");
      return Json();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return Json(parse_number());
    error("unexpected character");
  }

  Json parse_object(int depth) {
    ++pos_;  // '{'
    Json::Object members;
    if (consume('}')) return Json(std::move(members));
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') error("expected a string key");
      std::string key = parse_string();
      if (!consume(':')) error("expected ':'");
      members.emplace_back(std::move(key), parse_value(depth + 1));
      if (consume(',')) continue;
      if (consume('}')) break;
      error("expected ',' or '}'");
    }
    return Json(std::move(members));
  }

  Json parse_array(int depth) {
    ++pos_;  // '['
    Json::Array items;
    if (consume(']')) return Json(std::move(items));
    while (true) {
      items.push_back(parse_value(depth + 1));
      if (consume(',')) continue;
      if (consume(']')) break;
      error("expected ',' or ']'");
    }
    return Json(std::move(items));
  }

  double parse_number() {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t s = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - s;
    };
    if (digits() == 0) error("invalid number");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) error("invalid number");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) error("invalid number");
    }
    double value = 0;
    auto [ptr, ec] = from_chars_double(text_.data() + start, text_.data() + pos_, value);
    if (ec != std::errc() && ec != std::errc::result_out_of_range) error("invalid number");
    (void)ptr;
    return value;
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        error("invalid \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) error("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // surrogate pair
            if (text_.substr(pos_, 2) != "\\u") error("unpaired surrogate");
            pos_ += 2;
            const uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) error("invalid low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            error("unpaired surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: error("invalid escape");
      }
    }
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------- writer

void dump_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dump_number(std::string& out, double v) {
  if (!std::isfinite(v)) {  // JSON has no NaN/inf; null keeps the document valid
    out += "null";
    return;
  }
  char buf[32];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  (void)ec;
  out.append(buf, ptr);
}

void dump_value(std::string& out, const Json& v, int indent, int level);

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * level), ' ');
}

void dump_value(std::string& out, const Json& v, int indent, int level) {
  if (v.is_null()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_number()) {
    dump_number(out, v.as_number());
  } else if (v.is_string()) {
    dump_string(out, v.as_string());
  } else if (v.is_array()) {
    const auto& a = v.as_array();
    out += '[';
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      newline(out, indent, level + 1);
      dump_value(out, a[i], indent, level + 1);
    }
    if (!a.empty()) newline(out, indent, level);
    out += ']';
  } else {
    const auto& o = v.as_object();
    out += '{';
    for (size_t i = 0; i < o.size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      newline(out, indent, level + 1);
      dump_string(out, o[i].first);
      out += ": ";
      dump_value(out, o[i].second, indent, level + 1);
    }
    if (!o.empty()) newline(out, indent, level);
    out += '}';
  }
}

[[noreturn]] void type_error(const char* expected) {
  fail(ErrorKind::Format, "JSON: expected ", expected);
}

}  // namespace

Json Json::parse(std::string_view text) {
  return Parser(text).parse_document();
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_value(out, *this, indent, 0);
  return out;
}

bool Json::as_bool() const {
  if (!is_bool()) type_error("a boolean");
  return std::get<bool>(value_);
}
double Json::as_number() const {
  if (!is_number()) type_error("a number");
  return std::get<double>(value_);
}
int64_t Json::as_int() const {
  const double v = as_number();
  if (v != std::floor(v) || std::fabs(v) > 9.007199254740992e15) type_error("an integer");
  return static_cast<int64_t>(v);
}
const std::string& Json::as_string() const {
  if (!is_string()) type_error("a string");
  return std::get<std::string>(value_);
}
const Json::Array& Json::as_array() const {
  if (!is_array()) type_error("an array");
  return std::get<Array>(value_);
}
Json::Array& Json::as_array() {
  if (!is_array()) type_error("an array");
  return std::get<Array>(value_);
}
const Json::Object& Json::as_object() const {
  if (!is_object()) type_error("an object");
  return std::get<Object>(value_);
}
Json::Object& Json::as_object() {
  if (!is_object()) type_error("an object");
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* v = find(key);
  if (!v) fail(ErrorKind::Format, "JSON: missing key '", key, "'");
  return *v;
}

Json& Json::set(std::string_view key, Json value) {
  for (auto& [k, v] : as_object()) {
    if (k == key) {
      v = std::move(value);
      return v;
    }
  }
  auto& members = as_object();
  members.emplace_back(std::string(key), std::move(value));
  return members.back().second;
}

void Json::push_back(Json value) {
  as_array().push_back(std::move(value));
}

size_t Json::size() const {
  return is_array() ? as_array().size() : as_object().size();
}

}  // namespace lab
