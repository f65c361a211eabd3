"""Instances that fail over (spec.failover), on a real node, with a client writing throughout.

Each story starts a PostgreSQL Database of three instances, each on its own volume, and a
client pod that inserts a numbered row every 0.1 s through the primary's Service, noting each
insert the server acknowledged. A sampler on the host asks every instance's engine, twice a
second, whether it accepts writes. Then the primary is lost, and the story measures what the
issue's budgets are about: writes resume within 20 s, the most advanced replica is promoted,
no two instances accept writes at the same moment, the old primary is back as a replica within
60 s, and every acknowledged write is on the new primary.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from database_operator.engines import Engine, facts
from database_operator.failover import probe
from tests.cluster import Cluster, wait_for
from tests.controlplane import ROOT
from tests.realnode import RealCluster
from tests.realpods import (
    BINDING,
    LOCAL_HOME,
    ClientPod,
    client_pod,
    describe,
    on_local_images,
    pods_of,
    until_answers,
    wait_active,
)

#: The issue's budgets (CloudNativePG's e2e budgets).
WRITES_RESUME_S = 20
REJOINS_S = 60
INSTANCE_LABEL = "databases.example.com/instance"
SINCE = "databases.example.com/primary-since"

# Writes 1, 2, 3... through the binding's URI, one connection each, for $1 seconds; says
# "ok N T" for each the server acknowledged and "fail N T" for each it did not. PostgreSQL:
# a row of the table writes; Redis: a member of the set writes.
LOOP = """\
end=$(( $(date +%s) + $1 ))
i=0
while [ "$(date +%s)" -lt "$end" ]; do
  i=$((i + 1))
  if write "$i" >/dev/null 2>&1; then
    echo "ok $i $(date +%s.%N)"
  else
    echo "fail $i $(date +%s.%N)"
  fi
  sleep 0.1
done
"""
WRITERS = {
    Engine.POSTGRES: f"""\
uri="$(sed -E 's#^([a-z]+://[^:@/]*):[^@]*@#\\1@#' {BINDING}/uri)"
export PGPASSWORD="$(cat {BINDING}/password)" PGCONNECT_TIMEOUT=3
write() {{ psql -X -q -v ON_ERROR_STOP=1 -d "$uri" -c "INSERT INTO writes VALUES ($1)"; }}
"""  # noqa: S608 - the row's number is the loop's own integer
    + LOOP,
    Engine.REDIS: f"""\
uri="$(sed -E 's#^([a-z]+://)[^@/]*@#\\1#' {BINDING}/uri)"
export REDISCLI_AUTH="$(cat {BINDING}/password)"
write() {{ [ "$(timeout 3 redis-cli --no-auth-warning -u "$uri" SADD writes "$1")" = 1 ]; }}
"""
    + LOOP,
}


#: Where the writer keeps its lines in the client pod (read back with `kubectl exec cat`: a
#: stream held open for minutes is not what is being tested).
WRITES_LOG = "/tmp/writes.log"  # noqa: S108 - the client pod's own /tmp


@dataclass
class Writes:
    """What the writer said: (acknowledged, number, time) in order, as last read."""

    app: ClientPod
    lines: list[tuple[bool, int, float]] = field(default_factory=list)

    def read(self) -> Writes:
        """Read the writer's lines again (a line being written is left for the next read)."""
        found = []
        for line in self.app.sh(f"cat {WRITES_LOG}", check=False).splitlines():
            word, _, rest = line.partition(" ")
            number, _, when = rest.partition(" ")
            if word in ("ok", "fail") and number.isdigit() and when:
                found.append((word == "ok", int(number), float(when)))
        self.lines = found
        return self

    @property
    def acknowledged(self) -> set[int]:
        return {number for ok, number, _ in self.lines if ok}

    def first_acknowledged_after(self, at: float) -> float | None:
        return next((when for ok, _, when in self.lines if ok and when > at), None)

    def interruption(self, start: float, end: float) -> float:
        """The longest silence between two acknowledged writes that ends after ``start`` and
        by ``end``: how long writes stopped (a write that hangs counts, not only one that
        fails)."""
        oks = sorted(when for ok, _, when in self.lines if ok and start - 10 <= when <= end)
        return max((b - a for a, b in itertools.pairwise(oks) if b > start), default=end - start)


