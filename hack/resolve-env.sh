#!/usr/bin/env bash
# Which environment a workflow run deploys to: prints dev, staging or prod, or nothing.
#   usage: hack/resolve-env.sh <event> <ref> [<workflow_dispatch environment input>]
# Pushes deploy by branch: develop -> dev, staging -> staging, main -> prod. A manual run
# (workflow_dispatch) deploys where it is told. Everything else (feature branches, tags, pull
# requests) deploys nowhere.
set -euo pipefail
event="${1:?usage: resolve-env.sh <event> <ref> [environment]}"
ref="${2:?usage: resolve-env.sh <event> <ref> [environment]}"
input="${3:-}"

case "$event" in
  workflow_dispatch)
    case "$input" in
      dev | staging | prod) echo "$input" ;;
      *) echo "resolve-env: unknown environment '$input' (dev, staging or prod)" >&2; exit 2 ;;
    esac ;;
  push)
    case "$ref" in
      refs/heads/develop) echo dev ;;
      refs/heads/staging) echo staging ;;
      refs/heads/main) echo prod ;;
      *) echo "" ;;
    esac ;;
  *) echo "" ;;
esac
