// The catalogue of libraries' group-creating wrappers (lint/data/group_wrappers.toml, compiled in):
// what lint knows of Megatron-LM, DeepSpeed, ColossalAI, NeMo and torchtitan where they are not
// installed in the environment it runs in.
#pragma once

#include <vector>

#include "python/group_wrappers.h"

namespace nccl_migrate::lint {

// Its rows, read once.
const std::vector<KnownWrapper>& groupWrapperCatalogue();

}  // namespace nccl_migrate::lint