@contextmanager
def writing(app: ClientPod, seconds: int, engine: Engine = Engine.POSTGRES) -> Iterator[Writes]:
    """The writer running in the client pod for ``seconds``, its lines in WRITES_LOG."""
    proc = subprocess.Popen(
        [str(ROOT / "bin" / "kubectl"), "exec", "-n", app.namespace, app.name, "--",
         "sh", "-c", f"{{ {WRITERS[engine]}}} > {WRITES_LOG} 2>&1", "sh", str(seconds)],
        env={"KUBECONFIG": str(app.cluster.kubeconfig), "HOME": str(LOCAL_HOME),
             "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield Writes(app)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@dataclass
class Sampler:
    """How many instances accepted writes at once, at most, and at each sample."""

    most: int = 0
    samples: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


@contextmanager
def sampling(
    cluster: Cluster, namespace: str, name: str, engine: Engine = Engine.POSTGRES
) -> Iterator[Sampler]:
    """Twice a second, every instance's engine asked from the host (the node) whether it
    accepts writes, as the operator asks it."""
    secret = cluster.core.read_namespaced_secret(f"{name}-credentials", namespace).data
    login = probe.Credentials(
        base64.b64decode(secret.get("username", "")).decode(),
        base64.b64decode(secret["password"]).decode(),
    )
    sampler = Sampler()

    def addresses() -> list[str]:
        return [
            pod.status.pod_ip
            for pod in pods_of(cluster, namespace, name)
            if pod.status.pod_ip and pod.status.phase == "Running"
        ]

    async def primaries() -> int:
        states = await asyncio.gather(
            *(probe.ask(engine, ip, facts(engine).port, login) for ip in addresses())
        )
        return sum(1 for state in states if state is not None and not state.standby)

    def run() -> None:
        while not sampler.stop.is_set():
            count = asyncio.run(primaries())
            sampler.most, sampler.samples = max(sampler.most, count), sampler.samples + 1
            sampler.stop.wait(0.5)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield sampler
    finally:
        sampler.stop.set()
        thread.join(timeout=10)


def instances_settled(
    cluster: Cluster, namespace: str, name: str, count: int = 3
) -> dict[str, Any] | None:
    """The Database once one instance is the confirmed primary and the others streaming
    replicas, all ready (three of them, or ``count``)."""
    db = cluster.get_db(namespace, name)
    status = db.get("status") or {}
    instances = status.get("instances") or []
    roles = sorted(instance["role"] for instance in instances)
    ready = all(instance["ready"] for instance in instances)
    # Replicas that stream: a replica still in its first sync has none of the data yet.
    ready = ready and all(i.get("streaming") for i in instances if i["role"] == "replica")
    primary = status.get("currentPrimary")
    if roles == ["primary"] + ["replica"] * (count - 1) and ready and primary:
        return db
    return None


@dataclass
class Act:
    """What one loss (or switchover) of the primary measured."""

    what: str
    old: str
    new: str
    #: Seconds from the act's start to the new primary in the status; the longest silence
    #: between two acknowledged writes around it.
    promoted: float
    resumed: float
    #: Seconds from the act's start to the old primary back as a ready replica (None: not
    #: waited for: it stayed the primary).
    rejoined: float | None

    def __str__(self) -> str:
        back = (
            ""
            if self.rejoined is None
            else f", {self.old} back as a replica after {self.rejoined:.1f}s"
        )
        return (
            f"{self.what}: {self.old} -> {self.new}: primary in the status after "
            f"{self.promoted:.1f}s, writes stopped for {self.resumed:.1f}s at most{back}"
        )


def primary_pod(cluster: Cluster, namespace: str, name: str, instance: str) -> Any:
    (pod,) = [
        p
        for p in pods_of(cluster, namespace, name)
        if p.metadata.labels.get(INSTANCE_LABEL) == instance and not p.metadata.deletion_timestamp
    ]
    return pod


def create_instances(
    cluster: Cluster, namespace: str, name: str, images: dict[str, str], **spec: Any
) -> dict[str, Any]:
    """A Database of three instances with storage and ``spec`` on top, once its primary and
    replicas are settled (streaming)."""
    body = on_local_images(
        {
            "metadata": {"name": name},
            "spec": {"replicas": 3, "storage": {"size": "1Gi"}, **spec},
        },
        images,
    )
    cluster.create_db(namespace, name, body["spec"])
    wait_active(cluster, namespace, name, timeout_s=240)
    try:
        return wait_for(
            lambda: instances_settled(cluster, namespace, name),
            timeout=60,
            interval=1,
            what="one primary and two streaming replicas",
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n{describe(cluster, namespace, name)}") from None


def freezer(
    cluster: Cluster, node: RealCluster, namespace: str, name: str, engine: Engine
) -> Callable[[str], None]:
    """Stops every process of an instance's engine container: its pod runs, its server answers
    nothing (a node that stopped serving it, as seen from the network)."""

    def freeze(instance: str) -> None:
        pod = primary_pod(cluster, namespace, name, instance)
        found = next(s for s in pod.status.container_statuses if s.name == engine.value)
        container = found.container_id.split("//")[1]
        node.ctr("tasks", "kill", "--all", "--signal", "SIGSTOP", container)

    return freeze


def deleter(cluster: Cluster, namespace: str, name: str) -> Callable[[str], None]:
    """Deletes an instance's pod (its Deployment makes another at once, on the same volume)."""

    def delete(instance: str) -> None:
        pod = primary_pod(cluster, namespace, name, instance)
        cluster.core.delete_namespaced_pod(pod.metadata.name, namespace)

    return delete


def lose_primary(
    cluster: Cluster,
    namespace: str,
    name: str,
    writes: Writes,
    *,
    what: str,
    lose: Any,
    may_stay: bool = False,
) -> Act:
    """Lose the current primary by ``lose(old_instance)``; wait for writes to resume and for a
    primary in the status, then for the old one to be back as a replica. ``may_stay``: the old
    instance may come back as the primary before the failover's delay (a deleted pod's
    replacement starts at once on its volume), which is no failure."""
    old = cluster.get_db(namespace, name)["status"]["currentPrimary"]
    began = time.time()
    lose(old)
    try:
        promoted = wait_for(
            lambda: _new_primary(cluster, namespace, name, None if may_stay else old),
            timeout=90,
            interval=0.5,
            what=f"a primary in the status after {what}",
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n{failover_story(cluster, namespace, name)}") from None
    promoted_at = time.time()
    flowing = wait_for(
        lambda: writes.read().first_acknowledged_after(max(promoted_at, began + 1)),
        timeout=60,
        interval=0.5,
        what=f"writes acknowledged again after {what}",
    )
    resumed = writes.interruption(began, flowing)
    new = promoted["status"]["currentPrimary"]
    if new == old:
        return Act(what, old, new, promoted_at - began, resumed, None)
    wait_for(
        lambda: _rejoined(cluster, namespace, name, old),
        timeout=REJOINS_S + 60,
        interval=1,
        what=f"{old} back as a replica",
    )
    return Act(what, old, new, promoted_at - began, resumed, time.time() - began)


def test_the_primary_lost_or_moved_writes_resume_within_budget_and_nothing_acknowledged_is_lost(  # noqa: PLR0915
    real_cluster: Cluster, user_namespace: str, images: dict[str, str], real_node: RealCluster
) -> None:
    """Five acts on one Database of three instances, a client writing throughout: its
    primary's container frozen (a failover: the most advanced replica is promoted), a
    switchover back with `kubectl database switchover --wait`, its primary's pod deleted, its
    primary's engine killed, and a rollout of a minor version (replicas first, the primary
    last)."""
    ns, name = user_namespace, "orders"
    settled = create_instances(
        real_cluster, ns, name, images, engine="postgres", failover={"enabled": True}
    )
    assert settled["status"]["currentPrimary"] == f"{name}-1"
    acts: list[Act] = []
    freeze = freezer(real_cluster, real_node, ns, name, Engine.POSTGRES)
    delete = deleter(real_cluster, ns, name)

    def switch_back(instance: str) -> None:
        del instance
        done = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "kubectl-database"), "switchover", name,
             "--to", f"{name}-1", "-n", ns, "--wait", "--timeout", "60s",
             "--kubeconfig", str(real_cluster.kubeconfig)],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"primary: {name}-1" in done.stdout

    def roll(instance: str) -> None:
        # A minor version: the same server under the tag a patch release would have (this
        # host has one PostgreSQL 15 build), so every pod's image changes.
        del instance
        image = images["postgresql"]
        minor = f"{image.rsplit(':', 1)[0]}:15.99"
        real_node.ctr("images", "tag", "--force", image, minor)
        real_cluster.patch_db(ns, name, {"spec": {"version": "15.99", "image": minor}})

    def kill_engine(instance: str) -> None:
        # The server killed in its container: the kubelet restarts the container, which reads
        # its target (itself) again and recovers from its WAL.
        pod = primary_pod(real_cluster, ns, name, instance)
        engine = next(s for s in pod.status.container_statuses if s.name == "postgres")
        real_node.ctr("tasks", "kill", "--signal", "SIGKILL", engine.container_id.split("//")[1])

    with client_pod(real_cluster, ns, images["postgresql"], f"{name}-connection") as app:
        app.psql("CREATE TABLE writes (id int PRIMARY KEY)")
        with sampling(real_cluster, ns, name) as sampler, writing(app, 600) as writes:
            wait_for(
                lambda: len(writes.read().acknowledged) >= 10, timeout=30, what="writes flowing"
            )
            acts.append(
                lose_primary(real_cluster, ns, name, writes, what="primary frozen", lose=freeze)
            )
            clean_from = max(number for _, number, _ in writes.read().lines)
            acts.append(
                lose_primary(real_cluster, ns, name, writes, what="switchover", lose=switch_back)
            )
            acts.append(
                lose_primary(
                    real_cluster, ns, name, writes, what="pod deleted", lose=delete, may_stay=True
                )
            )
            acts.append(
                lose_primary(
                    real_cluster, ns, name, writes, what="engine killed", lose=kill_engine,
                    may_stay=True,
                )
            )  # fmt: skip
            primary_before = real_cluster.get_db(ns, name)["status"]["currentPrimary"]
            rolled_from = time.time()
            acts.append(lose_primary(real_cluster, ns, name, writes, what="rollout", lose=roll))
            try:
                order = wait_for(
                    lambda: _rolled_out(real_cluster, ns, name, rolled_from),
                    timeout=180,
                    interval=1,
                    what="every instance rolled out",
                )
            except AssertionError as error:
                raise AssertionError(f"{error}\n{describe(real_cluster, ns, name)}") from None
            time.sleep(2)
        writes.read()
        rows = {int(n) for n in until_answers(lambda: app.psql("SELECT id FROM writes")).split()}
    lost = writes.acknowledged - rows
    events = real_cluster.kubectl(
        "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}",
        "--sort-by=.lastTimestamp", "-o", "custom-columns=REASON:.reason,MESSAGE:.message",
        check=False,
    )  # fmt: skip
    print(
        "\n" + "\n".join(str(act) for act in acts) + f"\n{len(writes.acknowledged)} writes "
        f"acknowledged, {len(lost)} lost {sorted(lost)}; at most {sampler.most} primary at once "
        f"in {sampler.samples} samples\n{events}"
    )
    frozen, switched, deleted, _killed, rolled = acts
    print(f"rollout order: {order}")
    # Replicas first, one at a time; the primary last, after a switchover.
    assert order[-1] == primary_before, order
    assert rolled.old == primary_before and rolled.new != primary_before
    # The failover: the most advanced replica (both are close; either may be), within budget.
    assert frozen.new != frozen.old
    assert "FailoverStarted" in events and "Promoted" in events and "SwitchoverStarted" in events
    for act in acts:
        assert act.resumed <= WRITES_RESUME_S, act
        assert act.rejoined is None or act.rejoined <= REJOINS_S + WRITES_RESUME_S, act
    assert frozen.rejoined is not None and switched.rejoined is not None
    assert switched.new == f"{name}-1"
    assert sampler.most == 1
    # Asynchronous replication: a write acknowledged just before the freeze may not have
    # reached the replica promoted (the note says how many). A clean stop loses none.
    assert len(lost) <= 5, sorted(lost)
    assert not {number for number in lost if number > clean_from}, sorted(lost)
    assert deleted.old == f"{name}-1"


#: The Events a failover tells its story with.
FAILOVER_REASONS = {
    "FailoverStarted", "FailoverImpossible", "InstanceFenced", "Promoted", "SwitchoverStarted",
    "SwitchoverImpossible",
}  # fmt: skip


def failover_story(cluster: Cluster, namespace: str, name: str) -> str:
    """A few lines that say where a failover stands: the target the pods read, the status's
    instances, every pod (a fenced one still terminating holds the promotion back), and the
    failover's Events. Short, so that a CI log's assertion line carries all of it."""
    config = cluster.core.read_namespaced_config_map(f"{name}-instances", namespace)
    status = cluster.get_db(namespace, name).get("status") or {}
    lines = [
        f"target {config.data} since {(config.metadata.annotations or {}).get(SINCE)}; "
        f"status currentPrimary={status.get('currentPrimary')} "
        f"targetPrimary={status.get('targetPrimary')}"
    ]
    for instance in status.get("instances") or []:
        lines.append("  instance " + " ".join(f"{k}={v}" for k, v in instance.items()))
    for pod in pods_of(cluster, namespace, name):
        meta, state = pod.metadata, pod.status
        containers = [
            f"{s.name}:{'ready' if s.ready else 'unready'}:restarts={s.restart_count}:"
            + ",".join(k for k, v in s.state.to_dict().items() if v)
            for s in state.container_statuses or []
        ]
        lines.append(
            f"  pod {meta.name} {meta.labels.get(INSTANCE_LABEL)} role="
            f"{meta.labels.get('databases.example.com/role')} {state.phase} ip={state.pod_ip} "
            f"created={meta.creation_timestamp:%H:%M:%S} deleting="
            f"{meta.deletion_timestamp and f'{meta.deletion_timestamp:%H:%M:%S}'} {containers}"
        )
    for event in cluster.core.list_namespaced_event(namespace).items:
        if event.reason in FAILOVER_REASONS:
            when = event.last_timestamp or event.event_time
            lines.append(f"  event {when:%H:%M:%S} {event.reason}: {event.message}")
    return "\n".join(lines)


def _new_primary(
    cluster: Cluster, namespace: str, name: str, old: str | None
) -> dict[str, Any] | None:
    """The Database once its status names a primary other than ``old`` (None: any)."""
    db = cluster.get_db(namespace, name)
    current = (db.get("status") or {}).get("currentPrimary")
    return db if current and current != old else None


def _rejoined(cluster: Cluster, namespace: str, name: str, old: str) -> dict[str, Any] | None:
    db = cluster.get_db(namespace, name)
    for instance in (db.get("status") or {}).get("instances") or []:
        if instance["name"] == old and instance["role"] == "replica" and instance["ready"]:
            return db
    return None


def test_a_frozen_redis_master_is_replaced_and_comes_back_as_a_replica(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str], real_node: RealCluster
) -> None:
    """Redis, three instances, a client adding to a set throughout: its master's container
    frozen (the most advanced replica promoted, the other replica follows it at once), then its
    master's pod deleted."""
    ns, name = user_namespace, "sessions"
    create_instances(real_cluster, ns, name, images, engine="redis", failover={"enabled": True})
    freeze = freezer(real_cluster, real_node, ns, name, Engine.REDIS)
    delete = deleter(real_cluster, ns, name)

    redis = Engine.REDIS
    with client_pod(real_cluster, ns, images["redis"], f"{name}-connection", "redis") as app:
        with (
            sampling(real_cluster, ns, name, redis) as sampler,
            writing(app, 400, redis) as writes,
        ):
            wait_for(
                lambda: len(writes.read().acknowledged) >= 10, timeout=30, what="writes flowing"
            )
            frozen = lose_primary(real_cluster, ns, name, writes, what="master frozen", lose=freeze)
            clean_from = max(number for _, number, _ in writes.read().lines)
            deleted = lose_primary(
                real_cluster, ns, name, writes, what="pod deleted", lose=delete, may_stay=True
            )
            time.sleep(2)
        writes.read()
        members = until_answers(lambda: app.redis("SMEMBERS", "writes"))
    kept = {int(member) for member in members.split()}
    lost = writes.acknowledged - kept
    print(
        f"\n{frozen}\n{deleted}\n{len(writes.acknowledged)} writes acknowledged, {len(lost)} "
        f"lost {sorted(lost)}; at most {sampler.most} master at once in {sampler.samples} samples"
    )
    assert frozen.new != frozen.old and frozen.rejoined is not None
    for act in (frozen, deleted):
        assert act.resumed <= WRITES_RESUME_S, act
        assert act.rejoined is None or act.rejoined <= REJOINS_S + WRITES_RESUME_S, act
    assert sampler.most == 1
    assert len(lost) <= 5, sorted(lost)
    # A master stopped cleanly has sent its replicas all it acknowledged... unless its
    # replacement is chosen before they had it: Redis's replication is asynchronous.
    print(f"lost after the clean stop: {sorted(n for n in lost if n > clean_from)}")


def _rolled_out(cluster: Cluster, namespace: str, name: str, since: float) -> list[str] | None:
    """The instances in the order their pods were replaced after ``since``, once every pod is
    new, ready and in its role again (None before)."""
    db = cluster.get_db(namespace, name)
    if instances_settled(cluster, namespace, name) is None:
        return None
    progressing = next(
        (c for c in db["status"].get("conditions") or [] if c["type"] == "Progressing"), None
    )
    if progressing is None or progressing["status"] != "False":
        return None
    pods = [p for p in pods_of(cluster, namespace, name) if not p.metadata.deletion_timestamp]
    if any(p.metadata.creation_timestamp.timestamp() < since - 1 for p in pods):
        return None
    pods.sort(key=lambda p: p.metadata.creation_timestamp)
    return [p.metadata.labels[INSTANCE_LABEL] for p in pods]


def test_in_zero_loss_mode_a_frozen_primary_loses_no_acknowledged_write(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str], real_node: RealCluster
) -> None:
    """spec.failover.synchronous: a commit is acknowledged once a replica has it, so the
    promoted replica (the most advanced) has every write the client was told of."""
    ns, name = user_namespace, "ledger"
    failover = {"enabled": True, "synchronous": True}
    create_instances(real_cluster, ns, name, images, engine="postgres", failover=failover)
    freeze = freezer(real_cluster, real_node, ns, name, Engine.POSTGRES)

    with client_pod(real_cluster, ns, images["postgresql"], f"{name}-connection") as app:
        assert app.psql("SHOW synchronous_standby_names") == "ANY 1 (*)"
        app.psql("CREATE TABLE writes (id int PRIMARY KEY)")
        with writing(app, 300) as writes:
            wait_for(
                lambda: len(writes.read().acknowledged) >= 20, timeout=60, what="writes flowing"
            )
            frozen = lose_primary(
                real_cluster, ns, name, writes, what="primary frozen", lose=freeze
            )
            time.sleep(2)
        writes.read()
        rows = {int(n) for n in until_answers(lambda: app.psql("SELECT id FROM writes")).split()}
    lost = writes.acknowledged - rows
    print(f"\nzero-loss mode, {frozen}\n{len(writes.acknowledged)} acknowledged, {len(lost)} lost")
    assert frozen.new != frozen.old
    assert frozen.resumed <= WRITES_RESUME_S, frozen
    assert lost == set(), sorted(lost)


