#!/usr/bin/env bash
# Launch script written for torch < 2.15: the allocator setting needs testing under the rewritten backend.
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
torchrun --nproc-per-node 8 train.py
