#!/usr/bin/env bash
# Deploy the operator's chart to an environment, smoke-test it (hack/smoke.py), and roll back on
# failure; a release left pending by an interrupted deploy is put back first.
#   usage: hack/deploy.sh <dev|staging|prod>
#   env: IMAGE_REPOSITORY, IMAGE_TAG or IMAGE_DIGEST (the image to run; default: the chart's),
#        RELEASE (database-operator), NAMESPACE (database-operator-system), TIMEOUT (5m),
#        HELM (helm), KUBECONFIG, SMOKE (1: run hack/smoke.py; 0: skip), HELM_SET (more
#        values, as helm's --set takes them: a=1,b=2), and the smoke test's variables (KUBECTL,
#        SMOKE_NAMESPACE, SMOKE_TIMEOUT, POD_METRICS_URLS: hack/smoke.py).
set -euo pipefail
env="${1:?usage: hack/deploy.sh <dev|staging|prod>}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
helm="${HELM:-helm}"
release="${RELEASE:-database-operator}"
namespace="${NAMESPACE:-database-operator-system}"
timeout="${TIMEOUT:-5m}"
chart="$root/helm/database-operator"
values="$chart/values-$env.yaml"
[[ -f "$values" ]] || { echo "deploy: no values file $values" >&2; exit 2; }

log() { printf '[deploy %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

set_args=()
[[ -n "${IMAGE_REPOSITORY:-}" ]] && set_args+=(--set "image.repository=$IMAGE_REPOSITORY")
[[ -n "${IMAGE_TAG:-}" ]] && set_args+=(--set "image.tag=$IMAGE_TAG")
[[ -n "${IMAGE_DIGEST:-}" ]] && set_args+=(--set "image.digest=$IMAGE_DIGEST")
[[ -n "${HELM_SET:-}" ]] && set_args+=(--set "$HELM_SET")

# revision_where EXPR: the newest revision of the release whose record r satisfies EXPR (Python),
# or nothing. Helm marks a revision `superseded` once a newer one is deployed or pending.
revision_where() {
  "$helm" history "$release" -n "$namespace" --max 50 -o json 2>/dev/null | python3 -c '
import json, sys
history = json.load(sys.stdin)
current = history[-1]["revision"] if history else 0
chosen = [r["revision"] for r in history if '"$1"']
print(chosen[-1] if chosen else "")' || true
}

# restore REVISION WHY: back to REVISION, or with none (a first install) uninstalled: nothing
# ran here before (the chart keeps the CRDs, and Databases stay).
restore() {
  if [[ -n "$1" ]]; then
    log "$2: rolling back to revision $1"
    "$helm" rollback "$release" "$1" -n "$namespace" --wait --timeout "$timeout"
  else
    log "$2 on the first install: uninstalling $release"
    "$helm" uninstall "$release" -n "$namespace" --wait --timeout "$timeout"
  fi
}

# A deploy killed halfway (a cancelled job, a lost runner) leaves the release pending, and Helm
# refuses every later upgrade ("another operation is in progress"): put it back first.
status="$("$helm" status "$release" -n "$namespace" -o json 2>/dev/null |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["info"]["status"])' || true)"
case "$status" in
  pending-install | pending-upgrade | pending-rollback)
    restore "$(revision_where 'r["revision"] < current and r["status"] in ("deployed", "superseded")')" \
      "release $release was left $status by an interrupted deploy"
    ;;
esac

# The last good revision, to roll back to if the smoke test fails.
previous="$(revision_where 'r["status"] == "deployed"')"

log "deploying $release to $env (namespace $namespace, previous revision: ${previous:-none})"
# --rollback-on-failure: a failed upgrade goes back to the previous revision; a failed first
# install is uninstalled, so the next deploy installs afresh (Helm v4, tested).
"$helm" upgrade --install "$release" "$chart" \
  --namespace "$namespace" --create-namespace \
  --values "$values" "${set_args[@]}" \
  --wait --timeout "$timeout" --rollback-on-failure

if [[ "${SMOKE:-1}" == 1 ]] && ! RELEASE="$release" NAMESPACE="$namespace" python3 "$here/smoke.py"; then
  restore "$previous" "smoke test failed"
  exit 1
fi

log "deployed $release to $env${IMAGE_DIGEST:+ (image $IMAGE_DIGEST)}"
