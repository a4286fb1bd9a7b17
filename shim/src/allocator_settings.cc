// Parser for PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF (see allocator_settings.h).
#include "nccl_migrate/shim/allocator_settings.h"

#include <cctype>

#include "text.h"

namespace nccl_migrate::shim {
namespace {

using Options = std::vector<AllocatorOption>;

std::string withoutSpaces(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) out += c;
  }
  return out;
}

// Splits at commas outside brackets, so "roundup_power2_divisions:[256:1,512:2]" stays whole.
Outcome<std::vector<std::string>> topLevelEntries(const std::string& text) {
  std::vector<std::string> entries(1);
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) {
      return Outcome<std::vector<std::string>>::failure("a ']' closes no '[' in \"" + text + "\"; remove it");
    }
    if (c == ',' && depth == 0) {
      entries.emplace_back();
      continue;
    }
    entries.back() += c;
  }
  if (depth != 0) {
    return Outcome<std::vector<std::string>>::failure("a '[' is never closed in \"" + text + "\"; add the missing ']'");
  }
  return Outcome<std::vector<std::string>>::success(std::move(entries));
}

}  // namespace

Outcome<Options> parseAllocatorConfig(std::string_view text) {
  std::string compact = withoutSpaces(text);
  if (compact.empty()) return Outcome<Options>::success({});
  auto entries = topLevelEntries(compact);
  if (!entries.ok()) return Outcome<Options>::failure(entries.error());
  Options options;
  for (const std::string& entry : entries.value()) {
    if (entry.empty()) {
      return Outcome<Options>::failure("empty entry in \"" + compact + "\" (two commas in a row, or a comma at an "
                                       "end); remove the extra comma");
    }
    std::size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      return Outcome<Options>::failure("entry \"" + entry + "\" has no ':'; write it as key:value, e.g. "
                                       "backend:native");
    }
    std::string key = entry.substr(0, colon);
    std::string value = entry.substr(colon + 1);
    if (key.empty() || value.empty()) {
      return Outcome<Options>::failure("entry \"" + entry + "\" needs both a key and a value, e.g. backend:native");
    }
    if (value.front() != '[' && value.find(':') != std::string::npos) {
      return Outcome<Options>::failure("entry \"" + entry + "\" has more than one ':'; separate entries with ','");
    }
    options.push_back({std::move(key), std::move(value)});
  }
  return Outcome<Options>::success(std::move(options));
}

namespace {

// The last "backend" entry wins, as torch overwrites the setting entry by entry.
std::optional<std::string> backendOption(const Options& options) {
  std::optional<std::string> backend;
  for (const auto& option : options) {
    if (option.key == "backend") backend = option.value;
  }
  return backend;
}

void readOne(std::string_view variable, std::string_view text, AllocatorReading& reading) {
  auto options = parseAllocatorConfig(text);
  if (!options.ok()) {
    reading.warnings.push_back(std::string(variable) + " cannot be read: " + options.error() +
                               ". torch rejects it too when CUDA starts.");
    return;
  }
  auto backend = backendOption(options.value());
  if (!backend) return;
  if (*backend != "native" && *backend != kCudaMallocAsync) {
    reading.warnings.push_back(std::string(variable) + " sets backend:" + *backend +
                               ", which torch does not know; torch accepts backend:native or "
                               "backend:cudaMallocAsync (exact spelling) and fails when CUDA starts.");
  }
  reading.backend = AllocatorBackendSetting{std::string(variable), *backend};
}

}  // namespace

std::optional<std::string> allocatorBackendIn(std::string_view text) {
  auto options = parseAllocatorConfig(text);
  if (options.ok()) return backendOption(options.value());
  std::optional<std::string> backend;
  for (std::string_view entry : splitOn(text, ',')) {
    auto one = parseAllocatorConfig(entry);
    if (!one.ok()) continue;
    if (auto found = backendOption(one.value())) backend = found;
  }
  return backend;
}

AllocatorReading readAllocatorBackend(std::optional<std::string_view> allocConf,
                                      std::optional<std::string_view> cudaAllocConf) {
  AllocatorReading reading;
  if (allocConf) {
    readOne(kAllocatorVariable, *allocConf, reading);
    if (cudaAllocConf) {
      reading.warnings.push_back(std::string(kAllocatorVariable) + " and " + std::string(kCudaAllocatorVariable) +
                                 " are both set; torch reads only " + std::string(kAllocatorVariable) +
                                 ". Move the settings you need into it and unset " +
                                 std::string(kCudaAllocatorVariable) + ".");
    }
    return reading;
  }
  if (cudaAllocConf) readOne(kCudaAllocatorVariable, *cudaAllocConf, reading);
  return reading;
}

}  // namespace nccl_migrate::shim
