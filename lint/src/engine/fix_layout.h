// What a fix's edits become once the file's text and language are known: the definitions they
// call placed and named (fixes.h, kDefinitionSite), the lines they write laid out as the
// language's formatter would. Defined in lint/src/fix_layout.cc, which knows the languages; the
// engine only asks.
#pragma once

#include <string>
#include <vector>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// `edits`: non-overlapping, definitions at kDefinitionSite included. Returns edits of `text`
// alone, in file order; a definition that cannot be placed takes the edits that call it along.
std::vector<Edit> layOutEdits(const std::string& path, const std::string& text, std::vector<Edit> edits);

}  // namespace nccl_migrate::lint
