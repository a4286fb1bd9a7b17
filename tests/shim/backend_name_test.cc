// Resolution of NCCL backend names and TORCH_DIST_USE_NCCL2, as torch 2.15 resolves them.
#include "nccl_migrate/shim/backend_name.h"

#include <gtest/gtest.h>

namespace nccl_migrate::shim {
namespace {

Behaviour behaviourOf(std::string_view name, std::optional<std::string_view> env) {
  auto r = resolveNcclName(name, env);
  EXPECT_TRUE(r.has_value()) << name;
  return r ? r->behaviour : Behaviour::Legacy;
}

TEST(BackendName, PlainNcclIsRewrittenWhenVariableUnset) {
  EXPECT_EQ(behaviourOf("nccl", std::nullopt), Behaviour::Rewritten);
}

TEST(BackendName, PlainNcclIsLegacyOnlyForExactZero) {
  EXPECT_EQ(behaviourOf("nccl", "0"), Behaviour::Legacy);
  EXPECT_EQ(behaviourOf("nccl", "1"), Behaviour::Rewritten);
  EXPECT_EQ(behaviourOf("nccl", ""), Behaviour::Rewritten);
  EXPECT_EQ(behaviourOf("nccl", "false"), Behaviour::Rewritten);
  EXPECT_EQ(behaviourOf("nccl", " 0"), Behaviour::Rewritten);
}

TEST(BackendName, ExplicitNamesIgnoreTheVariable) {
  for (auto env : {std::optional<std::string_view>{}, std::optional<std::string_view>{"0"},
                   std::optional<std::string_view>{"1"}}) {
    EXPECT_EQ(behaviourOf("nccl-legacy", env), Behaviour::Legacy);
    EXPECT_EQ(behaviourOf("nccl2", env), Behaviour::Rewritten);
    EXPECT_EQ(behaviourOf("nccl-lazy", env), Behaviour::RewrittenLazyP2P);
  }
}

TEST(BackendName, NamesAreCaseInsensitiveLikeTorch) {
  EXPECT_EQ(behaviourOf("NCCL", "0"), Behaviour::Legacy);
  EXPECT_EQ(behaviourOf("NCCL-Legacy", std::nullopt), Behaviour::Legacy);
}

TEST(BackendName, OtherBackendsAreNotResolved) {
  EXPECT_FALSE(resolveNcclName("gloo", std::nullopt).has_value());
  EXPECT_FALSE(resolveNcclName("mpi", "0").has_value());
  EXPECT_FALSE(resolveNcclName("ncclx", std::nullopt).has_value());
}

TEST(BackendName, WarnsWhenAValueLooksLikeOffButIsNot) {
  for (std::string_view typo : {"false", "off", "no", "FALSE", " 0", "00"}) {
    auto r = resolveNcclName("nccl", typo);
    ASSERT_TRUE(r.has_value());
    ASSERT_TRUE(r->warning.has_value()) << "no warning for '" << typo << "'";
    EXPECT_NE(r->warning->find("TORCH_DIST_USE_NCCL2=0"), std::string::npos) << *r->warning;
  }
}

TEST(BackendName, NoWarningForIntendedValues) {
  for (auto env : {std::optional<std::string_view>{}, std::optional<std::string_view>{"0"},
                   std::optional<std::string_view>{"1"}}) {
    auto r = resolveNcclName("nccl", env);
    ASSERT_TRUE(r.has_value());
    EXPECT_FALSE(r->warning.has_value());
  }
}

TEST(BackendName, ReasonNamesTheVariableWhenItDecides) {
  auto r = resolveNcclName("nccl", "0");
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->why.find("TORCH_DIST_USE_NCCL2=0"), std::string::npos);
}

TEST(BackendName, DefaultNameInAnyCase) {
  EXPECT_TRUE(isDefaultNcclName("nccl"));
  EXPECT_TRUE(isDefaultNcclName("NCCL"));
  EXPECT_TRUE(isDefaultNcclName("Nccl"));
  EXPECT_FALSE(isDefaultNcclName("nccl2"));
  EXPECT_FALSE(isDefaultNcclName("nccl-legacy"));
  EXPECT_FALSE(isDefaultNcclName(" nccl"));
  EXPECT_EQ(behaviourOf("NCCL", std::nullopt), Behaviour::Rewritten);
  EXPECT_EQ(behaviourOf("NCCL-LEGACY", std::nullopt), Behaviour::Legacy);
}

}  // namespace
}  // namespace nccl_migrate::shim
