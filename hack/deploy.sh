#!/usr/bin/env bash
# Deploy the operator's chart to an environment, smoke-test it, and roll back on failure.
#   usage: hack/deploy.sh <dev|staging|prod>
#   env: IMAGE_REPOSITORY, IMAGE_TAG or IMAGE_DIGEST (the image to run; default: the chart's),
#        RELEASE (database-operator), NAMESPACE (database-operator-system), TIMEOUT (5m),
#        HELM (helm), KUBECONFIG, SMOKE (1: run hack/smoke-test.sh; 0: skip), HELM_SET (more
#        values, as helm's --set takes them: a=1,b=2), and the smoke test's variables.
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

# The last good revision, to roll back to if the smoke test fails.
previous=""
if history="$("$helm" history "$release" -n "$namespace" --max 20 -o json 2>/dev/null)"; then
  previous="$(python3 -c 'import json, sys
deployed = [r["revision"] for r in json.load(sys.stdin) if r["status"] == "deployed"]
print(deployed[-1] if deployed else "")' <<<"$history")"
fi

log "deploying $release to $env (namespace $namespace, previous revision: ${previous:-none})"
"$helm" upgrade --install "$release" "$chart" \
  --namespace "$namespace" --create-namespace \
  --values "$values" "${set_args[@]}" \
  --wait --timeout "$timeout" --rollback-on-failure

if [[ "${SMOKE:-1}" == 1 ]] && ! RELEASE="$release" NAMESPACE="$namespace" "$here/smoke-test.sh"; then
  if [[ -n "$previous" ]]; then
    log "smoke test failed: rolling back to revision $previous"
    "$helm" rollback "$release" "$previous" -n "$namespace" --wait --timeout "$timeout"
  else
    log "smoke test failed: no earlier revision to roll back to"
  fi
  exit 1
fi
log "deployed $release to $env"
