"""A Database's life on a real node, as its users live it: scaled up and down with real
replication each time, its primary's pod deleted and its engine killed (it comes back on its
volume with the data), its credentials rotated (the pods roll, the new password works and the
old one is refused)."""

from __future__ import annotations

import base64
import secrets
from functools import partial
from typing import Any

from tests.cluster import Cluster, condition, wait_for
from tests.realnode import RealCluster
from tests.realpods import (
    ClientPod,
    client_pod,
    describe,
    on_local_images,
    pods_of,
    running_pods,
    until_answers,
    until_equal,
    wait_active,
)


def create(
    cluster: Cluster, namespace: str, name: str, images: dict[str, str], **spec: Any
) -> None:
    body = on_local_images({"metadata": {"name": name}, "spec": spec}, images)
    cluster.create_db(namespace, name, body["spec"])


def streaming_replicas(app: ClientPod) -> list[str]:
    return app.psql("SELECT state FROM pg_stat_replication").splitlines()


def test_scaling_one_to_three_to_one_replicates_for_real_each_time(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str]
) -> None:
    ns = user_namespace
    create(real_cluster, ns, "ledger", images, engine="postgres", storage={"size": "1Gi"})
    create(real_cluster, ns, "cache", images, engine="redis", replicas=1)
    wait_active(real_cluster, ns, "ledger")
    wait_active(real_cluster, ns, "cache")
    with (
        client_pod(real_cluster, ns, images["postgresql"], "ledger-connection", "pg") as pg,
        client_pod(real_cluster, ns, images["redis"], "cache-connection", "redis") as redis,
    ):
        pg.psql("CREATE TABLE entries (id int)")
        pg.psql("INSERT INTO entries SELECT generate_series(1, 100)")
        redis.redis("SET", "greeting", "hello")
        assert streaming_replicas(pg) == []

        for name in ("ledger", "cache"):
            real_cluster.patch_db(ns, name, {"spec": {"replicas": 3}})
        wait_active(real_cluster, ns, "ledger")
        wait_active(real_cluster, ns, "cache")
        assert len(running_pods(real_cluster, ns, "ledger", role="replica")) == 2
        wait_for(
            lambda: streaming_replicas(pg) == ["streaming", "streaming"],
            timeout=30,
            what="two standbys streaming from the primary",
        )
        pg.psql("INSERT INTO entries VALUES (101)")
        for pod in running_pods(real_cluster, ns, "ledger", role="replica"):
            # Each standby, by its own address: both have every row.
            until_equal(
                partial(pg.psql_at, pod.status.pod_ip, "SELECT count(*) FROM entries"),
                "101",
                what=f"the rows on {pod.metadata.name}",
            )
        cache_replicas = running_pods(real_cluster, ns, "cache", role="replica")
        assert len(cache_replicas) == 2
        for pod in cache_replicas:
            until_equal(
                partial(redis.redis_at, pod.status.pod_ip, "GET", "greeting"),
                "hello",
                what=f"the key on {pod.metadata.name}",
            )

        for name in ("ledger", "cache"):
            real_cluster.patch_db(ns, name, {"spec": {"replicas": 1}})
        wait_active(real_cluster, ns, "ledger")
        wait_active(real_cluster, ns, "cache")
        wait_for(
            lambda: not pods_of(real_cluster, ns, "ledger", role="replica"),
            timeout=60,
            what="the standbys gone",
        )
        wait_for(lambda: streaming_replicas(pg) == [], timeout=30, what="no standby streaming")
        assert pg.psql("SELECT count(*) FROM entries") == "101"
        assert redis.redis("GET", "greeting") == "hello"
        connection = real_cluster.core.read_namespaced_secret("ledger-connection", ns)
        assert "read-only-uri" not in connection.data


