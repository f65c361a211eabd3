"""The webhook configurations and the CRD's conversion stanza, as plain objects: one source for
`make manifests` (config/webhook/, the chart's files/webhooks.yaml) and for the operator, which
registers them itself when it runs outside the cluster.

Both admission webhooks fail closed (``failurePolicy: Fail``): a Database write that no
operator replica could check is refused rather than let through unchecked, because a quota,
an image policy or deletion protection that silently lapses whenever the operator restarts
protects nothing. While no replica answers, `kubectl apply`/`delete` of Databases fails with
the API server's "failed calling webhook" error within ``TIMEOUT_S``; reads, the databases
themselves and their children are untouched. Run two replicas (every replica answers
webhooks) to ride through restarts.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from database_operator.api.models import GROUP, PLURAL, VERSION
from database_operator.config import is_exact
from database_operator.manifest import Manifest

CONVERT_PATH = "/convert"
#: The names `kubectl apply -k config/default` installs (the chart uses its release's names).
DEFAULT_NAMESPACE = "database-operator-system"
DEFAULT_SERVICE = "database-operator-webhook"
DEFAULT_CONFIGURATION = "database-operator"
DEFAULT_SECRET = "database-operator-webhook-cert"
#: Seconds the API server waits for an answer: a hung operator costs a request this long.
TIMEOUT_S = 5
#: Never blocked by the webhooks: the API server's own namespace. The operator's namespace is
#: added where it is known.
ALWAYS_EXEMPT = ("kube-system",)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class Hook:
    """One admission webhook: Kopf's handler id is its path. ``match_conditions``: (name, CEL
    expression) pairs, all true for the API server to call it (GA in Kubernetes 1.30, beta and
    on by default in 1.28 and 1.29): a request the webhook could not change or refuse is not
    sent, so it costs no round trip and is not refused while no replica answers."""

    kind: str
    name: str
    handler_id: str
    operations: tuple[Operation, ...]
    match_conditions: tuple[tuple[str, str], ...] = ()
    failure_policy: str = "Fail"

    @property
    def path(self) -> str:
        return f"/{self.handler_id}"


#: The mutating webhook only writes an empty ``spec.version``.
MUTATE = Hook(
    "MutatingWebhookConfiguration",
    f"mutate.{GROUP}",
    "mutate",
    ("CREATE", "UPDATE"),
    (
        (
            "version-unset",
            "!has(object.spec) || !has(object.spec.version) || object.spec.version == ''",
        ),
    ),
)
#: The validating webhook checks a spec, its change, and a delete: an update that leaves the
#: spec as it was (a finalizer, a label, an annotation) has nothing to check.
VALIDATE = Hook(
    "ValidatingWebhookConfiguration",
    f"validate.{GROUP}",
    "validate",
    ("CREATE", "UPDATE", "DELETE"),
    (
        (
            "spec-changed",
            "request.operation != 'UPDATE' || has(object.spec) != has(oldObject.spec)"
            " || (has(object.spec) && object.spec != oldObject.spec)",
        ),
    ),
)
HOOKS = (MUTATE, VALIDATE)

ClientConfig = dict[str, Any]


def service_client(namespace: str, name: str, path: str) -> ClientConfig:
    return {"service": {"namespace": namespace, "name": name, "path": path, "port": 443}}


def url_client(base_url: str, path: str) -> ClientConfig:
    return {"url": base_url.rstrip("/") + path}


def with_ca(config: ClientConfig, ca: bytes | None) -> ClientConfig:
    return {**config, "caBundle": base64.b64encode(ca).decode()} if ca else dict(config)


def namespace_selector(watched: Sequence[str], own_namespace: str | None) -> Manifest:
    """Only the namespaces the operator watches; never kube-system nor its own namespace.

    A selector cannot match a pattern (``chainsaw-*``): with one among the watched, the webhooks
    see every namespace but the exempt ones, as when watching all of them.
    """
    exempt = sorted({*ALWAYS_EXEMPT, *([own_namespace] if own_namespace else [])})
    if watched and all(is_exact(namespace) for namespace in watched):
        expressions = [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(watched)},
        ]
    else:
        expressions = []
    expressions.append({"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": exempt})
    return {"matchExpressions": expressions}


def webhook(hook: Hook, client: ClientConfig, selector: Manifest) -> Manifest:
    """One entry of a webhook configuration's ``webhooks``."""
    entry: Manifest = {
        "name": hook.name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [
            {
                "apiGroups": [GROUP],
                # v1 only: requests through v1beta1 reach the webhook converted to v1.
                "apiVersions": [VERSION],
                "resources": [PLURAL],
                "operations": list(hook.operations),
                "scope": "Namespaced",
            }
        ],
        "matchPolicy": "Equivalent",
        "failurePolicy": hook.failure_policy,
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_S,
        "namespaceSelector": selector,
    }
    if hook.match_conditions:
        entry["matchConditions"] = [
            {"name": name, "expression": expression} for name, expression in hook.match_conditions
        ]
    if hook.kind == "MutatingWebhookConfiguration":
        entry["reinvocationPolicy"] = "Never"
    return entry


def configurations(
    name: str,
    client_for: Callable[[str], ClientConfig],
    selector: Manifest,
    labels: dict[str, str] | None = None,
) -> list[Manifest]:
    """The Mutating- and ValidatingWebhookConfiguration named ``name``; ``client_for(path)``
    says where the API server reaches each webhook."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": hook.kind,
            "metadata": {"name": name, "labels": dict(labels or {})},
            "webhooks": [webhook(hook, client_for(hook.path), selector)],
        }
        for hook in HOOKS
    ]


def conversion(client: ClientConfig) -> Manifest:
    """The CRD's ``spec.conversion``."""
    return {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client},
    }


def default_conversion() -> Manifest:
    """The CRD's ``spec.conversion`` as `kubectl apply -k config/default` installs it: to the
    webhook Service of its names (the chart writes its own names in)."""
    return conversion(service_client(DEFAULT_NAMESPACE, DEFAULT_SERVICE, CONVERT_PATH))
