// What the Python frontend reads for the project model: each function's calls from the parse tree
// (for the table of group wrappers), and for each call its function and the arms of `if`
// statements around it (for rules that ask which path a call is on).
#include "python/python_frontend.h"
#include "python/python_project.h"
#include "python/python_scopes.h"

#include <gtest/gtest.h>

#include <map>

namespace nccl_migrate::lint {
namespace {

// function -> its calls' last names, in order.
std::map<std::string, std::vector<std::string>> callsByFunction(const std::string& source) {
  std::map<std::string, std::vector<std::string>> out;
  for (const FunctionCalls& f : pythonFunctionCalls(source, {})) {
    std::vector<std::string>& names = out[f.function];
    for (const CallInFunction& c : f.calls) names.push_back(c.name);
  }
  return out;
}

// A black-style signature, a decorator over several lines, a nested function and a method: each
// call belongs to the innermost function around it.
TEST(PythonFunctionCalls, EachCallBelongsToItsInnermostFunction) {
  const std::string source =
      "import torch\n"
      "def create_group(\n"
      "    ranks=None,\n"
      "    backend=None,\n"
      "):\n"
      "    group = torch.distributed.new_group(**kwargs)\n"
      "    return group\n"
      "@functools.lru_cache(\n"
      "    maxsize=None,\n"
      ")\n"
      "def cached(ranks):\n"
      "    return create_group(ranks)\n"
      "def outer(layout):\n"
      "    def inner(\n"
      "        r,\n"
      "    ):\n"
      "        return make(r)\n"
      "    return [inner(r) for r in layout]\n"
      "class Topology:\n"
      "    def _make(\n"
      "        self,\n"
      "        ranks,\n"
      "    ):\n"
      "        return self.dist.split_group(ranks)\n";
  std::map<std::string, std::vector<std::string>> expected = {
      {"create_group", {"new_group"}},
      {"cached", {"create_group"}},
      {"outer", {"inner"}},
      {"inner", {"make"}},
      {"_make", {"split_group"}},
  };
  EXPECT_EQ(callsByFunction(source), expected);
}

// Imports qualify the calls after them, so a wrapper's table can tell torch's own functions from the
// project's; a backend= string literal is kept for the engine to judge.
TEST(PythonFunctionCalls, QualifiedNamesAndBackends) {
  const std::string source =
      "import torch.distributed as dist\n"
      "from mypkg.parallel import create_group\n"
      "def setup_groups():\n"
      "    dist.init_process_group(backend=\"nccl\")\n"
      "    return create_group([0, 1], backend=\"gloo\")\n";
  std::vector<FunctionCalls> functions = pythonFunctionCalls(source, {});
  ASSERT_EQ(functions.size(), 1u);
  ASSERT_EQ(functions[0].calls.size(), 2u);
  EXPECT_EQ(functions[0].calls[0].qualifiedName, "torch.distributed.init_process_group");
  EXPECT_EQ(functions[0].calls[0].backend, "nccl");
  EXPECT_EQ(functions[0].calls[1].qualifiedName, "mypkg.parallel.create_group");
  EXPECT_EQ(functions[0].calls[1].backend, "gloo");
}

const Call& callNamed(const SourceModel& model, const std::string& spelling, int nth = 0) {
  for (const Call& call : model.calls)
    if (call.spelling == spelling && nth-- == 0) return call;
  static const Call none;
  ADD_FAILURE() << "no call " << spelling;
  return none;
}

// The launcher's two arms: the call in the `else` and the one in the `if` never both run; a call
// before the `if`, or in another function, runs with either.
TEST(PythonBranches, CallsKnowTheArmsAroundThem) {
  const std::string source =
      "import torch\n"
      "def main_worker(args, model):\n"
      "    torch.cuda.set_device(0)\n"
      "    if args.gpu is not None:\n"
      "        torch.cuda.set_device(args.gpu)\n"
      "        if args.extra:\n"
      "            log()\n"
      "    elif args.cpu:\n"
      "        log()\n"
      "    else:\n"
      "        model.cuda()\n"
      "def other():\n"
      "    torch.cuda.set_device(1)\n";
  SourceModel model = parsePython("t.py", source, NameEquivalences{});
  const Call& before = callNamed(model, "torch.cuda.set_device", 0);
  const Call& inIf = callNamed(model, "torch.cuda.set_device", 1);
  const Call& nested = callNamed(model, "log", 0);
  const Call& inElif = callNamed(model, "log", 1);
  const Call& inElse = callNamed(model, "model.cuda");
  const Call& elsewhere = callNamed(model, "torch.cuda.set_device", 2);
  EXPECT_TRUE(before.branches.empty());
  ASSERT_EQ(inIf.branches.size(), 1u);
  EXPECT_EQ(inIf.branches[0].index, 0);
  EXPECT_EQ(nested.branches.size(), 2u);
  ASSERT_EQ(inElif.branches.size(), 1u);
  EXPECT_EQ(inElif.branches[0].index, 1);
  ASSERT_EQ(inElse.branches.size(), 1u);
  EXPECT_EQ(inElse.branches[0].index, 2);
  EXPECT_TRUE(inElse.exclusiveWith(inIf));
  EXPECT_TRUE(inElse.exclusiveWith(nested));
  EXPECT_TRUE(inElif.exclusiveWith(inElse));
  EXPECT_FALSE(inIf.exclusiveWith(nested));
  EXPECT_FALSE(inElse.exclusiveWith(before));
  EXPECT_FALSE(inElse.exclusiveWith(elsewhere));
  EXPECT_EQ(inElse.function, "main_worker");
  EXPECT_EQ(elsewhere.function, "other");
}

// Group creators called on receivers the frontend cannot resolve are known by their last name; a
// receiver resolved to torch keeps torch's name, and a call in a wrapper says so.
TEST(PythonGroupCreators, UnresolvedReceiversAndWrappers) {
  const std::string source =
      "import mypkg.distributed as dist\n"
      "import torch\n"
      "def create_group(r):\n"
      "    return dist.new_group(r)\n"
      "ENV.new_subgroups_by_enumeration(layout)\n"
      "self.dist.split_group(split_ranks=r)\n"
      "torch.cuda.new_group(r)\n"
      "dist.init_process_group()\n"
      "torch.distributed.init_process_group()\n";
  NameEquivalences names;
  names.inferredGroupWrappers = {"t:create_group", "mypkg.distributed:init_process_group"};
  SourceModel model = parsePython("t.py", source, names);
  EXPECT_EQ(callNamed(model, "dist.new_group").qualifiedName, "torch.distributed.new_group");
  EXPECT_TRUE(callNamed(model, "dist.new_group").inGroupWrapper);
  EXPECT_EQ(callNamed(model, "ENV.new_subgroups_by_enumeration").qualifiedName, "torch.distributed.new_subgroups_by_enumeration");
  EXPECT_FALSE(callNamed(model, "ENV.new_subgroups_by_enumeration").inGroupWrapper);
  EXPECT_EQ(callNamed(model, "self.dist.split_group").qualifiedName, "torch.distributed.split_group");
  EXPECT_EQ(callNamed(model, "torch.cuda.new_group").qualifiedName, "torch.cuda.new_group");
  // The project has a helper named init_process_group that creates groups: the mirror's call is
  // taken for it, torch's own stays torch's.
  EXPECT_EQ(callNamed(model, "dist.init_process_group").qualifiedName, "torch.distributed.new_group");
  EXPECT_EQ(callNamed(model, "torch.distributed.init_process_group").qualifiedName, "torch.distributed.init_process_group");
}

// Each offset's innermost def, as the frontend names a call's function: through classes, compound
// statements and decorators over several lines; none at module level or in a class body, and none
// where the lines leave a doubt (a def's signature or decorators, a one-line def, a `match` that
// holds a def).
TEST(EnclosingFunctions, TheInnermostDefAroundEachOffset) {
  const std::string source =
      "make(0)\n"
      "class TestA:\n"
      "    field = make(1)\n"
      "    @pytest.mark.parametrize(\n"
      "        \"n\", [1, 2]\n"
      "    )\n"
      "    def test_one(self, n=make(2)):\n"
      "        if n:\n"
      "            make(3)\n"
      "        def inner():\n"
      "            return make(4)\n"
      "        class Local:\n"
      "            x = make(5)\n"
      "def short(): return make(6)\n"
      "def outer():\n"
      "    match x:\n"
      "        case 1:\n"
      "            def hidden():\n"
      "                make(7)\n"
      "    with ctx(\"(\"):\n"
      "        make(8)\n";
  std::vector<size_t> offsets;
  for (size_t at = source.find("make("); at != std::string::npos; at = source.find("make(", at + 1)) offsets.push_back(at);
  ASSERT_EQ(offsets.size(), 9u);
  EXPECT_EQ(enclosingFunctions(source, offsets),
            (std::vector<std::string>{"", "", "", "test_one", "inner", "test_one", "", "", "outer"}));
}

// A docstring's last line with a bracket before a `#` keeps the lines' split of statements open,
// here until the next method's docstring closes a bracket: split so, the second method's call
// seems to be in the first method. The indentation above names the second: where the two
// readings differ, no function is named rather than the wrong one.
TEST(EnclosingFunctions, WhereTheSplitAndTheIndentationDifferNoneIsNamed) {
  const std::string source =
      "class T:\n"
      "    def first(self):\n"
      "        \"\"\"Doc\n"
      "        more (see #1).\"\"\"\n"
      "        make(0)\n"
      "    def second(self):\n"
      "        \"\"\"Doc (which goes\n"
      "        on) here.\"\"\"\n"
      "        make(1)\n";
  std::vector<size_t> offsets = {source.find("make(0)"), source.find("make(1)")};
  EXPECT_EQ(enclosingFunctions(source, offsets), (std::vector<std::string>{"", ""}));
}

// Brackets opened less those closed, outside strings and before a comment.
TEST(PythonBracketBalance, StringsAndCommentsDoNotCount) {
  EXPECT_EQ(pythonBracketBalance("f(a, [b,\n"), 2);
  EXPECT_EQ(pythonBracketBalance("x = \"(\" + ')' + \"\\\"(\"  # )))\n"), 0);
  EXPECT_EQ(pythonBracketBalance("})] and a very long line with no bracket at all before the end ("), -2);
  EXPECT_EQ(pythonBracketBalance("'unterminated ("), 0);
}

TEST(ModuleFunctionLook, ADefAtTheStartOfALineIsLookedAt) {
  EXPECT_TRUE(mayDefineModuleFunction("def get_rank():\n    return 0\n", "get_rank"));  // the first line
  EXPECT_TRUE(mayDefineModuleFunction("import os\n\nasync def get_rank (x):\n    return x\n", "get_rank"));
  EXPECT_FALSE(mayDefineModuleFunction("class A:\n    def get_rank(self):\n        return 0\n", "get_rank"));  // a method
  EXPECT_FALSE(mayDefineModuleFunction("def get_rank_of(x):\n    pass\nget_rank = 1\n", "get_rank"));  // no def of it
}

// Only the module-level functions of the names asked are read, each return traced in the file.
TEST(ModuleFunctionReturns, TheReturnsOfTheModuleLevelFunctionsAsked) {
  const std::string text =
      "import torch.distributed as dist\n"
      "class Ranks:\n"
      "    def get_rank(self):\n"
      "        return 7\n"
      "def get_rank():\n"
      "    if dist.is_initialized():\n"
      "        return dist.get_rank()\n"
      "    return 0\n"
      "def other():\n"
      "    return 1\n";
  auto returns = moduleFunctionReturns("utils.py", text, {"get_rank", "missing"}, {});
  ASSERT_EQ(returns.size(), 1u);
  ASSERT_EQ(returns["get_rank"].size(), 2u);
  ASSERT_NE(returns["get_rank"][0].root(), nullptr);
  EXPECT_EQ(returns["get_rank"][0].root()->text, "torch.distributed.get_rank");
  EXPECT_EQ(returns["get_rank"][1].root()->text, "0");
}

// A large file is parsed in part: the functions asked, the module's own statements, and the
// module's functions they call, to the fixed point; what they return reads the same as a whole
// parse would.
TEST(ModuleFunctionReturns, ALargeFileReadsTheFunctionsTheAskedOnesCall) {
  std::string text =
      "import os\n"
      "import torch.distributed as dist\n"
      "def get_rank():\n"
      "    return _rank_from_launcher()\n";
  for (int i = 0; i < 120; ++i)  // unrelated functions: past the size a file is split at
    text += "def unrelated_" + std::to_string(i) + "(x):\n    return x + " + std::to_string(i) + "\n";
  text += "def _rank_from_launcher():\n    return _read_environment()\n"
          "def _read_environment():\n    return int(os.environ[\"RANK\"])\n";
  ASSERT_GT(text.size(), 4096u);
  auto returns = moduleFunctionReturns("utils.py", text, {"get_rank"}, {});
  ASSERT_EQ(returns["get_rank"].size(), 1u);
  const TracedValue& value = returns["get_rank"][0];
  ASSERT_NE(value.root(), nullptr);
  // get_rank -> _rank_from_launcher -> _read_environment -> int(os.environ["RANK"])
  bool readsRank = false;
  for (const ValueNode& node : value.nodes) readsRank |= node.kind == ValueNode::Kind::Environment && node.text == "RANK";
  EXPECT_TRUE(readsRank) << value.root()->text;
}

}  // namespace
}  // namespace nccl_migrate::lint
