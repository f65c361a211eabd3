"""The samples, as a user applies them, on a real node: every one Active with its containers
running, an application pod connects with the connection Secret and writes and reads, and the
read replicas really replicate (PostgreSQL streaming, Redis replicaof)."""

from __future__ import annotations

from functools import partial

from tests.cluster import Cluster, wait_for
from tests.realpods import Samples, client_pod, running_pods, until_answers, until_equal


def test_every_sample_is_active_with_its_containers_running(
    real_cluster: Cluster, samples: Samples
) -> None:
    ns = samples.namespace
    for name, wanted in samples.pods.items():
        db = real_cluster.get_db(ns, name)
        assert db["status"]["readyReplicas"] == wanted, name
        pods = running_pods(real_cluster, ns, name)
        assert len(pods) == wanted, f"{name}: {[p.metadata.name for p in pods]}"
        for pod in pods:
            for status in pod.status.container_statuses:
                assert status.state.running is not None, (pod.metadata.name, status.name)


def test_an_application_writes_and_reads_postgres_through_the_connection_secret_and_the_replica_streams_it(  # noqa: E501
    real_cluster: Cluster, samples: Samples
) -> None:
    ns = samples.namespace
    with client_pod(real_cluster, ns, samples.images["postgresql"], "orders-connection") as app:
        app.psql("CREATE TABLE orders (id int PRIMARY KEY, item text)")
        app.psql("INSERT INTO orders VALUES (1, 'written on the primary')")
        assert app.psql("SELECT item FROM orders") == "written on the primary"
        assert app.psql("SELECT pg_is_in_recovery()") == "f"

        # Through orders-replicas: a hot standby that streamed the row.
        assert app.psql("SELECT pg_is_in_recovery()", uri="read-only-uri") == "t"
        wait_for(
            lambda: (
                app.psql("SELECT item FROM orders", uri="read-only-uri", check=False)
                == "written on the primary"
            ),
            timeout=30,
            what="the row on the read replica",
        )
        streaming = app.psql("SELECT state FROM pg_stat_replication")
        assert streaming.splitlines() == ["streaming"]
        refused = app.psql("INSERT INTO orders VALUES (2, 'no')", uri="read-only-uri", check=False)
        assert "read-only transaction" in refused


def test_an_application_writes_on_redis_and_every_replica_serves_the_key(
    real_cluster: Cluster, samples: Samples
) -> None:
    ns = samples.namespace
    with client_pod(real_cluster, ns, samples.images["redis"], "sessions-connection") as app:
        assert app.redis("SET", "session:1", "alice") == "OK"
        assert app.redis("GET", "session:1") == "alice"
        assert app.redis("ROLE").splitlines()[0] == "master"
        # Each replica pod, by its own address: each follows the primary's Service.
        replicas = running_pods(real_cluster, ns, "sessions", role="replica")
        assert len(replicas) == 2
        for pod in replicas:
            address = pod.status.pod_ip
            until_equal(
                partial(app.redis_at, address, "GET", "session:1"),
                "alice",
                what=f"the key on {pod.metadata.name}",
            )
            info = app.redis_at(address, "INFO", "replication", check=True)
            assert "role:slave" in info
            assert "master_link_status:up" in info
            assert f"master_host:sessions.{ns}.svc" in info
        refused = app.redis("SET", "x", "1", uri="read-only-uri", check=False)
        assert "READONLY" in refused


def test_an_application_writes_and_reads_mysql_through_the_connection_secret(
    real_cluster: Cluster, samples: Samples
) -> None:
    ns = samples.namespace
    with client_pod(real_cluster, ns, samples.images["mariadb"], "inventory-connection") as app:
        until_answers(lambda: app.mysql("SELECT 1"), what="MySQL through its Service")
        app.mysql("CREATE TABLE stock (sku varchar(20) PRIMARY KEY, count int)")
        app.mysql("INSERT INTO stock VALUES ('apple', 12)")
        assert app.mysql("SELECT count FROM stock WHERE sku = 'apple'") == "12"
