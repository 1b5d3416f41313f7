#include "common/util/flags.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>
#include <vector>

#include "common/core/error.h"
#include "common/util/parse_number.h"

namespace lab {

namespace {

std::string format_double(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The values a boolean flag takes, also as the next argument (`--eot false`).
bool is_bool_word(const std::string& v) {
  return v == "true" || v == "false" || v == "1" || v == "0" || v == "on" || v == "off";
}

// Levenshtein distance: how many single-character edits turn `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substituted = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substituted});
    }
  }
  return row[b.size()];
}

}  // namespace

Flags::Flags(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

Flags::Flag& Flags::add(const std::string& name, const std::string& help, std::string default_text) {
  LAB_ASSERT(lookup(name) == nullptr);
  flags_.push_back(Flag{name, help, std::move(default_text), false, {}});
  return flags_.back();
}

Flags::Flag* Flags::lookup(const std::string& name) {
  for (auto& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

void Flags::add_string(const std::string& name, std::string* target, const std::string& help) {
  add(name, help, target->empty() ? "" : "\"" + *target + "\"").assign = [target](const std::string& v) {
    *target = v;
  };
}

void Flags::add_int(const std::string& name, int64_t* target, const std::string& help, int64_t min, int64_t max) {
  add(name, help, std::to_string(*target)).assign = [name, target, min, max](const std::string& v) {
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    LAB_CHECK(ec == std::errc() && ptr == v.data() + v.size(), InvalidArgument, "--", name,
              ": expected an integer, got '", v, "'");
    LAB_CHECK(value >= min && value <= max, InvalidArgument, "--", name, ": ", value, " is out of range [", min, ", ",
              max, "]");
    *target = value;
  };
}

void Flags::add_float(const std::string& name, double* target, const std::string& help, double min, double max) {
  add(name, help, format_double(*target)).assign = [name, target, min, max](const std::string& v) {
    double value = 0;
    auto [ptr, ec] = from_chars_double(v.data(), v.data() + v.size(), value);
    LAB_CHECK(ec == std::errc() && ptr == v.data() + v.size() && value == value, InvalidArgument, "--", name,
              ": expected a number, got '", v, "'");
    LAB_CHECK(value >= min && value <= max, InvalidArgument, "--", name, ": ", v, " is out of range [",
              format_double(min), ", ", format_double(max), "]");
    *target = value;
  };
}

void Flags::add_bool(const std::string& name, bool* target, const std::string& help) {
  Flag& f = add(name, help, *target ? "true" : "false");
  f.is_bool = true;
  f.assign = [name, target](const std::string& v) {
    if (v == "true" || v == "1" || v == "on")
      *target = true;
    else if (v == "false" || v == "0" || v == "off")
      *target = false;
    else
      fail(ErrorKind::InvalidArgument, "--", name, ": expected true or false, got '", v, "'");
  };
}

void Flags::add_choice(const std::string& name, std::string* target, const std::vector<std::string>& choices,
                       const std::string& help) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  add(name, help + " (" + list + ")", *target).assign = [name, target, choices, list](const std::string& v) {
    for (const auto& c : choices) {
      if (c == v) {
        *target = v;
        return;
      }
    }
    fail(ErrorKind::InvalidArgument, "--", name, ": '", v, "' is not one of ", list);
  };
}

bool Flags::parse(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse(args);
}

bool Flags::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    LAB_CHECK(arg.size() > 2 && arg.rfind("--", 0) == 0, InvalidArgument, "unexpected argument '", arg,
              "' (flags look like --name value; see --help)");
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Flag* flag = lookup(name);
    if (!flag && !has_value && name.rfind("no-", 0) == 0) {  // --no-name for booleans
      Flag* negated = lookup(name.substr(3));
      if (negated && negated->is_bool) {
        negated->assign("false");
        set_.insert(negated->name);
        continue;
      }
    }
    LAB_CHECK(flag, InvalidArgument, "unknown flag --", name, suggestion(name), " (see --help)");
    if (!has_value) {
      if (flag->is_bool) {
        // `--eot false` reads as `--eot=false`: nothing else may follow a flag but a flag.
        value = i + 1 < args.size() && is_bool_word(args[i + 1]) ? args[++i] : "true";
      } else {
        LAB_CHECK(i + 1 < args.size(), InvalidArgument, "--", name, " needs a value");
        value = args[++i];
      }
    }
    flag->assign(value);
    set_.insert(name);
  }
  return true;
}

std::string Flags::suggestion(const std::string& name) const {
  // A typo (a letter missing, extra, wrong or two swapped) is 1-2 edits away, 3 in a long name; a short name
  // is near too many others for more than one.
  const size_t limit = name.size() <= 3 ? 1 : std::min<size_t>(3, std::max<size_t>(2, name.size() / 4));
  const Flag* nearest = nullptr;
  size_t nearest_distance = limit + 1;
  for (const auto& f : flags_) {
    const size_t d = edit_distance(name, f.name);
    if (d < nearest_distance) {
      nearest = &f;
      nearest_distance = d;
    }
  }
  return nearest ? " (did you mean --" + nearest->name + "?)" : "";
}

std::string Flags::usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]\n" << description_ << "\n\nflags:\n";
  for (const auto& f : flags_) {
    std::string head = "  --" + f.name + (f.is_bool ? " [true|false], --no-" + f.name : " V");
    out << head;
    if (head.size() < 28)
      out << std::string(28 - head.size(), ' ');
    else
      out << "\n" << std::string(28, ' ');
    out << f.help;
    if (!f.default_text.empty()) out << " [default " << f.default_text << "]";
    out << "\n";
  }
  return out.str();
}

}  // namespace lab
