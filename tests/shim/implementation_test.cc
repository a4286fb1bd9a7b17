// NCCL_MIGRATE_IMPL values and the toolkit's backend names.
#include "nccl_migrate/shim/implementation.h"

#include <gtest/gtest.h>

namespace nccl_migrate::shim {
namespace {

ImplementationChoice choiceOf(std::optional<std::string_view> value) {
  auto parsed = parseImplementationChoice(value);
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  return parsed.ok() ? parsed.value() : ImplementationChoice::Auto;
}

TEST(ImplementationChoice, UnsetAndEmptyMeanAuto) {
  EXPECT_EQ(choiceOf(std::nullopt), ImplementationChoice::Auto);
  EXPECT_EQ(choiceOf(""), ImplementationChoice::Auto);
  EXPECT_EQ(choiceOf("auto"), ImplementationChoice::Auto);
}

TEST(ImplementationChoice, ReadsTorchAndToolkit) {
  EXPECT_EQ(choiceOf("torch"), ImplementationChoice::Torch);
  EXPECT_EQ(choiceOf("toolkit"), ImplementationChoice::Toolkit);
}

TEST(ImplementationChoice, InvalidValueListsTheValidOnes) {
  for (const char* value : {"tourch", "Torch", "TOOLKIT", " auto", "native", "1"}) {
    auto parsed = parseImplementationChoice(value);
    ASSERT_FALSE(parsed.ok()) << value;
    EXPECT_NE(parsed.error().find("NCCL_MIGRATE_IMPL=\"" + std::string(value) + "\" is not a valid value"),
              std::string::npos)
        << parsed.error();
    EXPECT_NE(parsed.error().find("auto"), std::string::npos);
    EXPECT_NE(parsed.error().find("torch, toolkit"), std::string::npos);
  }
}

TEST(ImplementationChoice, NamesMatchTheVariableValues) {
  for (auto choice : {ImplementationChoice::Auto, ImplementationChoice::Torch, ImplementationChoice::Toolkit}) {
    EXPECT_EQ(choiceOf(choiceName(choice)), choice);
  }
  EXPECT_EQ(implementationName(Implementation::Torch), "torch");
  EXPECT_EQ(implementationName(Implementation::Toolkit), "toolkit");
}

TEST(ToolkitBackends, OneNamePerBehaviour) {
  EXPECT_EQ(toolkitBackendName(Behaviour::Legacy), "migrate-legacy");
  EXPECT_EQ(toolkitBackendName(Behaviour::Rewritten), "migrate-nccl2");
  EXPECT_EQ(toolkitBackendName(Behaviour::RewrittenLazyP2P), "migrate-lazy");
}

}  // namespace
}  // namespace nccl_migrate::shim