def test_the_primary_comes_back_on_its_volume_with_its_data_after_its_pod_is_deleted_and_its_engine_killed(  # noqa: E501
    real_cluster: Cluster, user_namespace: str, images: dict[str, str], real_node: RealCluster
) -> None:
    ns = user_namespace
    create(real_cluster, ns, "durable", images, engine="postgres", storage={"size": "1Gi"})
    wait_active(real_cluster, ns, "durable")
    with client_pod(real_cluster, ns, images["postgresql"], "durable-connection") as app:
        app.psql("CREATE TABLE kept (note text)")
        app.psql("INSERT INTO kept VALUES ('survives')")
        (first,) = pods_of(real_cluster, ns, "durable")

        # The pod deleted while no replacement can be scheduled (the node cordoned): the
        # Database says its primary is lost for as long as it is. Then a new pod mounts the
        # same volume (the kubelet gives it to the pod's group again; PostgreSQL still finds
        # its data directory 0700).
        node = real_node.node_name
        real_cluster.kubectl("cordon", node)
        try:
            real_cluster.core.delete_namespaced_pod(first.metadata.name, ns)
            lost = wait_for(
                partial(_degraded, real_cluster, ns, "durable"),
                timeout=60,
                interval=0.5,
                what="the Database Degraded while its primary is gone",
            )
            assert lost["status"]["primaryReady"] is False
        finally:
            real_cluster.kubectl("uncordon", node)
        wait_for(
            partial(_replaced, real_cluster, ns, "durable", {first.metadata.uid}),
            timeout=120,
            interval=1,
            what="the primary's replacement pod running",
        )
        wait_active(real_cluster, ns, "durable")
        (second,) = running_pods(real_cluster, ns, "durable")
        assert second.metadata.uid != first.metadata.uid
        assert until_answers(lambda: app.psql("SELECT note FROM kept")) == "survives"

        # The engine killed inside its container: the kubelet restarts the container, and the
        # server recovers from its WAL.
        engine = next(s for s in second.status.container_statuses if s.name == "postgres")
        real_node.ctr("tasks", "kill", "--signal", "SIGKILL", engine.container_id.split("//")[1])
        wait_for(
            lambda: any(
                s.name == "postgres" and s.restart_count == engine.restart_count + 1 and s.ready
                for p in running_pods(real_cluster, ns, "durable")
                for s in p.status.container_statuses
            ),
            timeout=120,
            interval=1,
            what="the engine's container restarted and ready",
        )
        assert until_answers(lambda: app.psql("SELECT note FROM kept")) == "survives"
        app.psql("INSERT INTO kept VALUES ('after the crash')")
        assert app.psql("SELECT count(*) FROM kept") == "2"
        db = wait_active(real_cluster, ns, "durable")
        degraded = condition(db, "Degraded")
        assert degraded is not None and degraded["status"] == "False"