#: Seconds the kubelet stays stopped after the operator fenced the primary: well inside the
#: node's 40 s grace (a NotReady node would evict every pod of the test).
KUBELET_AWAY_S = 12


def _events(cluster: Cluster, namespace: str, name: str) -> str:
    return cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}",
        "-o", "custom-columns=REASON:.reason,MESSAGE:.message", check=False,
    )  # fmt: skip


def test_a_primary_whose_kubelet_stopped_is_replaced_only_once_its_pod_is_gone(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str], real_node: RealCluster
) -> None:
    """The primary's container frozen and the node's kubelet stopped (a node that serves
    nothing and answers nothing): the operator names a new target and deletes the old pod,
    but the pod stays (no kubelet to stop it) and may still accept writes, so nothing is
    promoted. Once the kubelet is back and the pod gone, the promotion follows."""
    ns, name = user_namespace, "stock"
    create_instances(real_cluster, ns, name, images, engine="postgres", failover={"enabled": True})
    freeze = freezer(real_cluster, real_node, ns, name, Engine.POSTGRES)
    kubelet = real_node.processes["kubelet"].pid
    with client_pod(real_cluster, ns, images["postgresql"], f"{name}-connection") as app:
        app.psql("CREATE TABLE writes (id int PRIMARY KEY)")
        with sampling(real_cluster, ns, name) as sampler, writing(app, 300) as writes:
            wait_for(
                lambda: len(writes.read().acknowledged) >= 10, timeout=30, what="writes flowing"
            )
            old = real_cluster.get_db(ns, name)["status"]["currentPrimary"]
            old_pod = primary_pod(real_cluster, ns, name, old).metadata.name
            freeze(old)
            os.kill(kubelet, signal.SIGSTOP)
            try:
                wait_for(
                    lambda: "InstanceFenced" in _events(real_cluster, ns, name),
                    timeout=30,
                    interval=0.5,
                    what="the old primary fenced",
                )
                time.sleep(KUBELET_AWAY_S)
                held = real_cluster.get_db(ns, name)["status"]
                said = _events(real_cluster, ns, name)
                stuck = real_cluster.core.read_namespaced_pod(old_pod, ns)
            finally:
                resumed_at = time.time()
                os.kill(kubelet, signal.SIGCONT)
            promoted = wait_for(
                lambda: _new_primary(real_cluster, ns, name, old),
                timeout=90,
                interval=0.5,
                what="a primary once the kubelet is back",
            )
            promoted_at = time.time()
            promoted_in = promoted_at - resumed_at
            wait_for(
                lambda: writes.read().first_acknowledged_after(promoted_at),
                timeout=60,
                interval=0.5,
                what="writes acknowledged again",
            )
        rows = {int(n) for n in until_answers(lambda: app.psql("SELECT id FROM writes")).split()}
    lost = writes.acknowledged - rows
    print(
        f"\nkubelet stopped: {old} fenced, its pod still there {KUBELET_AWAY_S}s on (deleting "
        f"since {stuck.metadata.deletion_timestamp}), target {held.get('targetPrimary')}, "
        f"current primary {held.get('currentPrimary')}; "
        f"{promoted['status']['currentPrimary']} promoted {promoted_in:.1f}s after the kubelet "
        f"came back; {len(lost)} acknowledged writes lost; at most {sampler.most} primary at "
        f"once in {sampler.samples} samples"
    )
    # While the pod could still run, nothing was promoted: no primary in the status.
    assert stuck.metadata.deletion_timestamp is not None
    assert held.get("currentPrimary") is None and held.get("targetPrimary") != old, held
    assert "FailoverStarted" in said and "Promoted" not in said, said
    assert sampler.most == 1
    assert len(lost) <= 5, sorted(lost)


