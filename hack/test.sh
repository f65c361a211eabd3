#!/usr/bin/env bash
# `make test` after its prerequisites: the tiers on loopback and kwok (unit, integration, e2e,
# Chainsaw) while the real node's binaries and images build in the background (cached outside the
# clone: on a machine that has them this is a few seconds), then the real-node tier (tests/real/),
# which must never run beside a kwok cluster. Arguments go to both pytest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .local
log=.local/real-node-build.log
started=$SECONDS
# A session of its own, so that an interrupted run stops every build process it started.
setsid bash -c 'REAL=1 hack/envtest.sh && hack/images/build.sh all' >"$log" 2>&1 &
builder=$!
trap 'kill -- "-$builder" 2>/dev/null || true' EXIT

status=0
.venv/bin/pytest "$@" || status=$?

if ! wait "$builder"; then
  echo "building the real node's binaries and images failed ($log):" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
trap - EXIT
echo "real node's binaries and images: ready $((SECONDS - started))s after the start ($log)"
.venv/bin/pytest -m real "$@" || status=$?
exit "$status"
