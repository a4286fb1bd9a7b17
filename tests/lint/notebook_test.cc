// Notebooks through the engine: findings name their cell and the line within it (ruff's
// `path:cell N:line:col`), the prefilter reads the code cells rather than the escaped JSON, and
// notebook findings carry no fix (its edits would address the joined code, not the JSON).
#include <gtest/gtest.h>

#include <sstream>

#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

// Cells: 1 markdown, 2 code (two lines), 3 markdown, 4 code with a magic and a hazard on its third line.
constexpr const char* kNotebook = R"NB({
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n", "isinstance(pg, dist.ProcessGroupNCCL)\n"]},
  {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["import torch.distributed as dist\n", "b = pg._get_backend(dev)"]},
  {"cell_type": "markdown", "metadata": {}, "source": "Check the backend"},
  {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["%matplotlib inline\n", "x = 1\n", "if b.name() == \"nccl\":\n", "    ok = isinstance(pg, dist.ProcessGroupNCCL)\n"]}
 ],
 "metadata": {}, "nbformat": 4, "nbformat_minor": 5
})NB";

TEST(Notebook, FindingsNameTheCellAndTheLineWithinIt) {
  LintReport report = lintSource("train.ipynb", kNotebook);
  ASSERT_EQ(report.findings.size(), 2u);
  const Finding& nameCheck = report.findings[0];
  EXPECT_EQ(nameCheck.code, "NM202");
  EXPECT_EQ(nameCheck.where.cell, 4);
  EXPECT_EQ(nameCheck.where.line, 3);
  EXPECT_EQ(nameCheck.where.column, 4);
  EXPECT_FALSE(nameCheck.fix.has_value());
  const Finding& classCheck = report.findings[1];
  EXPECT_EQ(classCheck.code, "NM201");
  EXPECT_EQ(classCheck.where.cell, 4);
  EXPECT_EQ(classCheck.where.line, 4);
  EXPECT_EQ(classCheck.where.column, 25);
}

TEST(Notebook, TextAndJsonShowTheCell) {
  LintReport report = lintSource("train.ipynb", kNotebook);
  std::ostringstream text, summary, json;
  writeText(report, false, text, summary);
  EXPECT_EQ(text.str().substr(0, 33), "train.ipynb:cell 4:3:4: NM202 b.n");
  writeJson(report, json);
  EXPECT_NE(json.str().find("\"cell\": 4,\n      \"line\": 3,"), std::string::npos) << json.str();
  // Plain files keep `path:line:col` and no cell.
  std::ostringstream plain, plainSummary, plainJson;
  LintReport py = lintSource("job.py", "import torch.distributed as dist\nisinstance(pg, dist.ProcessGroupNCCL)\n");
  writeText(py, false, plain, plainSummary);
  EXPECT_EQ(plain.str().substr(0, 19), "job.py:2:16: NM201 ");
  writeJson(py, plainJson);
  EXPECT_EQ(plainJson.str().find("\"cell\""), std::string::npos);
}

TEST(Notebook, NotNotebookJsonIsAWarning) {
  LintReport report = lintSource("broken.ipynb", "{\"cells\": 3}");
  EXPECT_TRUE(report.findings.empty());
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("broken.ipynb: skipped: not a notebook"), std::string::npos) << report.warnings[0];
}

}  // namespace
}  // namespace nccl_migrate::lint