def _degraded(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The Database, once Degraded with its primary lost."""
    db = cluster.get_db(namespace, name)
    degraded = condition(db, "Degraded") or {}
    lost = degraded.get("status") == "True" and degraded.get("reason") == "PrimaryUnavailable"
    return db if db["status"].get("phase") == "Degraded" and lost else None


def _password(cluster: Cluster, namespace: str, secret: str) -> str:
    data = cluster.core.read_namespaced_secret(secret, namespace).data
    return base64.b64decode(data["password"]).decode()


def _template_checksums(cluster: Cluster, namespace: str, name: str) -> str:
    deployment = cluster.apps.read_namespaced_deployment(name, namespace)
    annotations = deployment.spec.template.metadata.annotations or {}
    return str(annotations.get("databases.example.com/credentials-checksum"))


def _rolled(cluster: Cluster, namespace: str, name: str, checksum: str) -> bool:
    return _template_checksums(cluster, namespace, name) != checksum


def _replaced(cluster: Cluster, namespace: str, name: str, before: set[str]) -> bool:
    """As many pods running as before, and none of those from before left."""
    now = {pod.metadata.uid for pod in pods_of(cluster, namespace, name)}
    return len(running_pods(cluster, namespace, name)) == len(before) and not now & before


def _link_up(client: ClientPod, address: str) -> bool:
    return "master_link_status:up" in client.redis_at(address, "INFO", "replication")


def test_rotated_credentials_roll_the_pods_the_new_password_works_and_the_old_one_is_refused(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str]
) -> None:
    ns = user_namespace
    create(real_cluster, ns, "tokens", images, engine="redis", replicas=2)
    create(real_cluster, ns, "accounts", images, engine="postgres", storage={"size": "1Gi"})
    wait_active(real_cluster, ns, "tokens")
    wait_active(real_cluster, ns, "accounts")
    old = {
        name: _password(real_cluster, ns, f"{name}-credentials") for name in ("tokens", "accounts")
    }
    new = {name: secrets.token_urlsafe(24) for name in old}
    before = {name: {p.metadata.uid for p in pods_of(real_cluster, ns, name)} for name in old}
    checksums = {name: _template_checksums(real_cluster, ns, name) for name in old}

    with client_pod(real_cluster, ns, images["postgresql"], "accounts-connection", "pg") as pg:
        pg.psql("CREATE TABLE balances (amount int)")
        pg.psql("INSERT INTO balances VALUES (42)")
        # PostgreSQL reads the password from its environment only when it initialises an empty
        # data directory: on existing data it is changed in the engine first (docs/operations.md).
        # The new password reaches psql on its standard input, never its command line.
        # The statement, with the new password, goes on psql's standard input, never on its
        # command line.
        pg.sh(
            'PGPASSWORD="$(cat /bindings/db/password)" exec psql -X -q -v ON_ERROR_STOP=1 '
            '-h "$(cat /bindings/db/host)" -U "$(cat /bindings/db/username)" '
            '-d "$(cat /bindings/db/database)" -f -',
            stdin=f"ALTER ROLE CURRENT_USER PASSWORD '{new['accounts']}';\n",
        )
    for name in old:
        real_cluster.core.patch_namespaced_secret(
            f"{name}-credentials", ns, {"stringData": {"password": new[name]}}
        )
    for name in old:
        wait_for(
            partial(_rolled, real_cluster, ns, name, checksums[name]),
            timeout=60,
            what=f"{name}'s pods to roll onto the new credentials",
        )
        wait_active(real_cluster, ns, name)
        wait_for(
            partial(_replaced, real_cluster, ns, name, before[name]),
            timeout=120,
            what=f"every pod of {name} replaced",
        )

    # The connection Secret follows: an application with it gets in; the old password does not.
    with client_pod(real_cluster, ns, images["redis"], "tokens-connection", "redis") as redis:
        assert until_answers(lambda: redis.redis("PING")) == "PONG"
        refused = redis.sh(
            'read -r old; REDISCLI_AUTH="$old" redis-cli --no-auth-warning '
            '-h "$(cat /bindings/db/host)" PING 2>&1',
            stdin=old["tokens"],
            check=False,
        )
        assert "WRONGPASS" in refused
        for pod in running_pods(real_cluster, ns, "tokens", role="replica"):
            # The replica authenticates to the primary with the new one (masterauth).
            try:
                wait_for(
                    partial(_link_up, redis, pod.status.pod_ip),
                    timeout=60,
                    what=f"{pod.metadata.name} following the primary",
                )
            except AssertionError as error:
                raise AssertionError(f"{error}\n{describe(real_cluster, ns, 'tokens')}") from None
    with client_pod(real_cluster, ns, images["postgresql"], "accounts-connection", "pg2") as pg:
        assert until_answers(lambda: pg.psql("SELECT amount FROM balances")) == "42"
        refused = pg.sh(
            'read -r PGPASSWORD; export PGPASSWORD; psql -X -h "$(cat /bindings/db/host)" '
            '-U "$(cat /bindings/db/username)" -d "$(cat /bindings/db/database)" '
            '-c "SELECT 1" 2>&1',
            stdin=old["accounts"],
            check=False,
        )
        assert "password authentication failed" in refused
