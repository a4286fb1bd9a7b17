// NM501 and NM301 fixes in scripts, images and configuration files: the setting goes (the line,
// or the word in front of a command), or only its harmful item; comments and the rest stay, and
// a second run changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::string fixed(const std::string& name, const std::string& text, FixSafety most = FixSafety::Unsafe) {
  LintReport report = lintSource(name, text);
  return applyFixes(text, applicableFixes(report, most));
}

void expectFixedTwice(const std::string& name, const std::string& source, const std::string& expected) {
  std::string once = fixed(name, source);
  EXPECT_EQ(once, expected) << name;
  EXPECT_EQ(fixed(name, once), once) << name << ": a second --fix changed the file";
}

TEST(FixSettings, ShellScript) {
  expectFixedTwice("job.sh", R"(#!/usr/bin/env bash
# Pin legacy until the A/B run is done.
export TORCH_DIST_USE_NCCL2=0
TORCH_DIST_USE_NCCL2=0 torchrun train.py
export OMP_NUM_THREADS=4 TORCH_DIST_USE_NCCL2=0
export PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync,expandable_segments:True"  # allocator
PYTORCH_ALLOC_CONF=expandable_segments:True,backend:cudaMallocAsync torchrun train.py
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
TORCH_DIST_USE_NCCL2=0; torchrun x.py
export TORCH_DIST_USE_NCCL2=1
)",
                   R"(#!/usr/bin/env bash
# Pin legacy until the A/B run is done.
torchrun train.py
export OMP_NUM_THREADS=4
export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"  # allocator
PYTORCH_ALLOC_CONF=expandable_segments:True torchrun train.py
TORCH_DIST_USE_NCCL2=0; torchrun x.py
export TORCH_DIST_USE_NCCL2=1
)");
}

// A block left without a command does not parse: the only command of one stays.
TEST(FixSettings, ShellBlocksKeepACommand) {
  const std::string source = R"(if [ -n "$ROLLBACK" ]; then
  # rollback
  export TORCH_DIST_USE_NCCL2=0
fi
if [ -n "$ROLLBACK" ]; then
  export TORCH_DIST_USE_NCCL2=0
  echo pinned
fi
)";
  expectFixedTwice("job.sh", source, R"(if [ -n "$ROLLBACK" ]; then
  # rollback
  export TORCH_DIST_USE_NCCL2=0
fi
if [ -n "$ROLLBACK" ]; then
  echo pinned
fi
)");
}

TEST(FixSettings, Dockerfile) {
  expectFixedTwice("Dockerfile", R"(FROM python:3.11
# allocator choice
ENV PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
ENV PYTORCH_ALLOC_CONF backend:cudaMallocAsync,expandable_segments:True
ENV A=1 TORCH_DIST_USE_NCCL2=0
ENV B=2 \
    TORCH_DIST_USE_NCCL2=0
RUN echo hi
)",
                   R"(FROM python:3.11
# allocator choice
ENV PYTORCH_ALLOC_CONF expandable_segments:True
ENV A=1
ENV B=2 \
    TORCH_DIST_USE_NCCL2=0
RUN echo hi
)");
}

TEST(FixSettings, YamlEnvAndToml) {
  expectFixedTwice("deploy.yaml", R"(distributed:
  backend: cpu:gloo,cuda:nccl-legacy  # pinned
  timeout: 600
environment:
  # rollback
  TORCH_DIST_USE_NCCL2: "0"
  PYTORCH_CUDA_ALLOC_CONF: "backend:cudaMallocAsync,expandable_segments:True"
env:
  - name: PYTORCH_CUDA_ALLOC_CONF
    value: "backend:cudaMallocAsync"
)",
                   R"(distributed:
  backend: cpu:gloo,cuda:nccl  # pinned
  timeout: 600
environment:
  # rollback
  PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True"
env:
  - name: PYTORCH_CUDA_ALLOC_CONF
    value: "backend:cudaMallocAsync"
)");
  expectFixedTwice("legacy.env", "# rollback\nTORCH_DIST_USE_NCCL2=0\nOTHER=1\n", "# rollback\nOTHER=1\n");
  expectFixedTwice("settings.toml", R"([env]
# keep
PYTORCH_CUDA_ALLOC_CONF = "backend:cudaMallocAsync"  # allocator
PYTORCH_ALLOC_CONF = "backend:cudaMallocAsync,expandable_segments:True"
TORCH_DIST_USE_NCCL2 = "0"
OTHER = "x"
)",
                   R"([env]
# keep
PYTORCH_ALLOC_CONF = "expandable_segments:True"
OTHER = "x"
)");
}

