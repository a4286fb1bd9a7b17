// The catalogue of libraries' group-creating wrappers (lint/data/group_wrappers.toml, compiled in):
// what lint knows of Megatron-LM, DeepSpeed, ColossalAI, NeMo and torchtitan where they are not
// installed in the environment it runs in.
#pragma once

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

// What brings a file that calls one of those library functions to the rules that read group
// creation: the function's name with a mention of its module. Such a file need name none of
// torch's creators (`initialize_model_parallel(size)` after a `from fairscale... import`).
std::vector<Trigger> manyGroupsCreatorTriggers();

}  // namespace nccl_migrate::lint
