# One way to stop on a missing dependency: say what is missing and exactly how to get it.
function(nccl_migrate_missing what how)
  message(FATAL_ERROR
    "nccl-migrate: ${what} was not found.\n"
    "  How to get it: ${how}\n"
    "  (tools/setup.sh installs every dependency on Debian bookworm.)")
endfunction()
