"""Pod templates an earlier version wrote: kept until the Database asks for a change.

A new operator version may render a Database's pods differently (another command line, a new
annotation, a new selector label). Applying that at upgrade would restart every database the
operator runs, all at once. So a Deployment whose pod template an earlier version wrote for the
Database's current spec keeps that template — and its selector, which cannot change in place,
with the Service in front of it selecting the same pods — until one of:

- the spec changes in a way that changes the pods (a new version, parameters, resources...;
  not, say, a backup schedule): the rollout the user asked for brings the current version's
  template with it;
- the credentials the pods read change (their checksum), which rolls the pods anyway;
- someone else changed the kept template (its digest no longer matches): that edit rolled the
  pods already, and the current template is put back as drift;
- the Database carries ``UPGRADE_PODS: "true"``: the opt-in to roll its pods onto the current
  template now, and after each later upgrade.

What was kept is recorded on the Deployment in a label (``KEPT_TEMPLATE``): a label, because a
Deployment's generation moves with any change of its spec or its annotations (so the applied
digest is not written either), and with it the Database would read as rolling out. So the
decision is made once, at the first reconcile after the upgrade, by one write that changes
neither the Deployment's spec nor its generation. The record names the Database's generation
and the digest of the template this version would have written: a spec change that leaves that
render alone keeps the template (the record moves to the new generation), and a later upgrade,
whose render differs, keeps it while the generation holds.

The first time, "written by an earlier version for the current spec" means: the template
differs from the current render; what was applied is not what this version renders (its
applied digest differs, or it has none: a Deployment this version wrote and someone edited is
drift, put back as always); the earlier operator had finished with the current generation
(``status.observedGeneration`` is the generation, the phase is neither absent nor ``Failed``,
and the spec is not paused); and the template's credentials checksum, if it has one, is the
current one. A kept primary whose selector cannot tell it from read replicas (0.1.0's, without
the role label) is not kept once read replicas are asked for: the read-write Service would send
writes to them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from database_operator.api.models import GROUP, ROLE_LABEL, Database, Phase
from database_operator.compare import covers
from database_operator.desired.common import (
    APPLIED_DIGEST_ANNOTATION,
    CREDENTIALS_CHECKSUM_ANNOTATION,
    stamped,
)
from database_operator.manifest import Manifest

#: Label on a Deployment whose pod template an earlier version wrote and the operator keeps:
#: ``<generation>.<credentials>.<rendered>.<kept>``: the Database's generation and credentials
#: checksum it was kept for, the digest of the template this version would have written then,
#: and the digest of the kept template.
KEPT_TEMPLATE = f"{GROUP}/kept-pod-template"
#: Annotation on a Database: "true" rolls its pods onto the current version's template (now, and
#: after every later upgrade) instead of keeping an earlier version's.
UPGRADE_PODS = f"{GROUP}/upgrade-pods"
#: The phases in which the operator that wrote the children had acted on the current spec.
_ACTED = {Phase.PENDING, Phase.ACTIVE, Phase.DEGRADED}


def template_digest(template: Any) -> str:
    """A digest of a pod template as the API server holds it."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _record(db: Database, checksum: str, wanted: Manifest, template: Any) -> str:
    """The KEPT_TEMPLATE label's value (at most 63 characters, as a label value must be)."""
    rendered = template_digest(wanted["spec"]["template"])
    return f"{db.metadata.get('generation')}.{checksum[:12]}.{rendered}.{template_digest(template)}"


def _still_kept(record: str, db: Database, checksum: str, wanted: Manifest, template: Any) -> bool:
    """Whether a template kept as ``record`` says stays kept: unedited, for the same
    credentials, and either the spec has not changed or it changed nothing this version puts in
    the pods (this version's render of them is the same)."""
    generation, kept_checksum, rendered, kept = [*record.split("."), "", "", "", ""][:4]
    now = _record(db, checksum, wanted, template).split(".")
    return (
        kept == now[3] and kept_checksum == now[1] and (generation == now[0] or rendered == now[2])
    )


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _annotations(obj: Manifest) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("annotations") or {})


