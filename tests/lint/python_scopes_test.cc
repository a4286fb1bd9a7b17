// PythonScopes narrows a call's surroundings to the statement holding it and the headers above it
// (python_scopes.h), for a decorated `def` or `class` too when a comment or a blank line stands
// between the decorator and the statement, as Python allows.
#include "python/python_scopes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nccl_migrate::lint {
namespace {

// The text of the regions parsed around the call of `marker`.
std::string parsedAround(const std::string& text, const std::string& marker) {
  PythonScopes scopes(text);
  std::string parsed;
  for (const ParseRegion& region : scopes.unreadAround({text.find(marker)}))
    parsed += text.substr(region.begin, region.end - region.begin) + "|";
  return parsed;
}

class DecoratedDefinition : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoratedDefinition, OnlyTheStatementAroundTheCallAndItsHeadersAreParsed) {
  const std::string& between = GetParam();
  for (const std::string& head : {std::string("def build(ranks):"), std::string("class Builder:")}) {
    std::string text = "import torch.distributed as dist\n\n@register\n" + between + head +
                       "\n    first = 1\n    group = dist.new_group(ranks)\n    last = 2\n";
    std::string parsed = parsedAround(text, "dist.new_group");
    EXPECT_NE(parsed.find("@register\n" + between + head), std::string::npos) << parsed;
    EXPECT_NE(parsed.find("group = dist.new_group(ranks)"), std::string::npos) << parsed;
    EXPECT_EQ(parsed.find("first = 1"), std::string::npos) << head << " after " << between << ": " << parsed;
    EXPECT_EQ(parsed.find("last = 2"), std::string::npos) << head << " after " << between << ": " << parsed;
  }
}

// A decorated method: the class's body is split, then the method's.
TEST_P(DecoratedDefinition, AMethodsBodyIsSplitToo) {
  const std::string& between = GetParam();
  std::string indented;
  for (size_t b = 0; b < between.size();) {
    size_t e = between.find('\n', b);
    std::string line = between.substr(b, e - b);
    indented += (line.empty() ? "" : "    " + line) + "\n";
    b = e + 1;
  }
  std::string text = "import torch.distributed as dist\n\nclass Builder:\n    size = 2\n\n    @register\n" + indented +
                     "    def build(self, ranks):\n        first = 1\n        group = dist.new_group(ranks)\n"
                     "        last = 2\n\n    def other(self):\n        pass\n";
  std::string parsed = parsedAround(text, "dist.new_group");
  EXPECT_NE(parsed.find("class Builder:"), std::string::npos) << parsed;
  EXPECT_NE(parsed.find("def build(self, ranks):"), std::string::npos) << parsed;
  EXPECT_NE(parsed.find("group = dist.new_group(ranks)"), std::string::npos) << parsed;
  EXPECT_EQ(parsed.find("first = 1"), std::string::npos) << "after " << between << ": " << parsed;
  EXPECT_EQ(parsed.find("last = 2"), std::string::npos) << "after " << between << ": " << parsed;
}

INSTANTIATE_TEST_SUITE_P(Between, DecoratedDefinition,
                         ::testing::Values("", "# pylint: disable=too-many-locals\n", "\n", "  # indented\n\n"),
                         [](const auto& info) { return "case" + std::to_string(info.index); });

}  // namespace
}  // namespace nccl_migrate::lint
