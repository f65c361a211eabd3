#!/usr/bin/env bash
# Smoke test of a deployed operator: a Database in a smoke namespace reaches Ready, and the
# operator's metrics show successful reconciles. Cleans up after itself, pass or fail.
#   env: KUBECTL (kubectl), SMOKE_NAMESPACE (database-operator-smoke), SMOKE_TIMEOUT (180s),
#        METRICS_URL (default: port-forward to the metrics Service of RELEASE in NAMESPACE),
#        RELEASE (database-operator), NAMESPACE (database-operator-system)
set -euo pipefail
kubectl="${KUBECTL:-kubectl}"
ns="${SMOKE_NAMESPACE:-database-operator-smoke}"
timeout="${SMOKE_TIMEOUT:-180s}"
release="${RELEASE:-database-operator}"
namespace="${NAMESPACE:-database-operator-system}"
name="smoke"
forward_pid=""

log() { printf '[smoke %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
cleanup() {
  if [[ -n "$forward_pid" ]]; then kill "$forward_pid" 2>/dev/null || true; fi
  "$kubectl" delete database "$name" -n "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "applying Database $ns/$name"
"$kubectl" create namespace "$ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" apply -n "$ns" -f - >/dev/null <<YAML
apiVersion: databases.example.com/v1
kind: Database
metadata:
  name: $name
spec:
  engine: redis
  replicas: 1
  deletionPolicy: Delete
YAML

log "waiting up to $timeout for Ready"
if ! "$kubectl" wait --for=condition=Ready "database/$name" -n "$ns" --timeout="$timeout" >&2; then
  "$kubectl" get database "$name" -n "$ns" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' >&2 || true
  log "FAILED: the Database did not become Ready"
  exit 1
fi

url="${METRICS_URL:-}"
if [[ -z "$url" ]]; then
  "$kubectl" port-forward -n "$namespace" "service/$release-metrics" 18080:metrics >/dev/null 2>&1 &
  forward_pid=$!
  sleep 3
  url="http://127.0.0.1:18080/metrics"
fi
log "checking metrics at $url"
successes="$(curl -fsS --max-time 10 "$url" | awk -F' ' '/^database_operator_reconciles_total\{result="success"\}/ {print $2}')"
if [[ -z "$successes" ]] || ! awk -v n="$successes" 'BEGIN { exit !(n > 0) }'; then
  log "FAILED: no successful reconcile in the operator's metrics"
  exit 1
fi
log "passed: Ready, $successes successful reconciles"
