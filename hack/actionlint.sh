#!/usr/bin/env bash
# actionlint on every workflow, with shellcheck checking their `run:` scripts. Installs what is
# missing: actionlint (pinned) with `go install` into bin/, shellcheck from Debian's package.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v1.7.12
if [[ ! -x bin/actionlint ]] || ! grep -qx "$version" <<<"$(bin/actionlint -version)"; then
  echo "[actionlint] go install github.com/rhysd/actionlint/cmd/actionlint@$version" >&2
  GOBIN="$(pwd)/bin" go install "github.com/rhysd/actionlint/cmd/actionlint@$version"
fi
if ! command -v shellcheck >/dev/null 2>&1; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "[actionlint] installing Debian's shellcheck" >&2
    apt-cache show shellcheck >/dev/null 2>&1 || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null
  else
    echo "[actionlint] shellcheck is missing: run: scripts are not checked" >&2
  fi
fi
bin/actionlint -no-color
workflows=(.github/workflows/*.y*ml)
checker="$(command -v shellcheck >/dev/null && shellcheck --version | sed -n 's/^version: /, shellcheck /p')"
echo "actionlint: ${#workflows[@]} workflows OK ($version$checker)"
