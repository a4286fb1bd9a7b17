#!/usr/bin/env bash
# Installs everything nccl-migrate needs on a fresh Debian bookworm machine, idempotently:
# Debian packages (compilers, LLVM 19 LibTooling, GoogleTest) and a project-local .venv with
# torch and the test tools. Re-running it only checks and returns.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
say() { printf '[setup] %s\n' "$*"; }
# apt and pip output goes to one log, named once; the terminal gets one line per step.
log="$root/build/logs/setup.log"
mkdir -p "$(dirname "$log")"
: > "$log"
fail() { echo "[setup] error: $* (details: $log)" >&2; tail -n 20 "$log" >&2; exit 1; }

apt_packages=(cmake ninja-build g++ pkg-config
              llvm-19-dev libclang-19-dev clang-19 libclang-cpp19-dev
              libgtest-dev libgmock-dev libbenchmark-dev
              libtomlplusplus-dev clang-tidy-19 nlohmann-json3-dev
              chromium                 # the A/B HTML report is checked in a real headless browser
              libclang-rt-19-dev       # libFuzzer and the sanitizers of clang-19 (tools/fuzz-lint.sh)
              zlib1g-dev libzstd-dev   # static zlib and zstd for the wheel's self-contained binary
              debootstrap              # tools/check-install.sh: Debian roots of older releases
              ccache)                  # a rebuild of unchanged sources (a fresh clone, CI) compiles nothing

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "[setup] error: installing Debian packages needs root; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq >>"$log" 2>&1 || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1 ||
    fail "apt-get install failed"
else
  say "Debian packages present"
fi

if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  say "note: no CUDA toolkit (nvcc) found; the NCCL backend will not be built."
  say "      Install the CUDA 13 toolkit to /usr/local/cuda to build it."
fi

python=${PYTHON:-python3}
if [[ ! -x "$venv/bin/python" ]]; then
  say "creating $venv with $($python --version)"
  "$python" -m venv "$venv"
fi
# The venv's site-packages: where torch lands, and where the source path goes below.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
stamp="$venv/.requirements.sha256"
want=$(cat "$root/python/requirements.txt" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  say "Python packages present (.venv matches python/requirements.txt)"
else
  # torch and its CUDA wheels unpack to about 6 GiB and pip stages them under $TMPDIR first; a
  # full disk would otherwise surface as an OSError deep in pip's output after minutes. Checked
  # only while .venv has no torch: an update of the other packages needs little.
  if [[ ! -d $site/torch ]]; then
    need_gib=10
    for dir in "$root" "${TMPDIR:-/tmp}"; do
      if [[ ! -d $dir ]]; then
        echo "[setup] error: TMPDIR=$dir is not a folder; create it or unset TMPDIR, then rerun." >&2
        exit 1
      fi
      free_mib=$(df --output=avail -BM "$dir" | tail -n 1 | tr -dc '0-9')
      if ((free_mib < need_gib * 1024)); then
        echo "[setup] error: installing torch needs about $need_gib GiB free on the disk of $dir;" \
             "$free_mib MiB free. Free space there (old build trees, pip's cache) or set TMPDIR, then rerun." >&2
        exit 1
      fi
    done
  fi
  say "installing Python packages into .venv (torch with its CUDA wheels is several GiB; first run takes minutes)"
  {
    "$venv/bin/python" -m pip install --upgrade pip &&
    "$venv/bin/python" -m pip install --progress-bar off -r "$root/python/requirements.txt" &&
    # An earlier editable install of the package gives way to the source path below.
    "$venv/bin/python" -m pip uninstall -y nccl-migrate
  } >>"$log" 2>&1 || fail "pip install failed"
  echo "$want" > "$stamp"
fi
# The package from the source tree: python/ on .venv's path. The build writes its native modules
# and a dist-info with the entry points (torch finds the backends through them) into python/.
if [[ "$(cat "$site/nccl_migrate_source.pth" 2>/dev/null)" != "$root/python" ]]; then
  echo "$root/python" > "$site/nccl_migrate_source.pth"
fi
"$venv/bin/python" - <<'PY'
import torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() or hasattr(torch.cuda, "nccl") else "none"
print(f"[setup] torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl})")
PY
say "done (log: ${log#"$root/"})"
