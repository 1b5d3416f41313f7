// Command-line flags: `--name value` or `--name=value`; booleans also as `--name` / `--no-name` and as
// `--name true|false` (also 1/0, on/off).
//
// Every program registers its flags with a pointer to the variable that holds the default, then calls
// parse(). Unknown flags, missing values, malformed numbers and out-of-range values throw
// Error(InvalidArgument) naming the flag (an unknown one with the nearest known name: "did you mean --steps?");
// `--help` prints the usage and makes parse() return false.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace lab {

class Flags {
 public:
  Flags(std::string program, std::string description);

  void add_string(const std::string& name, std::string* target, const std::string& help);
  void add_int(const std::string& name, int64_t* target, const std::string& help,
               int64_t min = std::numeric_limits<int64_t>::min(), int64_t max = std::numeric_limits<int64_t>::max());
  void add_float(const std::string& name, double* target, const std::string& help,
                 double min = -std::numeric_limits<double>::infinity(),
                 double max = std::numeric_limits<double>::infinity());
  void add_bool(const std::string& name, bool* target, const std::string& help);
  // A string flag whose value must be one of `choices`.
  void add_choice(const std::string& name, std::string* target, const std::vector<std::string>& choices,
                  const std::string& help);

  // Returns false when --help was given (usage already printed); throws on any error.
  bool parse(int argc, char** argv);
  // Same, for flags given as a list (used by presets and tests).
  bool parse(const std::vector<std::string>& args);

  bool was_set(const std::string& name) const { return set_.count(name) > 0; }
  std::string usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<void(const std::string&)> assign;  // parses and stores a value, throwing on error
  };
  Flag& add(const std::string& name, const std::string& help, std::string default_text);
  Flag* lookup(const std::string& name);
  // " (did you mean --X?)" for the known flag nearest to an unknown `name`, or "" when none is near.
  std::string suggestion(const std::string& name) const;

  std::string program_;
  std::string description_;
  std::vector<Flag> flags_;
  std::set<std::string> set_;
};

}  // namespace lab
