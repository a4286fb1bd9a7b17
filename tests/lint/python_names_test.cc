// Import and alias resolution of the Python frontend.
#include <gtest/gtest.h>

#include "python/python_names.h"

namespace nccl_migrate::lint {
namespace {

TEST(PythonNames, ImportBindsTheHeadOnly) {
  PythonNames names;
  names.bindImport("torch.distributed", "");
  EXPECT_EQ(names.qualify("torch.distributed.new_group"), "torch.distributed.new_group");
  EXPECT_EQ(names.qualify("distributed.new_group"), "");
}

TEST(PythonNames, AliasesAndCanonicalModules) {
  PythonNames names;
  names.bindImport("torch.distributed.distributed_c10d", "c10d");
  names.bindFromImport("torch._C._distributed_c10d", "ProcessGroupNCCL", "PG");
  EXPECT_EQ(names.qualify("c10d.new_group"), "torch.distributed.new_group");
  EXPECT_EQ(names.qualify("PG"), "torch.distributed.ProcessGroupNCCL");
}

TEST(PythonNames, LocalDefinitionsShadowImports) {
  PythonNames names;
  names.bindFromImport("torch.distributed", "ProcessGroupNCCL", "");
  names.bindLocalDefinition("ProcessGroupNCCL");
  EXPECT_EQ(names.qualify("ProcessGroupNCCL"), "");
  EXPECT_TRUE(names.isBuiltin("isinstance"));
  names.bindLocalDefinition("isinstance");
  EXPECT_FALSE(names.isBuiltin("isinstance"));
}

TEST(PythonNames, CanonicalNameLeavesOtherModulesAlone) {
  EXPECT_EQ(canonicalPythonName("torch.distributed.distributed_c10dx.Y"), "torch.distributed.distributed_c10dx.Y");
  EXPECT_EQ(canonicalPythonName("mylib.ProcessGroupNCCL"), "mylib.ProcessGroupNCCL");
}

}  // namespace
}  // namespace nccl_migrate::lint
