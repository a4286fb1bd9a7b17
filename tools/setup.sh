#!/usr/bin/env bash
# Installs everything nccl-migrate needs on a fresh Debian bookworm machine, idempotently:
# Debian packages (compilers, LLVM 19 LibTooling, GoogleTest) and a project-local .venv with
# torch and the test tools. Re-running it only checks and returns.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
say() { printf '[setup] %s\n' "$*"; }

apt_packages=(cmake ninja-build g++ pkg-config
              llvm-19-dev libclang-19-dev clang-19 libclang-cpp19-dev
              libgtest-dev libgmock-dev libbenchmark-dev
              libtomlplusplus-dev clang-tidy-19 nlohmann-json3-dev
              chromium                 # the A/B HTML report is checked in a real headless browser
              libclang-rt-19-dev)      # libFuzzer and the sanitizers of clang-19 (tools/fuzz-lint.sh)

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
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
stamp="$venv/.requirements.sha256"
want=$(cat "$root/python/requirements.txt" "$root/python/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  say "Python packages present (.venv matches python/requirements.txt)"
else
  say "installing Python packages into .venv (torch with its CUDA wheels is several GiB; first run takes minutes)"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q --progress-bar off -r "$root/python/requirements.txt"
  # The package itself, editable: torch finds its backends through the entry points.
  "$venv/bin/python" -m pip install -q --progress-bar off --no-deps --no-build-isolation -e "$root/python"
  echo "$want" > "$stamp"
fi
"$venv/bin/python" - <<'PY'
import torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() or hasattr(torch.cuda, "nccl") else "none"
print(f"[setup] torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl})")
PY
say "done"
