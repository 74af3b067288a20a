#!/usr/bin/env bash
# One entry point for a fresh Debian/Ubuntu machine; every step is idempotent.
#   scripts/dev.sh demo   -> set up, then run the end-to-end demo (layoutalg demo)
#   scripts/dev.sh test   -> set up, then run the whole test suite on every core (pytest-xdist,
#                            one worker per core, each taking whole test files; add -n 0 for
#                            one process: a later -n wins)
#   scripts/dev.sh setup  -> only set up
#   scripts/dev.sh layoutalg ARGS... -> set up, then run the layoutalg command from .venv
#   scripts/dev.sh missing -> list the system packages setup would install (nothing installed)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
VENV="${LAYOUTALG_VENV:-$ROOT/.venv}"
SYS_PKGS=(clang-19 lld-19 llvm-19 graphviz chromium)

log() { printf '[dev.sh] %s\n' "$*" >&2; }

need_pkgs() {
  local missing=()
  command -v clang++-19 >/dev/null 2>&1 || missing+=(clang-19)
  command -v ld.lld-19 >/dev/null 2>&1 || missing+=(lld-19)
  command -v llvm-objdump-19 >/dev/null 2>&1 || missing+=(llvm-19)
  command -v dot >/dev/null 2>&1 || missing+=(graphviz)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  # Debian/Ubuntu ship venv's pip bootstrap (ensurepip) separately, in python3-venv
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  python3 -c "import venv, ensurepip" >/dev/null 2>&1 || missing+=(python3-venv)
  [ ${#missing[@]} -eq 0 ] || printf '%s\n' "${missing[@]}"
}

setup_system() {
  local missing
  missing=$(need_pkgs)
  [ -z "$missing" ] && return 0
  local SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  log "installing system packages: $(echo $missing)"
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    log "missing: $(echo $missing); install them (apt-get install $(echo $missing)) as root"
    exit 3
  fi
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

setup_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtualenv $VENV"
    # system site packages: reuse a preinstalled numpy/sympy/torch where present
    if ! python3 -m venv --system-site-packages "$VENV"; then
      rm -rf "$VENV"   # a half-made venv (no pip) would be reused next time
      log "python3 -m venv failed: on Debian/Ubuntu install python3-venv (apt-get install python3-venv)"
      exit 3
    fi
  fi
  local stamp="$VENV/.layoutalg-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    log "installing layoutalg and its test dependencies"
    "$VENV/bin/python" -m pip install -q -e ".[test]"
    # CPU build of torch for the emulator's reference checks (plain 'torch' pulls CUDA)
    "$VENV/bin/python" -c "import torch" 2>/dev/null || \
      "$VENV/bin/python" -m pip install -q "torch==2.13.0"
    touch "$stamp"
  fi
}

setup() { setup_system; setup_python; }

cmd="${1:-help}"
shift || true
case "$cmd" in
  setup) setup ;;
  demo)  setup; exec "$VENV/bin/layoutalg" demo "$@" ;;
  # --dist loadfile: a file's tests run in one worker, in order, so a module-scoped fixture
  # (a verified base kernel) is built once, as in a plain `pytest` run;
  # --no-loadscope-reorder: the files go out in tests/_file_order.py's order (the slow files
  # first), not xdist's most-tests-first, which left the slow few-test files for the end
  test)  setup; exec "$VENV/bin/python" -m pytest -n auto --dist loadfile --no-loadscope-reorder "$@" ;;
  layoutalg) setup; exec "$VENV/bin/layoutalg" "$@" ;;
  missing) need_pkgs ;;
  *) echo "usage: scripts/dev.sh {demo|test|setup|layoutalg|missing} [args...]" >&2; exit 2 ;;
esac
