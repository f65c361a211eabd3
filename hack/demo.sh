#!/usr/bin/env bash
# `make demo`: install what is missing (timed), then hack/demo.py (cluster, operator, samples).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
echo "==> set-up: .venv, kubectl and helm (first run on a machine: a minute)"
make --no-print-directory install tools >/dev/null
echo "    done in $((SECONDS - started))s"
built=$SECONDS
echo "==> binaries: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"
echo "    (first run on a machine builds them from the Go module proxy: about 10 minutes on 2 cores)"
FULL=1 hack/envtest.sh >/dev/null
echo "    done in $((SECONDS - built))s"
if [[ "${JAEGER:-}" == 1 ]]; then
  echo "==> Jaeger v2 for the traces (first run on a machine builds it: about 6 minutes)"
  hack/go-tool.sh jaeger >/dev/null
fi
exec .venv/bin/python hack/demo.py