def test_a_running_database_moves_to_instances_with_its_data_and_one_restart_of_its_primary(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str]
) -> None:
    """A Database made before instances (a primary Deployment with the volume, a read
    replica), 5,000 rows in it, then spec.failover turned on: <name>-1 starts on the same
    volume once the old primary has stopped, the read replica is replaced by an instance with
    a volume of its own, and every row is there."""
    ns, name = user_namespace, "ledger"
    body = on_local_images(
        {
            "metadata": {"name": name},
            "spec": {"engine": "postgres", "replicas": 2, "storage": {"size": "1Gi"}},
        },
        images,
    )
    real_cluster.create_db(ns, name, body["spec"])
    wait_active(real_cluster, ns, name, timeout_s=240)
    (old_primary,) = [
        p
        for p in pods_of(real_cluster, ns, name, role="primary")
        if not p.metadata.deletion_timestamp
    ]
    old_deployment_uid = real_cluster.apps.read_namespaced_deployment(name, ns).metadata.uid
    with client_pod(real_cluster, ns, images["postgresql"], f"{name}-connection") as app:
        app.psql("CREATE TABLE entries AS SELECT generate_series(1, 5000) AS id")
        fingerprint = app.psql("SELECT md5(string_agg(id::text, ',' ORDER BY id)) FROM entries")
        moved_at = time.time()
        real_cluster.patch_db(ns, name, {"spec": {"failover": {"enabled": True}}})
        settled = wait_for(
            lambda: instances_settled(real_cluster, ns, name, count=2),
            timeout=180,
            interval=1,
            what="the Database moved to two instances",
        )
        moved_in = time.time() - moved_at
        assert settled["status"]["currentPrimary"] == f"{name}-1"
        copy = until_answers(
            lambda: app.psql("SELECT md5(string_agg(id::text, ',' ORDER BY id)) FROM entries")
        )
    pods = [p for p in pods_of(real_cluster, ns, name) if not p.metadata.deletion_timestamp]
    instances = sorted(p.metadata.labels.get(INSTANCE_LABEL) for p in pods)
    claims = {
        c.metadata.name: c.metadata.uid
        for c in real_cluster.core.list_namespaced_persistent_volume_claim(ns).items
    }
    print(f"\nmoved to instances in {moved_in:.1f}s; pods now {instances}; claims {sorted(claims)}")
    assert copy == fingerprint
    assert instances == [f"{name}-1", f"{name}-2"]
    assert old_primary.metadata.uid not in {p.metadata.uid for p in pods}
    assert set(claims) == {f"{name}-data", f"{name}-2-data"}
    deployments = {
        d.metadata.name: d for d in real_cluster.apps.list_namespaced_deployment(ns).items
    }
    assert set(deployments) == {f"{name}-1", f"{name}-2", name}
    # The name holder in place of the old primary's Deployment: no pod, for an older operator.
    assert deployments[name].spec.replicas == 0
    assert deployments[name].metadata.uid != old_deployment_uid