def _acted_on_current_spec(db: Database) -> bool:
    return bool(
        db.status.observed_generation is not None
        and db.status.observed_generation == db.metadata.get("generation")
        and db.status.phase in _ACTED
        and not db.spec.paused
    )


def _keeps(
    observed: Manifest, wanted: Manifest, db: Database, checksum: str, read_replicas: bool
) -> bool:
    """Whether ``observed``'s template is an earlier version's, to be kept (module docstring)."""
    template = observed.get("spec", {}).get("template")
    if template is None or covers(template, wanted["spec"]["template"]):
        return False  # nothing to keep: the template is the current one
    if (db.metadata.get("annotations") or {}).get(UPGRADE_PODS) == "true":
        return False
    selector = (observed["spec"].get("selector") or {}).get("matchLabels") or {}
    if read_replicas and ROLE_LABEL not in selector:
        return False
    record: str | None = (observed.get("metadata", {}).get("labels") or {}).get(KEPT_TEMPLATE)
    if record is not None:
        return _still_kept(record, db, checksum, wanted, template)
    applied = _annotations(observed).get(APPLIED_DIGEST_ANNOTATION)
    if applied == _annotations(wanted).get(APPLIED_DIGEST_ANNOTATION):
        return False  # this version wrote it: the difference is drift
    rolled_for = (template.get("metadata") or {}).get("annotations") or {}
    checksum_then = rolled_for.get(CREDENTIALS_CHECKSUM_ANNOTATION)
    return _acted_on_current_spec(db) and checksum_then in (None, checksum)


def _kept(observed: Manifest, wanted: Manifest, db: Database, checksum: str) -> Manifest:
    """``wanted`` with the observed template and selector, the record of keeping them in its
    labels, and the applied digest the Deployment has (if any), unchanged: no annotation moves."""
    template = observed["spec"]["template"]
    meta = {key: value for key, value in wanted["metadata"].items() if key != "annotations"}
    meta["labels"] = {**meta["labels"], KEPT_TEMPLATE: _record(db, checksum, wanted, template)}
    applied = _annotations(observed).get(APPLIED_DIGEST_ANNOTATION)
    if applied is not None:
        meta["annotations"] = {APPLIED_DIGEST_ANNOTATION: applied}
    spec = {
        **wanted["spec"],
        "selector": _without_nulls(observed["spec"]["selector"]),
        "template": _without_nulls(template),
    }
    return {**wanted, "metadata": meta, "spec": spec}


def carry_over(
    wanted: list[Manifest],
    observed: dict[tuple[str, str], Manifest],
    db: Database,
    credentials_checksum: str,
) -> list[Manifest]:
    """``wanted`` with each Deployment whose earlier version's pod template is kept (module
    docstring), and each Service in front of such a Deployment (same name) selecting its pods.
    ``observed``: the Database's own children by (kind, name)."""
    read_replicas = sum(1 for child in wanted if child["kind"] == "Deployment") > 1
    selectors: dict[str, Any] = {}
    result = []
    for child in wanted:
        name = child["metadata"]["name"]
        found = observed.get((child["kind"], name))
        if (
            child["kind"] == "Deployment"
            and found is not None
            and _keeps(found, child, db, credentials_checksum, read_replicas)
        ):
            kept = _kept(found, child, db, credentials_checksum)
            selectors[name] = kept["spec"]["selector"].get("matchLabels") or {}
            result.append(kept)
        else:
            result.append(child)
    for index, child in enumerate(result):
        name = child["metadata"]["name"]
        if child["kind"] == "Service" and name in selectors:
            meta = {
                **child["metadata"],
                "annotations": {
                    key: value
                    for key, value in _annotations(child).items()
                    if key != APPLIED_DIGEST_ANNOTATION
                },
            }
            spec = {**child["spec"], "selector": selectors[name]}
            result[index] = stamped({**child, "metadata": meta, "spec": spec})
    return result