// The backend's name goes where it is a word of the value, not inside a path or another name.
TEST(FixSettings, TheLegacyNameIsRenamedAsAWordOnly) {
  expectFixedTwice("run.yaml", "args: \"--backend nccl-legacy --log /tmp/nccl-legacy.log --tag my-nccl-legacy-run\"\n",
                   "args: \"--backend nccl --log /tmp/nccl-legacy.log --tag my-nccl-legacy-run\"\n");
}

// A YAML line goes alone only where its block keeps a line of its kind: the only key under an
// anchor (merged elsewhere with `<<:`), the only item of a list and the only command of a shell
// block inside a `run: |` scalar stay; a key with siblings goes.
TEST(FixSettings, YamlBlocksKeepTheirShape) {
  const std::string unchanged = R"(x-env: &env
  TORCH_DIST_USE_NCCL2: "0"
services:
  trainer:
    environment:
      <<: *env
    command:
      - TORCH_DIST_USE_NCCL2=0
steps:
  - run: |
      if [ -n "$LEGACY" ]; then
        export TORCH_DIST_USE_NCCL2=0
      fi
      torchrun train.py
)";
  EXPECT_EQ(fixed("ci.yaml", unchanged), unchanged);
  // A list item may hold more keys below it, or be its list's only item: items stay.
  for (const std::string items : {"env:\n- TORCH_DIST_USE_NCCL2=0\nother: 1\n",
                                  "spec:\n  containers:\n  - TORCH_DIST_USE_NCCL2: \"0\"\n    other: 1\n  - b: 2\n"}) {
    EXPECT_EQ(fixed("k.yaml", items), items);
  }
  expectFixedTwice("ci.yaml", "env:\n  TORCH_DIST_USE_NCCL2: \"0\"\n  OTHER: \"1\"\n", "env:\n  OTHER: \"1\"\n");
}

// A JSON member cannot go alone (the commas around it); its value can lose an item.
TEST(FixSettings, JsonKeepsItsMembers) {
  expectFixedTwice("c.json", R"({
  "TORCH_DIST_USE_NCCL2": "0",
  "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync,expandable_segments:True"
})",
                   R"({
  "TORCH_DIST_USE_NCCL2": "0",
  "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"
})");
}

// An assignment that is an option's argument (`docker run -e X=0 image`) is not a prefix of the
// command: removing the word would leave the option to take the next word as its value.
TEST(FixSettings, AnOptionsArgumentStays) {
  for (const std::string source : {"docker run -e TORCH_DIST_USE_NCCL2=0 image python x.py\n",
                                   "docker run --env TORCH_DIST_USE_NCCL2=0 image python x.py\n",
                                   "srun --export=ALL,X=1 -e TORCH_DIST_USE_NCCL2=0 python x.py\n"}) {
    EXPECT_EQ(fixed("job.sh", source), source);
  }
  expectFixedTwice("job.sh", "OMP_NUM_THREADS=4 TORCH_DIST_USE_NCCL2=0 torchrun train.py\n",
                   "OMP_NUM_THREADS=4 torchrun train.py\n");
  // A prefix after a command word that is no option still goes.
  expectFixedTwice("job.sh", "cd run && TORCH_DIST_USE_NCCL2=0 torchrun train.py\n", "cd run && torchrun train.py\n");
  expectFixedTwice("job.sh", "sudo TORCH_DIST_USE_NCCL2=0 torchrun train.py\n", "sudo torchrun train.py\n");
  expectFixedTwice("job.sh", "declare -x A=1 TORCH_DIST_USE_NCCL2=0\n", "declare -x A=1\n");
  expectFixedTwice("Dockerfile", "FROM x\nRUN TORCH_DIST_USE_NCCL2=0 python a.py\n", "FROM x\nRUN python a.py\n");
}

// An assignment word that is an argument of a command (`echo now X=0`, a launcher's `KEY=VALUE`
// argument) is no prefix: the fix would delete a word of the command.
TEST(FixSettings, ACommandsArgumentStays) {
  for (const std::string source : {"echo Now TORCH_DIST_USE_NCCL2=0 is set\n",
                                   "deepspeed train.py TORCH_DIST_USE_NCCL2=0 --cfg x\n",
                                   "make run TORCH_DIST_USE_NCCL2=0\n"}) {
    EXPECT_EQ(fixed("job.sh", source), source);
  }
}

TEST(FixSettings, UnsafeFixesNeedTheOption) {
  const std::string source = "export TORCH_DIST_USE_NCCL2=0\n";
  EXPECT_EQ(fixed("job.sh", source, FixSafety::Safe), source);
  EXPECT_EQ(fixed("job.sh", source, FixSafety::Unsafe), "");
}

}  // namespace
}  // namespace nccl_migrate::lint
