// SPEC strings ("name:key=value,key=value"), as the filter-bank presets and the effects take
// them: every key known to the preset or effect, each given once, values checked with errors
// that name the spec, the key, the value and the rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "convbank/error.hpp"

namespace convbank::detail {

inline std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "name:key=value,key=value" with every key known to the preset, each given once.
class Spec {
 public:
  Spec(std::string_view text, std::string_view what) : what_(what) {
    const std::size_t colon = text.find(':');
    name_ = std::string(text.substr(0, colon));
    if (name_.empty()) throw Error(what_ + ": '" + std::string(text) + "' names no preset");
    if (colon == std::string_view::npos) return;
    std::string_view rest = text.substr(colon + 1);
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        throw Error(what_ + " '" + name_ + "': expected key=value, got '" + std::string(item) +
                    "'");
      }
      const std::string key(item.substr(0, eq));
      if (!values_.emplace(key, std::string(item.substr(eq + 1))).second) {
        throw Error(what_ + " '" + name_ + "': key '" + key + "' is given twice");
      }
      order_.push_back(key);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }

  const std::string& name() const { return name_; }
  const std::vector<std::string>& keys() const { return order_; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }

  // Throws for any key outside `allowed`.
  void only(std::initializer_list<const char*> allowed) const {
    for (const std::string& k : order_) {
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; })) {
        std::string list;
        for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
        throw Error(what_ + " '" + name_ + "': unknown key '" + k + "' (known keys: " + list + ")");
      }
    }
  }

  std::string text(const std::string& key, const std::string& fallback) const {
    const auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }

  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size()) {
      throw Error(what_ + " '" + name_ + "': " + key + " must be an integer, got '" + it->second +
                  "'");
    }
    if (v < min) {
      throw Error(what_ + " '" + name_ + "': " + key + " must be >= " + std::to_string(min) +
                  ", got " + it->second);
    }
    return v;
  }

  double number(const std::string& key, double fallback) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size() || !std::isfinite(v)) {
      throw Error(what_ + " '" + name_ + "': " + key + " must be a finite number, got '" +
                  it->second + "'");
    }
    return v;
  }

  bool flag(const std::string& key, bool fallback) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    if (it->second == "true" || it->second == "1") return true;
    if (it->second == "false" || it->second == "0") return false;
    throw Error(what_ + " '" + name_ + "': " + key + " must be true or false, got '" + it->second +
                "'");
  }

 private:
  std::string what_;
  std::string name_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> order_;
};

}  // namespace convbank::detail
