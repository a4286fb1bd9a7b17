// Accessors for each rule; registry.cc lists them once, in code order.
#pragma once

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

const Rule& legacyClassCheckRule();  // NM201

}  // namespace nccl_migrate::lint
