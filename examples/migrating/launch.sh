#!/usr/bin/env bash
# Launches train.py on every GPU of this node, with the settings this job used on torch 2.14.
set -euo pipefail
export TORCH_DIST_USE_NCCL2=0  # keep the legacy backend
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,expandable_segments:True
torchrun --nproc-per-node "${GPUS:-8}" "$(dirname "$0")/train.py"
