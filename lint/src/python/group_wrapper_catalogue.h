// The catalogue of libraries' group-creating wrappers (lint/data/group_wrappers.toml, compiled in):
// what lint knows of Megatron-LM, DeepSpeed, ColossalAI, NeMo and torchtitan where they are not
// installed in the environment it runs in.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nccl_migrate/lint/rule.h"
#include "python/group_wrappers.h"

namespace nccl_migrate::lint {

// Its rows, read once.
const std::vector<KnownWrapper>& groupWrapperCatalogue();

// For a call qualified to a library function of the catalogue that creates one group per block of
// ranks in one call (apex.parallel.create_syncbn_process_group): torch's function it amounts to
// ("torch.distributed.new_subgroups"); empty for any other name.
std::string manyGroupsCreatorFor(const std::string& qualified);

// The many-group rows' functions ("module.function") that the linted tree defines itself: a
// group wrapper its table inferred (`inferredWrappers`, keys as python_project.h makes them) of that
// name in a module of the tree (`treeModules`, pythonModuleOf) of the package that holds the row's module. The
// tree's own code is what runs there, and the table reads it: the row stands aside (Megatron-LM's
// own tree calls its initialize_model_parallel as a wrapper, under the names its package gives
// parallel_state too, `megatron.core.mpu`). Installed modules' wrappers do not
// count: the catalogue says more of them than the table can (a group per block of ranks).
std::set<std::string> libraryFunctionsTreeDefines(const std::set<std::string>& inferredWrappers,
                                                  const std::set<std::string>& treeModules);

// What brings a file that calls one of those library functions to the rules that read group
// creation: the function's name with a mention of its module, for the rows the tree does not
// define (`treeDefines`, from libraryFunctionsTreeDefines). Such a file need name none of torch's
// creators (`initialize_model_parallel(size)` after a `from fairscale... import`).
std::vector<Trigger> manyGroupsCreatorTriggers(const std::set<std::string>& treeDefines);

}  // namespace nccl_migrate::lint
