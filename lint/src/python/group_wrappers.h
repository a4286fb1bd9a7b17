// The project-wide table of group-creating wrappers: functions of the scanned tree whose body calls
// torch.distributed's group creators, directly or through another such function. The same
// inference from other roots (TableRoots) gives NM502's table of functions issuing point-to-point
// transfers that the tree calls in loops. A cheap scan of
// each source for calls of the names sought picks the statements worth reading (python_scopes.h);
// only those are parsed (frontends/python_project.h), each at most once, so signatures over
// several lines, decorators, nested functions and methods are read as Python reads them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nccl_migrate::lint {

// One source's functions that call one of `creators` (bare names), where the call names no backend
// other than an eager NCCL one and is not one of torch's other functions. For tests and the fuzzer.
std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators);

// The calls a table is built from: torch's functions by their last names, and whether a call of
// one (its last name and the name the file's imports qualify it to) is torch's rather than a
// function of the same name elsewhere.
struct TableRoots {
  std::set<std::string> names;
  std::function<bool(const std::string& name, const std::string& qualified)> isRoot;
  // A word a source holds wherever its calls of the roots can be torch's (empty: any source).
  std::string mention;
};
// torch.distributed's group creators; a call of one not resolved to another of torch's functions
// counts (a project's own mirror of torch.distributed).
const TableRoots& groupCreatorRoots();
// torch.distributed's calls that issue point-to-point transfers (send, recv, isend, irecv,
// batch_isend_irecv), resolved through the file's imports: the names alone are too common.
const TableRoots& pointToPointRoots();

// One pass over a tree's sources (the names each calls, the imports each makes), which the tables
// built from the same texts share rather than each making its own.
struct TreeSurvey;
std::shared_ptr<const TreeSurvey> surveyTree(const std::vector<std::string_view>& texts, unsigned threads);

// The wrappers defined in `texts` (Python sources of the modules `modules`, from
// pythonModuleOf; empty: unknown), to the fixed point, as keys of frontends/python_project.h
// ("mypkg.parallel_state:create_group", "self:_make"); each round scans the sources on up to
// `threads` threads.
std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads = 1);
// The same for sources whose modules are unknown.
std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, unsigned threads = 1);

// A call of the tree that the frontend's imports alone do not resolve: a method called on an
// object (`DeviceGroup().get_group(r)`, `self.maker.make(r)`), or a wrapper found in an installed
// package or the catalogue. `via` is the chain, outermost first:
// "create_group -> megatron.core.parallel_state.create_group -> torch.distributed.new_group".
struct ProjectSite {
  size_t source = 0;  // index in the texts
  uint32_t row = 0, column = 0;  // 0-based, the call's start
  std::string callee;  // its last name: `get_group` of `DeviceGroup().get_group(r)`
  std::string via;
};

// A wrapper known without its code: a row of the catalogue (group_wrapper_catalogue.h).
struct KnownWrapper {
  std::string module;    // "megatron.core.parallel_state"
  std::string function;  // "create_group"
  std::string creates;   // "torch.distributed.new_group"
  std::string source;    // "NVIDIA/Megatron-LM@<commit>:megatron/core/parallel_state.py:259"
};

// Where installed modules are read (python_environment.h): the text of a dotted module, or
// nothing when it is not installed. Asked from one thread, and only for what can change a finding
// (buildGroupWrapperTable), so that a reader that starts an interpreter on its first call
// (PythonEnvironmentOnDemand) starts none for most trees.
using ModuleReader = std::function<std::optional<std::string>(const std::string& dotted)>;

struct GroupWrapperTable {
  std::set<std::string> keys;      // as inferGroupWrappers gives them, installed packages' included
  std::vector<ProjectSite> sites;  // in the tree's sources
  std::vector<std::string> environmentModules;  // the installed modules read
  // A wrapper's keywords that turn its creation off: a call passing one as False or None
  // (`DeviceMesh(..., _init_backend=False)`) creates no group through it.
  std::map<std::string, std::set<std::string>> switches;
};

// The wrappers of the tree (texts and modules as for inferGroupWrappers), with the modules its
// imports name outside it read through `environment` (when set) and `known` standing in for those
// not installed; and the sites of the tree that reach a wrapper through an object or an installed
// package. The imports that leave the tree (torch's and the standard library's never) are read
// only when the tree calls one of their names in a loop, or at enough sites of a file to reach
// `groupSitesThreshold` with the file's calls of torch's creators (NM401's count; 0: none),
// directly or through its own functions, methods and classes, or keeps one's result
// (`g = Maker()`): found by the text where a loop shows, else by a first
// inference over the tree alone in which each such name stands in for a wrapper. A tree that
// needs none never calls `environment`; one that needs one has every module it calls through
// read, as that costs a few file reads once the interpreter runs. What the first inference leaves
// out is an installed wrapper called once, outside loops, in a file whose other group creations
// all go through the tree's own wrappers: it alone could complete that file's
// group-sites-threshold.
GroupWrapperTable buildGroupWrapperTable(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads, const ModuleReader& environment,
                                         const std::vector<KnownWrapper>& known, int groupSitesThreshold);
// The same, with the tree's sources surveyed already (surveyTree of the same texts).
GroupWrapperTable buildGroupWrapperTable(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads, const ModuleReader& environment,
                                         const std::vector<KnownWrapper>& known, int groupSitesThreshold,
                                         const TreeSurvey* survey);
// A function of the tree that issues point-to-point transfers, directly or through the tree's
// functions and methods, and the first call (in the sources' order) that runs it repeatedly: in a
// loop, its own or one of a function that calls it, or in a model's forward or backward (a method
// of that name of a class with a base: an nn.Module's or an autograd.Function's, which torch runs
// once per step). Module functions, methods (called through self, through an object whose class
// the tree shows, or through a table of an object's methods), nested functions and the forwards
// that issue a transfer themselves, keyed as the table keys them.
struct LoopedCall {
  size_t source = 0;  // index in the texts, the loop's source
  uint32_t row = 0;   // 0-based, the call's row
  // How it repeats: the call stands in a loop, or in a forward or backward outside loops, or the
  // function is that forward itself (the row its transfer's).
  enum class Repeat { InLoop, FromForward, IsForward };
  Repeat repeat = Repeat::InLoop;
  std::string caller;   // the function making the call, "Bench.ping"; empty at module level
  std::string through;  // the object or table the call goes through, "self.backend"; empty if none
};
// What runs the function repeatedly, for a finding's message, `where` the call's "path:line":
// "which Bench.ping calls in a loop at bench.py:12, through self.backend", "which Conv.forward
// calls at conv.py:8, once per step of the model", or, for a forward that issues the transfer
// itself, "a model's Conv.forward(), which runs once per step".
std::string describeLoopedCall(const LoopedCall& at, const std::string& where);
// A loop counts only in a source that `loopCounts` accepts (asked once per source that has one;
// unset: every source); the others are read for the functions they define.
std::map<std::string, LoopedCall> pointToPointInLoops(const std::vector<std::string_view>& texts,
                                                      const std::vector<std::string>& modules, unsigned threads,
                                                      const std::function<bool(size_t source)>& loopCounts = {},
                                                      const TreeSurvey* survey = nullptr);

// The same for any threshold: one site outside loops is enough to read a module.
GroupWrapperTable buildGroupWrapperTable(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads, const ModuleReader& environment,
                                         const std::vector<KnownWrapper>& known);


}  // namespace nccl_migrate::lint
