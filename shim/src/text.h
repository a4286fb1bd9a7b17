// Small string operations the shim's parsers share. Private to shim/src.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nccl_migrate::shim {

std::string lowered(std::string_view text);
std::string trimmed(std::string_view text);
std::vector<std::string_view> splitOn(std::string_view text, char separator);
std::string joined(const std::vector<std::string>& parts, std::string_view separator);
std::string quoted(std::string_view text);  // "text", for names inside error sentences

}  // namespace nccl_migrate::shim
