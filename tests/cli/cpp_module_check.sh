#!/usr/bin/env bash
# Clang and LLVM are loaded only by runs with C/C++ files: a Python-only run never maps them (the
# dynamic loader's own log, LD_DEBUG=libs, says what each process loaded), a run with a C++ file
# loads the C/C++ frontend module and reports the C++ file's findings.
#   cpp_module_check.sh CLI EXAMPLES_DIR
set -u
cli=$1 examples=$2
fail() { echo "cpp_module_check.sh: $*" >&2; exit 1; }

log=$(LD_DEBUG=libs "$cli" lint "$examples/legacy_checks.py" 2>&1 >/dev/null)
grep -q "libnccl_migrate_lint_cpp\|libclang-cpp\|libLLVM" <<<"$log" && fail "a Python-only run loaded Clang or LLVM"
grep -q "calling init" <<<"$log" || fail "LD_DEBUG=libs logged nothing; cannot tell what was loaded"

out=$(LD_DEBUG=libs "$cli" lint "$examples/legacy_checks.py" "$examples/legacy_casts.cc" 2>&1)
grep -q "calling init: .*libnccl_migrate_lint_cpp.so" <<<"$out" || fail "a run with a C++ file did not load the C/C++ frontend module"
grep -Eq "legacy_casts[.]cc:[0-9]+:[0-9]+: NM201 " <<<"$out" || fail "no NM201 finding in the C++ file: $out"
grep -Eq "legacy_checks[.]py:[0-9]+:[0-9]+: NM201 " <<<"$out" || fail "no NM201 finding in the Python file: $out"
echo "ok"
