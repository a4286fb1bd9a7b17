// Accessors for each rule; registry.cc lists them once, in code order.
#pragma once

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

const Rule& unusedSuppressionRule();       // NM001
const Rule& multiGpuProcessGroupRule();    // NM101
const Rule& initWithoutDeviceIdRule();     // NM102
const Rule& legacyClassCheckRule();        // NM201
const Rule& backendNameComparisonRule();   // NM202
const Rule& legacyOnlyAttributeRule();     // NM203
const Rule& legacyClassConstructionRule(); // NM204
const Rule& cudaMallocAsyncRule();         // NM301
const Rule& eagerGroupCreationRule();      // NM401
const Rule& pinnedLegacyBackendRule();     // NM501
const Rule& p2pOnEagerBackendRule();       // NM502

}  // namespace nccl_migrate::lint
