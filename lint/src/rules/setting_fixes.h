// Fixes that take a setting out of a script, an image or a configuration file: the whole
// statement (`export X=0`, `ENV X=0`, `X: 0`), or the items of its value that do the harm, the
// rest of the line and file, comments included, left as written.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// Removes what sets `setting`; none where the frontend found no statement that stands alone.
std::optional<Fix> removeSetting(const Setting& setting, const std::string& title);

// Drops the comma-separated items of the value (commas inside [...] belong to an item, as torch
// reads allocator settings) for which `drop` holds; the whole statement when no item is left.
std::optional<Fix> removeValueItems(const Setting& setting, const std::function<bool(const std::string&)>& drop,
                                    const std::string& title);

// Replaces each occurrence of `from` in the value, in any case, with `to`.
std::optional<Fix> replaceInValue(const Setting& setting, std::string_view from, std::string_view to,
                                  const std::string& title);

}  // namespace nccl_migrate::lint
