// Output formats for a LintReport, handled once here so rules never format anything.
#pragma once

#include <iosfwd>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {

// `path:line:col: CODE message`, one finding a line, then a one-line summary on `summary`.
void writeText(const LintReport& report, std::ostream& findings, std::ostream& summary);

// {"findings": [{"path", "line", "column", "code", "slug", "message"}], "notes": [...],
//  "files_scanned", "files_parsed"}
void writeJson(const LintReport& report, std::ostream& out);

}  // namespace nccl_migrate::lint
