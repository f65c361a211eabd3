#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver) from the Go module proxy, the way
# setup-envtest lays out its assets: one folder per Kubernetes version holding the binaries.
# FULL=1 adds the full local cluster: kube-controller-manager, kube-scheduler and kwok (a
# simulated kubelet that makes pods Running and Ready without containers). REAL=1 adds what the
# real-node tier runs on the host (tests/realnode.py): FULL's controller-manager and scheduler,
# kubelet and kube-proxy (CoreDNS and pause are images: hack/images/).
#
# Built binaries are cached outside the clone (ENVTEST_CACHE) so a fresh clone on the same machine
# only copies them; the Go build cache makes a rebuild after a cache wipe cheap. A second run is a
# no-op. Prints the folder on its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
module_version() { # module_version <go.mod> <module path>: the version go.mod requires
  # The first match only (`q`): no `| head`, whose early exit would be a SIGPIPE under pipefail.
  sed -nE "/^[[:space:]]*(require[[:space:]]+)?${2//\//\\/} v/{s|^[[:space:]]*(require[[:space:]]+)?$2 v([^ ]+).*$|\2|p;q}" "$1"
}
kube_version="$(module_version "$here/envtest/kube/go.mod" k8s.io/kubernetes)"
etcd_version="$(module_version "$here/envtest/etcd/go.mod" go.etcd.io/etcd/server/v3)"
kwok_version="$(module_version "$here/envtest/kwok/go.mod" sigs.k8s.io/kwok)"
[[ -n "$kube_version" && -n "$etcd_version" && -n "$kwok_version" ]] || {
  echo "cannot read the pinned versions" >&2; exit 1; }
cache="${ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/envtest}/k8s/$kube_version-etcd-$etcd_version"
dest="${ENVTEST_BIN:-$root/bin/k8s/$kube_version}"

log() { printf '[envtest %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

build() { # build <module dir> <package> <binary name> <ldflags>
  local out="$cache/$3"
  if [[ -x "$out" ]]; then return; fi
  log "building $3 from $2 (first run on a machine: several minutes on 2 cores)"
  local start=$SECONDS
  mkdir -p "$cache"
  (cd "$here/envtest/$1" && CGO_ENABLED=0 go build -trimpath -ldflags "$4" -o "$out.tmp" "$2")
  mv "$out.tmp" "$out"
  log "built $3 in $((SECONDS - start))s"
}

kube_ldflags="-s -w"
for var in gitVersion=v$kube_version gitMajor=${kube_version%%.*} gitTreeState=clean; do
  kube_ldflags+=" -X k8s.io/component-base/version.$var -X k8s.io/client-go/pkg/version.$var"
done
minor="${kube_version#*.}"; minor="${minor%%.*}"
kube_ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitMinor=$minor"

binaries=(etcd kube-apiserver)
build etcd go.etcd.io/etcd/server/v3 etcd "-s -w"
build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kube_ldflags"
if [[ "${FULL:-}" == 1 || "${REAL:-}" == 1 ]]; then
  binaries+=(kube-controller-manager kube-scheduler)
  build kube k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$kube_ldflags"
  build kube k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$kube_ldflags"
fi
if [[ "${FULL:-}" == 1 ]]; then
  binaries+=(kwok)
  build kwok sigs.k8s.io/kwok/cmd/kwok kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$kwok_version"
fi
if [[ "${REAL:-}" == 1 ]]; then
  binaries+=(kubelet kube-proxy)
  build kube k8s.io/kubernetes/cmd/kubelet kubelet "$kube_ldflags"
  build kube k8s.io/kubernetes/cmd/kube-proxy kube-proxy "$kube_ldflags"
fi

mkdir -p "$dest"
for bin in "${binaries[@]}"; do
  if ! cmp -s "$cache/$bin" "$dest/$bin"; then
    cp "$cache/$bin" "$dest/$bin.tmp" && mv "$dest/$bin.tmp" "$dest/$bin"
    log "installed $dest/$bin"
  fi
done
echo "$dest"
