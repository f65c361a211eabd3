#!/usr/bin/env bash
# `make demo` (REAL=1: on a real node): install what is missing (timed), then hack/demo.py
# (cluster, operator, samples).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
echo "==> set-up: .venv, kubectl and helm (first run on a machine: a minute)"
make --no-print-directory install tools >/dev/null
echo "    done in $((SECONDS - started))s"
built=$SECONDS
if [[ "${REAL:-}" == 1 ]]; then
  echo "==> a real node's binaries, packages and images: etcd, kube-apiserver, controller-manager,"
  echo "    scheduler, kubelet, kube-proxy; containerd, runc, CNI; the engines', the exporters' and"
  echo "    the operator's images (first run on a machine: about 40 minutes on 2 cores; cached)"
  make --no-print-directory envtest-real node-packages images seaweedfs >/dev/null
else
  echo "==> binaries: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"
  echo "    (first run on a machine builds them from the Go module proxy: about 10 minutes on 2 cores)"
  FULL=1 hack/envtest.sh >/dev/null
fi
echo "    done in $((SECONDS - built))s"
if [[ "${JAEGER:-}" == 1 ]]; then
  echo "==> Jaeger v2 for the traces (first run on a machine builds it: about 6 minutes)"
  hack/go-tool.sh jaeger >/dev/null
fi
exec .venv/bin/python hack/demo.py
