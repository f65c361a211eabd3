#!/usr/bin/env bash
# zizmor, the GitHub Actions security linter, on the workflows and Dependabot's configuration,
# offline (no GitHub API here or needed) at its default persona; any finding fails. An ignore
# must be inline (`# zizmor: ignore[<audit>]`) with the reason beside it.
# zizmor comes from PyPI (a wheel carrying the binary), installed once per version into
# ${XDG_CACHE_HOME:-~/.cache}/database-operator/zizmor-<version>, like hadolint.
set -euo pipefail
version=1.33.1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/zizmor-$version"
if [[ ! -x "$dest/bin/zizmor" ]]; then
  echo "[zizmor] installing zizmor $version into $dest" >&2
  mkdir -p "$(dirname "$dest")"
  tmp="$(mktemp -d "$dest.tmp.XXXXXX")"
  "${PYTHON:-python3}" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
    --target "$tmp" "zizmor==$version" >/dev/null
  mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp" # lost a race: another run installed it
fi
cd "$root"
"$dest/bin/zizmor" --offline --no-progress --color=never .github
