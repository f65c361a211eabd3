"""Pod templates an earlier version wrote are kept until the Database asks for a change."""

from __future__ import annotations

import copy
from typing import Any

from database_operator import desired
from database_operator.api.models import ROLE_LABEL, Database
from database_operator.carryover import KEPT_TEMPLATE, UPGRADE_PODS, carry_over, template_digest
from database_operator.desired.common import APPLIED_DIGEST_ANNOTATION

UID = "0b1c2d3e-0000-4000-8000-000000000002"
CHECKSUM = "c" * 32


def make_db(
    generation: int = 3,
    observed_generation: int | None = 3,
    phase: str | None = "Active",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Database:
    status: dict[str, Any] = {}
    if observed_generation is not None:
        status["observedGeneration"] = observed_generation
    if phase is not None:
        status["phase"] = phase
    metadata: dict[str, Any] = {
        "name": "shop",
        "namespace": "prod",
        "uid": UID,
        "generation": generation,
        "annotations": annotations or {},
    }
    return Database.model_validate({"metadata": metadata, "spec": spec, "status": status})


def earlier_deployment(db: Database) -> dict[str, Any]:
    """A primary as 0.1.0 wrote it: no role label, no credentials checksum, its own args, no
    applied digest; with what the API server adds."""
    made = copy.deepcopy(desired.deployment(db))
    del made["spec"]["selector"]["matchLabels"][ROLE_LABEL]
    template = made["spec"]["template"]
    del template["metadata"]["labels"][ROLE_LABEL]
    container = template["spec"]["containers"][0]
    container.pop("command", None)
    container["args"] = ["-c", "listen_addresses=*"]
    container["imagePullPolicy"] = "IfNotPresent"
    template["metadata"]["creationTimestamp"] = None
    made["metadata"]["uid"] = "deployment-uid"
    made["metadata"]["generation"] = 1
    return made


def wanted(db: Database) -> list[dict[str, Any]]:
    return desired.children(db, CHECKSUM)


def by_key(*objs: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objs}


def find(children: list[dict[str, Any]], kind: str, name: str = "shop") -> dict[str, Any]:
    return next(c for c in children if c["kind"] == kind and c["metadata"]["name"] == name)


def test_an_earlier_versions_template_for_the_current_spec_is_kept_with_its_selector() -> None:
    db = make_db()
    old = earlier_deployment(db)
    result = carry_over(wanted(db), by_key(old), db, CHECKSUM)
    deployment = find(result, "Deployment")
    assert deployment["spec"]["template"] == {
        **old["spec"]["template"],
        "metadata": {k: v for k, v in old["spec"]["template"]["metadata"].items() if v is not None},
    }
    assert deployment["spec"]["selector"] == old["spec"]["selector"]
    record = deployment["metadata"]["labels"][KEPT_TEMPLATE]
    rendered = template_digest(find(wanted(db), "Deployment")["spec"]["template"])
    assert record == f"3.{CHECKSUM[:12]}.{rendered}.{template_digest(old['spec']['template'])}"
    assert len(f"{2**31}.{CHECKSUM[:12]}.{rendered}.{rendered}") <= 63
    # No annotation moves: a Deployment's generation follows its annotations too.
    assert "annotations" not in deployment["metadata"]
    # The read-write Service selects the kept pods (they have no role label).
    service = find(result, "Service")
    assert service["spec"]["selector"] == old["spec"]["selector"]["matchLabels"]
    assert APPLIED_DIGEST_ANNOTATION in service["metadata"]["annotations"]


def test_a_kept_template_stays_kept_while_nothing_asks_for_a_change() -> None:
    db = make_db()
    old = earlier_deployment(db)
    first = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    # As written: the record on the object, the template untouched.
    stored = {**old, "metadata": {**old["metadata"], "labels": first["metadata"]["labels"]}}
    again = find(carry_over(wanted(db), by_key(stored), db, CHECKSUM), "Deployment")
    assert again == first


def test_a_spec_change_of_the_pods_rolls_onto_the_current_template() -> None:
    db = make_db()
    old = earlier_deployment(db)
    first = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    stored = {**old, "metadata": {**old["metadata"], "labels": first["metadata"]["labels"]}}
    changed = make_db(generation=4, observed_generation=3, parameters={"max_connections": "50"})
    result = carry_over(wanted(changed), by_key(stored), changed, CHECKSUM)
    assert find(result, "Deployment") == find(wanted(changed), "Deployment")
    assert find(result, "Service") == find(wanted(changed), "Service")


def test_a_spec_change_the_pods_do_not_read_keeps_the_template() -> None:
    db = make_db()
    old = earlier_deployment(db)
    first = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    stored = {**old, "metadata": {**old["metadata"], "labels": first["metadata"]["labels"]}}
    changed = make_db(generation=4, observed_generation=3, deletionPolicy="Delete")
    kept = find(carry_over(wanted(changed), by_key(stored), changed, CHECKSUM), "Deployment")
    assert kept["spec"]["template"] == first["spec"]["template"]
    # Recorded for the new generation: a later upgrade keeps it too.
    assert kept["metadata"]["labels"][KEPT_TEMPLATE].startswith("4.")


def test_a_later_upgrade_keeps_a_template_kept_by_an_earlier_one() -> None:
    # The record names what another renderer would have written: the generation still holds.
    db = make_db()
    old = earlier_deployment(db)
    first = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    generation, checksum, _, kept = first["metadata"]["labels"][KEPT_TEMPLATE].split(".")
    labels = {**first["metadata"]["labels"], KEPT_TEMPLATE: f"{generation}.{checksum}.0.{kept}"}
    stored = {**old, "metadata": {**old["metadata"], "labels": labels}}
    again = find(carry_over(wanted(db), by_key(stored), db, CHECKSUM), "Deployment")
    assert again["spec"]["template"] == first["spec"]["template"]


def test_changed_credentials_roll_onto_the_current_template() -> None:
    db = make_db()
    old = earlier_deployment(db)
    first = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    stored = {**old, "metadata": {**old["metadata"], "labels": first["metadata"]["labels"]}}
    rotated = "d" * 32
    result = carry_over(desired.children(db, rotated), by_key(stored), db, rotated)
    assert find(result, "Deployment") == find(desired.children(db, rotated), "Deployment")


def test_a_kept_template_edited_by_someone_else_is_replaced_by_the_current_one() -> None:
    db = make_db()
    old = earlier_deployment(db)
    first = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    edited = copy.deepcopy(old)
    edited["metadata"]["labels"] = first["metadata"]["labels"]
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "postgres:99"
    result = carry_over(wanted(db), by_key(edited), db, CHECKSUM)
    assert find(result, "Deployment") == find(wanted(db), "Deployment")


def test_the_upgrade_pods_annotation_opts_into_the_current_template() -> None:
    db = make_db(annotations={UPGRADE_PODS: "true"})
    result = carry_over(wanted(db), by_key(earlier_deployment(db)), db, CHECKSUM)
    assert result == wanted(db)


def test_a_template_this_version_wrote_and_someone_edited_is_drift_not_kept() -> None:
    db = make_db()
    ours = copy.deepcopy(find(wanted(db), "Deployment"))
    ours["spec"]["template"]["spec"]["containers"][0]["image"] = "postgres:99"
    result = carry_over(wanted(db), by_key(ours), db, CHECKSUM)
    assert result == wanted(db)


def test_a_current_template_needs_nothing_kept() -> None:
    db = make_db()
    ours = find(wanted(db), "Deployment")
    assert carry_over(wanted(db), by_key(ours), db, CHECKSUM) == wanted(db)


def test_nothing_is_kept_unless_the_earlier_operator_had_acted_on_the_current_spec() -> None:
    for db in (
        make_db(generation=4, observed_generation=3),  # a change it had not seen
        make_db(phase="Failed"),  # it may not have written the children
        make_db(phase=None, observed_generation=None),
        make_db(paused=True),
    ):
        result = carry_over(wanted(db), by_key(earlier_deployment(db)), db, CHECKSUM)
        assert result == wanted(db), db.status


def test_a_template_rolled_for_other_credentials_is_not_kept() -> None:
    db = make_db()
    old = earlier_deployment(db)
    annotations = old["spec"]["template"]["metadata"]["annotations"]
    annotations["databases.example.com/credentials-checksum"] = "e" * 32
    assert carry_over(wanted(db), by_key(old), db, CHECKSUM) == wanted(db)


def test_a_primary_without_the_role_label_is_not_kept_beside_read_replicas() -> None:
    # The read-write Service would select the read replicas too.
    db = make_db(replicas=2)
    assert len([c for c in wanted(db) if c["kind"] == "Deployment"]) == 2
    result = carry_over(wanted(db), by_key(earlier_deployment(db)), db, CHECKSUM)
    assert result == wanted(db)


def test_a_mysql_with_several_servers_keeps_its_template_and_is_scaled_to_one() -> None:
    # 0.1.0 ran replicas: 2 as two unreplicated servers; mysql has no read replicas here.
    db = make_db(engine="mysql", replicas=2)
    old = earlier_deployment(db)
    old["spec"]["replicas"] = 2
    deployment = find(carry_over(wanted(db), by_key(old), db, CHECKSUM), "Deployment")
    assert deployment["spec"]["template"]["spec"] == old["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 1