def test_a_replica_lagging_beyond_max_lag_is_never_promoted(
    real_cluster: Cluster, user_namespace: str, images: dict[str, str], real_node: RealCluster
) -> None:
    """One replica's WAL receiver stopped while 4 MiB of WAL are written (maxLag 1 MiB): when
    the primary freezes, the other replica is promoted, never the lagging one."""
    ns, name = user_namespace, "orders"
    failover = {"enabled": True, "maxLag": 1024 * 1024}
    create_instances(real_cluster, ns, name, images, engine="postgres", failover=failover)
    lagging = primary_pod(real_cluster, ns, name, f"{name}-3")
    receiver = _process(real_node, lagging, "walreceiver")
    os.kill(receiver, signal.SIGSTOP)
    try:
        with client_pod(real_cluster, ns, images["postgresql"], f"{name}-connection") as app:
            app.psql("CREATE TABLE bulk AS SELECT g, repeat('x', 1000) AS pad "
                     "FROM generate_series(1, 4000) AS g")  # fmt: skip
            behind = wait_for(
                lambda: _lag_of(real_cluster, ns, name, f"{name}-3", more_than=1024 * 1024),
                timeout=60,
                interval=1,
                what=f"{name}-3 more than 1 MiB behind",
            )
            freezer(real_cluster, real_node, ns, name, Engine.POSTGRES)(f"{name}-1")
            promoted = wait_for(
                lambda: _new_primary(real_cluster, ns, name, f"{name}-1"),
                timeout=60,
                interval=0.5,
                what="a new primary",
            )
            count = until_answers(lambda: app.psql("SELECT count(*) FROM bulk"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(receiver, signal.SIGCONT)
    print(f"\n{name}-3 was {behind} bytes behind; promoted: {promoted['status']['currentPrimary']}")
    assert promoted["status"]["currentPrimary"] == f"{name}-2"
    assert count == "4000"


def _process(node: RealCluster, pod: Any, word: str) -> int:
    """The host PID of the process of ``pod`` whose command line holds ``word``."""
    uid = pod.metadata.uid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if (uid in cgroups or uid.replace("-", "_") in cgroups) and word in cmdline:
            return int(entry.name)
    raise AssertionError(f"no process {word!r} of pod {pod.metadata.name} ({node.node_name})")


def _lag_of(cluster: Cluster, namespace: str, name: str, instance: str, more_than: int) -> int:
    for found in cluster.get_db(namespace, name)["status"].get("instances") or []:
        if found["name"] == instance and (found.get("lagBytes") or 0) > more_than:
            return int(found["lagBytes"])
    return 0
