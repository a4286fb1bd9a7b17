"""A/B runs: one job, run twice with only environment variables changed, every collective and
p2p op recorded per rank and the two runs compared op by op (docs/ab.md).

Modules: ``spec`` (what a side means), ``runner`` (runs or records one side through torch's
launcher), ``recorder``, ``op_table``, ``wrappers``, ``dispatcher_calls`` (inside the job: wrappers
and hooks that write what each op saw, one table of ops), ``digest``, ``shadow`` (--shadow: each
op run again on a shadow group), ``perturb`` (a test switch), ``sides`` (read a side's records
back, streamed and checked), ``compare`` (pair, judge, classify), ``side_stats`` and ``op_map``
(what the report shows, gathered while comparing), ``report``, ``html`` (the self-contained HTML
report), ``command`` (the ``nccl-migrate ab`` entry: run, record, compare).
"""

# Environment variables the runner sets in the job and the recorder reads there.
RECORD_VARIABLE = "NCCL_MIGRATE_AB_RECORD"  # directory: record this process's ops there
BACKEND_VARIABLE = "NCCL_MIGRATE_AB_BACKEND"  # replace init_process_group's backend argument
KEEP_VARIABLE = "NCCL_MIGRATE_AB_KEEP"  # keep whole tensors of ops up to this many bytes
PERTURB_VARIABLE = "NCCL_MIGRATE_AB_PERTURB"  # test switch: corrupt one op's output
SHADOW_VARIABLE = "NCCL_MIGRATE_AB_SHADOW"  # --shadow: the shadow side's environment (JSON)
SHADOW_PERTURB_VARIABLE = "NCCL_MIGRATE_AB_SHADOW_PERTURB"  # the test switch, on the shadow's outputs
