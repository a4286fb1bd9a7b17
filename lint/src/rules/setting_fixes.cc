// Removing settings and items of their values, from the ranges the frontends record.
#include "setting_fixes.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace nccl_migrate::lint {
namespace {

// The value's bytes are the value itself (no quotes, no escapes), so offsets into it are
// offsets into the file.
bool valueIsVerbatim(const Setting& s) {
  return s.valueRange.known() && s.valueRange.end - s.valueRange.begin == s.value.size();
}

std::vector<std::string> topLevelItems(const std::string& value) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : value) {
    if (c == '[') ++depth;
    else if (c == ']' && depth > 0) --depth;
    if (c == ',' && depth == 0) items.emplace_back();
    else items.back() += c;
  }
  return items;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

std::optional<Fix> removeSetting(const Setting& setting, const std::string& title) {
  if (!setting.statement.known()) return std::nullopt;
  return Fix{title, FixSafety::Unsafe, {{setting.statement, ""}}};
}

std::optional<Fix> removeValueItems(const Setting& setting, const std::function<bool(const std::string&)>& drop,
                                    const std::string& title) {
  if (!valueIsVerbatim(setting)) return std::nullopt;
  std::string kept;
  bool dropped = false;
  for (const std::string& item : topLevelItems(setting.value)) {
    if (drop(item)) {
      dropped = true;
      continue;
    }
    if (item.find_first_not_of(" \t") == std::string::npos) continue;  // an empty entry torch skips too
    kept += (kept.empty() ? "" : ",") + item;
  }
  if (!dropped) return std::nullopt;
  size_t first = kept.find_first_not_of(" \t");
  if (first == std::string::npos) return removeSetting(setting, title);
  return Fix{title, FixSafety::Unsafe, {{setting.valueRange, kept.substr(first)}}};
}

std::optional<Fix> replaceInValue(const Setting& setting, std::string_view from, std::string_view to,
                                  const std::string& title) {
  if (!valueIsVerbatim(setting) || from.empty()) return std::nullopt;
  std::string value = lower(setting.value), needle = lower(from);
  Fix fix{title, FixSafety::Unsafe, {}};
  // A whole word of the value only: between blanks, list and map separators or its ends, not a
  // part of a path or a name (`/tmp/nccl-legacy.log`, `my-nccl-legacy-run`).
  auto separates = [](char c) { return std::string_view(" \t,:;=\"'[](){}").find(c) != std::string_view::npos; };
  for (size_t at = value.find(needle); at != std::string::npos; at = value.find(needle, at + needle.size())) {
    size_t end = at + needle.size();
    if ((at > 0 && !separates(value[at - 1])) || (end < value.size() && !separates(value[end]))) continue;
    size_t begin = setting.valueRange.begin + at;
    fix.edits.push_back({{begin, begin + from.size()}, std::string(to)});
  }
  if (fix.edits.empty()) return std::nullopt;
  return fix;
}

}  // namespace nccl_migrate::lint
