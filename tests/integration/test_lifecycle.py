"""The operator's own lifecycle: what happens around it rather than to a Database.

- a namespace being deleted refuses every create in it: expected, logged as such, not as errors;
- kube-apiserver gone for longer than any retry budget: the watches resume within seconds of
  its return, and /readyz says the operator cannot watch while it is gone;
- the Database CRD deleted and created again: the operator says it is not ready (it neither
  exits nor stays deaf) and watches again once the CRD is back.

The last two break the API server for everyone: they run on a control plane of their own.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from kubernetes import client

from tests.cluster import Cluster, wait_for
from tests.integration.conftest import RESYNC_S, start_operator

DATABASES = 10


def test_a_namespace_being_deleted_is_expected_not_an_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Not the namespace fixture: this namespace is deleted by the test, and stays Terminating
    # (no namespace controller runs here to empty it).
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        f"--namespace={namespace}",
        f"--resync-interval={RESYNC_S}",
        "--health-port=0",
        "--metrics-port=0",
    )
    try:
        names = [f"db-{index}" for index in range(DATABASES)]
        for name in names:
            cluster.create_db(namespace, name, {"engine": "redis"})
        wait_for(
            lambda: all(
                (cluster.get_db(namespace, name).get("status") or {}).get("observedGeneration")
                for name in names
            ),
            what="every Database reconciled",
        )
        cluster.core.delete_namespace(namespace)
        # What the namespace controller does first: it deletes the content, Secrets and
        # Deployments before the Databases, whose finalizer holds them a while.
        for name in names:
            cluster.core.delete_namespaced_secret(f"{name}-credentials", namespace)
            cluster.apps.delete_namespaced_deployment(name, namespace)
        deleted = time.monotonic()

        def refused() -> int:
            return sum(
                1
                for line in operator.log_lines()
                if "being terminated" in str(line.get("error", ""))
                or line["event"] == "namespace is being deleted: nothing is created in it"
            )

        wait_for(lambda: refused() >= DATABASES, what="a create refused for each Database")
        time.sleep(3 * RESYNC_S)  # and a few retries more
    finally:
        assert operator.stop() == 0, operator.log_text()[-3000:]
    lines = operator.log_lines()
    errors = [line for line in lines if line["level"] == "error"]
    print(
        f"namespace deleted under {DATABASES} Databases: {refused()} creates refused in "
        f"{time.monotonic() - deleted:.1f} s, {len(errors)} ERROR lines"
    )
    assert errors == [], errors[:3]
    for name in names:  # nothing written on them said they failed
        db = cluster.get_db(namespace, name)
        assert db["status"].get("phase") != "Failed", db["status"]
