"""The Jobs that move backups (a backup, a restore, the deletion of a backup): pure builders,
checked as plain data."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from database_operator.api.backup import BackupDestination
from database_operator.api.models import NAME_PATTERN, ROLE_LABEL, SHARD_LABEL, Database
from database_operator.backups import jobs
from database_operator.config import Settings
from database_operator.desired import selector_labels
from database_operator.engines import Engine, facts
from database_operator.manifest import Manifest
from tests.unit.backups import (
    AGENT,
    BACKUP_UID,
    DATABASE_LABEL,
    LOCATION,
    OPTIONS,
    PVC,
    S3,
    S3_WITH_CA,
    make_backup,
)

DB_UID = "0b1c2d3e-0000-4000-8000-000000000001"
#: What the Database's Secret holds: it must never reach a Job but by reference.
PASSWORD = "Kn0wn-Pa55word-of-the-Secret"
DESTINATIONS = [
    pytest.param(S3, id="s3"),
    pytest.param(S3_WITH_CA, id="s3-with-ca"),
    pytest.param(PVC, id="pvc"),
]
ENGINES = [pytest.param(engine, id=engine.value) for engine in Engine]


def make_db(engine: Engine = Engine.POSTGRES, shard: str | None = None, **spec: Any) -> Database:
    """A Database shop in namespace prod with storage and the given (camelCase) spec."""
    labels = {SHARD_LABEL: shard} if shard else {}
    return Database.model_validate(
        {
            "metadata": {"name": "shop", "namespace": "prod", "uid": DB_UID, "labels": labels},
            "spec": {
                "engine": engine.value,
                "storage": {"size": "1Gi"},
                "credentialsSecretRef": {"name": "shop-secret"},
                **spec,
            },
        }
    )


def backup_job(
    engine: Engine = Engine.POSTGRES, destination: BackupDestination = S3, **spec: Any
) -> Manifest:
    return jobs.backup_job(make_backup(), make_db(engine, **spec), destination, LOCATION, OPTIONS)


def restore_job(
    engine: Engine = Engine.POSTGRES,
    destination: BackupDestination = S3,
    sha256: str | None = None,
    **spec: Any,
) -> Manifest:
    return jobs.restore_job(make_db(engine, **spec), destination, LOCATION, sha256, OPTIONS)


def delete_job(engine: Engine = Engine.POSTGRES, destination: BackupDestination = PVC) -> Manifest:
    backup = make_backup(
        phase="Completed",
        engine=engine.value,
        location="elsewhere/prod/shop/shop-nightly.rdb",
        destination=destination.to_wire(),
    )
    return jobs.delete_job(backup, OPTIONS)


def pod_spec(job: Manifest) -> Manifest:
    spec: Manifest = job["spec"]["template"]["spec"]
    return spec


def containers(job: Manifest) -> Iterator[Manifest]:
    spec = pod_spec(job)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def container(job: Manifest, name: str) -> Manifest:
    found = [c for c in containers(job) if c["name"] == name]
    assert len(found) == 1, f"one container {name} expected"
    return found[0]


def env_of(found: Manifest) -> dict[str, Any]:
    """A container's env by name: the plain value, or the valueFrom."""
    return {var["name"]: var.get("value", var.get("valueFrom")) for var in found["env"]}


def mount_path(job: Manifest, found: Manifest, volume: Manifest) -> str:
    """Where ``found`` mounts the pod volume that is ``volume`` (a volume source)."""
    named = [v["name"] for v in pod_spec(job)["volumes"] if {**v, "name": None} == volume]
    assert len(named) == 1, f"one volume {volume} expected"
    mounts = [m["mountPath"] for m in found["volumeMounts"] if m["name"] == named[0]]
    assert len(mounts) == 1, f"{found['name']} mounts {named[0]} once"
    return str(mounts[0])


def all_jobs() -> list[Any]:
    return [
        pytest.param(backup_job, id="backup"),
        pytest.param(restore_job, id="restore"),
        pytest.param(delete_job, id="delete"),
    ]


# --- names ----------------------------------------------------------------------------------


def test_a_short_name_is_the_job_name() -> None:
    assert jobs.job_name("shop-nightly") == "shop-nightly"
    assert jobs.job_name("shop", "-restore") == "shop-restore"


@pytest.mark.parametrize("suffix", ["", "-delete", "-restore"])
def test_a_long_name_is_shortened_with_a_hash_that_keeps_long_names_apart(suffix: str) -> None:
    first, second = "a" * 80 + "-one", "a" * 80 + "-two"
    short = jobs.job_name(first, suffix), jobs.job_name(second, suffix)
    assert all(len(name) <= jobs.MAX_NAME for name in short)
    assert short[0] != short[1]
    assert all(name.endswith(suffix) and name.startswith("a" * 40) for name in short)
    assert jobs.job_name(first, suffix) == short[0], "the same name every time"


def test_a_name_that_fits_only_without_the_suffix_is_shortened_too() -> None:
    name = "b" * 60
    assert len(jobs.job_name(name, "-delete")) <= jobs.MAX_NAME
    assert jobs.job_name(name, "-delete").endswith("-delete")


#: A label value, and a DNS-1123 subdomain (what a Job's name must be).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SUBDOMAIN = re.compile(NAME_PATTERN)


@pytest.mark.parametrize(
    "name",
    [
        "shop-nightly",
        "shop-20260301-020000",
        "x" * 253,
        "a" * 53 + "." + "b" * 100,
        "a" * 46 + "-" + "b" * 100,
    ],
)
def test_every_backups_jobs_are_named_as_label_values_and_job_names_must_be(name: str) -> None:
    backup = make_backup(name, location="k", destination=PVC.to_wire())
    for job in (
        jobs.backup_job(backup, make_db(), S3, LOCATION, OPTIONS),
        jobs.delete_job(backup, OPTIONS),
    ):
        found = job["metadata"]["name"]
        assert len(found) <= jobs.MAX_NAME
        assert LABEL_VALUE.match(found) and SUBDOMAIN.match(found), found


def test_the_restore_job_of_a_database_with_the_longest_name_fits_too() -> None:
    db = make_db().model_copy(update={"metadata": {"name": "d" * 63, "namespace": "prod"}})
    found = jobs.restore_job(db, S3, LOCATION, None, OPTIONS)["metadata"]["name"]
    assert len(found) <= jobs.MAX_NAME
    assert found.endswith("-restore")
    assert LABEL_VALUE.match(found), found


@pytest.mark.parametrize("build", all_jobs())
def test_every_job_is_created_in_the_namespace_of_what_it_is_for(build: Any) -> None:
    assert build()["metadata"]["namespace"] == "prod"


# --- the backup Job -------------------------------------------------------------------------


@pytest.mark.parametrize("destination", DESTINATIONS)
@pytest.mark.parametrize("engine", ENGINES)
def test_the_backup_job_is_owned_by_its_database_backup(
    engine: Engine, destination: BackupDestination
) -> None:
    assert backup_job(engine, destination)["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "DatabaseBackup",
            "name": "shop-nightly",
            "uid": BACKUP_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


@pytest.mark.parametrize("destination", DESTINATIONS)
@pytest.mark.parametrize("engine", ENGINES)
def test_the_backup_job_is_labelled_as_ours_but_never_as_a_pod_the_services_select(
    engine: Engine, destination: BackupDestination
) -> None:
    job = backup_job(engine, destination, shard="east")
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        assert labels["app.kubernetes.io/managed-by"] == "database-operator"
        assert labels[DATABASE_LABEL] == "shop"
        assert labels[SHARD_LABEL] == "east"
        assert ROLE_LABEL not in labels


@pytest.mark.parametrize("build", all_jobs())
@pytest.mark.parametrize("engine", ENGINES)
def test_every_jobs_pod_runs_restricted_as_the_engines_user(build: Any, engine: Engine) -> None:
    job = build(engine)
    spec = pod_spec(job)
    security = spec["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == facts(engine).uid
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    for found in containers(job):
        context = found["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, found["name"]
        assert context["capabilities"] == {"drop": ["ALL"]}, found["name"]
        if found["image"] == AGENT:
            assert context["readOnlyRootFilesystem"] is True, found["name"]


@pytest.mark.parametrize("build", all_jobs())
def test_the_agent_runs_in_the_operators_image(build: Any) -> None:
    agents = [c for c in containers(build()) if c["command"][:2] == jobs.AGENT_COMMAND]
    assert [c["image"] for c in agents] == [AGENT]


SECRET_VARIABLES = {
    "POSTGRES_PASSWORD",
    "POSTGRES_USER",
    "MYSQL_PASSWORD",
    "MYSQL_ROOT_PASSWORD",
    "REDIS_PASSWORD",
    "REDISCLI_AUTH",
    "REPLICATION_PASSWORD",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
}


@pytest.mark.parametrize("build", all_jobs())
@pytest.mark.parametrize("engine", ENGINES)
def test_credentials_reach_every_job_only_by_secret_key_ref(build: Any, engine: Engine) -> None:
    job = build(engine, S3)
    # What the Database's Secret and the store's Secret hold is no input of the builders; it
    # must not appear, in clear or base64, whatever they were given.
    text = json.dumps(job)
    assert PASSWORD not in text
    assert base64.b64encode(PASSWORD.encode()).decode() not in text
    secret_vars = [
        var for found in containers(job) for var in found["env"] if var["name"] in SECRET_VARIABLES
    ]
    assert secret_vars, "the job needs credentials"
    for var in secret_vars:
        assert "value" not in var, var["name"]
        assert set(var["valueFrom"]) == {"secretKeyRef"}, var["name"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_dump_reads_the_databases_credentials_from_its_secret(engine: Engine) -> None:
    dump = env_of(container(backup_job(engine), "dump"))
    for variable, key in facts(engine).secret_env.items():
        assert dump[variable] == {"secretKeyRef": {"name": "shop-secret", "key": key}}


@pytest.mark.parametrize(("engine", "port"), [(Engine.POSTGRES, 5432), (Engine.REDIS, 6379)])
def test_the_dump_connects_to_the_read_write_service(engine: Engine, port: int) -> None:
    dump = env_of(container(backup_job(engine), "dump"))
    assert (dump["DB_HOST"], dump["DB_PORT"]) == ("shop.prod.svc", str(port))


def test_the_dump_connects_to_the_port_the_spec_gives() -> None:
    dump = env_of(container(backup_job(Engine.MYSQL, port=13306), "dump"))
    assert (dump["DB_HOST"], dump["DB_PORT"]) == ("shop.prod.svc", "13306")


@pytest.mark.parametrize("engine", ENGINES)
def test_the_upload_stores_the_file_the_dump_wrote_in_their_shared_volume(engine: Engine) -> None:
    job = backup_job(engine)
    dump, upload = container(job, "dump"), container(job, "upload")
    scratch: Manifest = {"name": None, "emptyDir": {}}
    assert mount_path(job, dump, scratch) == mount_path(job, upload, scratch)
    env = env_of(dump)
    written = f"{env['BACKUP_DIR']}/{env['BACKUP_FILE']}"
    assert f"--file={written}" in upload["command"]
    assert f"--engine={engine.value}" in upload["command"]
    assert [m.get("readOnly") for m in upload["volumeMounts"] if m["name"] == "backup"] == [True]


def test_the_agent_finds_an_s3_store_as_the_design_says() -> None:
    upload = env_of(container(backup_job(destination=S3), "upload"))
    assert upload == {
        "BACKUP_KEY": LOCATION,
        "BACKUP_S3_BUCKET": "backups",
        "BACKUP_S3_ENDPOINT": "https://s3.example.com",
        "BACKUP_S3_REGION": "eu-west-1",
        "BACKUP_S3_CREDENTIALS_SECRET": "s3-creds",
        "AWS_ACCESS_KEY_ID": {"secretKeyRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}},
        "AWS_SECRET_ACCESS_KEY": {
            "secretKeyRef": {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}
        },
    }


def test_the_agent_asks_for_the_server_side_encryption_the_destination_names() -> None:
    s3 = S3.model_dump(by_alias=True, exclude_none=True)["s3"]
    kms = {"serverSideEncryption": "aws:kms", "kmsKeyId": "alias/backups"}
    destination = BackupDestination.model_validate({"s3": s3 | kms})
    upload = env_of(container(backup_job(destination=destination), "upload"))
    assert upload["BACKUP_S3_SERVER_SIDE_ENCRYPTION"] == "aws:kms"
    assert upload["BACKUP_S3_KMS_KEY_ID"] == "alias/backups"
    plain = env_of(container(backup_job(destination=S3), "upload"))
    assert not {"BACKUP_S3_SERVER_SIDE_ENCRYPTION", "BACKUP_S3_KMS_KEY_ID"} & set(plain)


@pytest.mark.parametrize("kind", ["backup", "restore", "delete"])
def test_only_the_agent_mounts_the_encryption_key_and_finds_it_by_its_file(kind: str) -> None:
    """The key reaches the agent as a file of the Secret's volume (never env, never an
    argument), and no engine container of the Job sees it."""
    wire = S3.model_dump(by_alias=True, exclude_none=True)
    ref = {"name": "backup-key", "key": "aes"}
    destination = BackupDestination.model_validate(wire | {"encryption": {"keySecretRef": ref}})
    job = {
        "backup": lambda: backup_job(destination=destination),
        "restore": lambda: restore_job(destination=destination),
        "delete": lambda: jobs.delete_job(
            make_backup().model_copy(
                update={
                    "status": make_backup().status.model_copy(
                        update={"destination": destination, "location": LOCATION}
                    )
                }
            ),
            OPTIONS,
        ),
    }[kind]()
    items = [{"key": "aes", "path": "key"}]
    volume: Manifest = {"name": None, "secret": {"secretName": "backup-key", "items": items}}
    agents = [c for c in containers(job) if c["command"][:2] == jobs.AGENT_COMMAND]
    assert agents
    for found in containers(job):
        if found in agents and kind != "delete":  # a deletion needs no key
            mounted = mount_path(job, found, volume)
            assert env_of(found)["BACKUP_ENCRYPTION_KEY_FILE"] == f"{mounted}/key"
            assert env_of(found)["BACKUP_ENCRYPTION_SECRET"] == "backup-key (key aes)"
        else:
            names = {m["name"] for m in found.get("volumeMounts", [])}
            assert jobs.KEY_VOLUME not in names, found["name"]
            assert "BACKUP_ENCRYPTION_KEY_FILE" not in env_of(found)


def test_the_agent_trusts_the_ca_bundle_of_the_secret_it_mounts() -> None:
    job = backup_job(destination=S3_WITH_CA)
    upload = container(job, "upload")
    bundle = env_of(upload)["AWS_CA_BUNDLE"]
    mounted = mount_path(job, upload, {"name": None, "secret": {"secretName": "s3-ca"}})
    assert bundle == f"{mounted}/ca.crt"
    assert "BACKUP_S3_REGION" not in env_of(upload), "boto3's default applies"


def test_the_agent_finds_a_claim_where_it_is_mounted() -> None:
    job = backup_job(destination=PVC)
    upload = container(job, "upload")
    mounted = mount_path(
        job, upload, {"name": None, "persistentVolumeClaim": {"claimName": "backup-volume"}}
    )
    assert env_of(upload) == {"BACKUP_KEY": LOCATION, "BACKUP_PVC_DIR": mounted}


@pytest.mark.parametrize("build", all_jobs())
def test_a_failed_pod_is_tried_again_unless_a_retry_cannot_help(build: Any) -> None:
    job = build()
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 2
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}} in rules
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]} in rules


def built_with(kind: str, options: jobs.JobOptions) -> Manifest:
    """The ``kind`` Job (backup, restore, delete) built with ``options``."""
    if kind == "backup":
        return jobs.backup_job(make_backup(), make_db(), S3, LOCATION, options)
    if kind == "restore":
        return jobs.restore_job(make_db(), S3, LOCATION, None, options)
    completed = make_backup(phase="Completed", location=LOCATION, destination=S3.to_wire())
    return jobs.delete_job(completed, options)


KINDS = ["backup", "restore", "delete"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_job_ends_by_the_run_deadline_kubernetes_enforces(kind: str) -> None:
    assert built_with(kind, OPTIONS)["spec"]["activeDeadlineSeconds"] == 86400
    shorter = jobs.JobOptions(agent_image=AGENT, run_deadline_s=3600)
    assert built_with(kind, shorter)["spec"]["activeDeadlineSeconds"] == 3600


@pytest.mark.parametrize("kind", KINDS)
def test_every_jobs_pod_pulls_with_the_operators_pull_secrets(kind: str) -> None:
    private = jobs.JobOptions(agent_image=AGENT, image_pull_secrets=("ghcr", "mirror"))
    assert pod_spec(built_with(kind, private))["imagePullSecrets"] == [
        {"name": "ghcr"},
        {"name": "mirror"},
    ]
    # None named: the namespace's ServiceAccount's pull secrets apply, as to any pod.
    assert "imagePullSecrets" not in pod_spec(built_with(kind, OPTIONS))


def test_the_job_options_are_the_settings() -> None:
    settings = Settings(
        agent_image="agent:2",
        agent_image_pull_secrets=["ghcr"],
        job_start_deadline=30,
        job_run_deadline=600,
    )
    assert jobs.JobOptions.of(settings) == jobs.JobOptions("agent:2", ("ghcr",), 30, 600)
    defaults = jobs.JobOptions.of(Settings())
    assert (defaults.image_pull_secrets, defaults.start_deadline_s) == ((), 300)
    assert defaults.run_deadline_s == 86400


# --- the restore Job ------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_the_restore_job_is_owned_by_the_database(engine: Engine) -> None:
    assert restore_job(engine)["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "databases.example.com/v1",
            "kind": "Database",
            "name": "shop",
            "uid": DB_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


@pytest.mark.parametrize(
    ("engine", "data_dir"),
    [
        (Engine.POSTGRES, "/var/lib/postgresql/data/pgdata"),
        (Engine.MYSQL, "/var/lib/mysql"),
        (Engine.REDIS, "/data"),
    ],
)
def test_the_restore_writes_into_the_databases_claim_where_the_engine_keeps_its_data(
    engine: Engine, data_dir: str
) -> None:
    job = restore_job(engine)
    restore = container(job, "restore")
    claim = {"name": None, "persistentVolumeClaim": {"claimName": "shop-data"}}
    assert mount_path(job, restore, claim) == facts(engine).data_path
    assert env_of(restore)["RESTORE_DATA_DIR"] == data_dir


@pytest.mark.parametrize("destination", DESTINATIONS)
@pytest.mark.parametrize("engine", ENGINES)
def test_the_restore_reads_the_file_the_fetch_verified(
    engine: Engine, destination: BackupDestination
) -> None:
    job = restore_job(engine, destination)
    fetch, restore = container(job, "fetch"), container(job, "restore")
    restore_file = env_of(restore)["RESTORE_FILE"]
    assert f"--to={restore_file}" in fetch["command"]
    folder = restore_file.rsplit("/", 1)[0]
    fetched, read = (
        [m["name"] for m in found["volumeMounts"] if m["mountPath"] == folder]
        for found in (fetch, restore)
    )
    assert fetched == read and len(read) == 1, "both mount one volume there"
    assert {"name": read[0], "emptyDir": {}} in pod_spec(job)["volumes"]
    assert env_of(fetch)["BACKUP_KEY"] == LOCATION
    assert pod_spec(job)["initContainers"] == [fetch], "the fetch is done before the restore"


@pytest.mark.parametrize(
    ("engine", "loader"), [(Engine.POSTGRES, True), (Engine.MYSQL, True), (Engine.REDIS, False)]
)
def test_postgres_and_mysql_restore_through_the_images_initdb_folder(
    engine: Engine, loader: bool
) -> None:
    job = restore_job(engine)
    restore = container(job, "restore")
    assert ("RESTORE_LOADER" in env_of(restore)) is loader
    initdb = [m["mountPath"] for m in restore["volumeMounts"] if m["name"] == "initdb"]
    assert initdb == (["/docker-entrypoint-initdb.d"] if loader else [])
    volumes = [v for v in pod_spec(job)["volumes"] if v["name"] == "initdb"]
    assert volumes == ([{"name": "initdb", "emptyDir": {}}] if loader else [])


@pytest.mark.parametrize(
    ("engine", "parameters", "appendonly"),
    [
        (Engine.REDIS, {"appendonly": "yes"}, True),
        (Engine.REDIS, {"appendonly": "YES"}, True),
        (Engine.REDIS, {"AppendOnly": " Yes "}, True),
        (Engine.REDIS, {"appendonly": "no"}, False),
        (Engine.REDIS, {"maxmemory": "100mb"}, False),
        (Engine.REDIS, None, False),
        (Engine.POSTGRES, {"appendonly": "yes"}, False),
    ],
)
def test_a_redis_restore_writes_the_aof_only_when_the_database_runs_with_it(
    engine: Engine, parameters: dict[str, str] | None, appendonly: bool
) -> None:
    restore = env_of(container(restore_job(engine, parameters=parameters), "restore"))
    assert restore.get("RESTORE_APPENDONLY") == ("yes" if appendonly else None)


@pytest.mark.parametrize(
    ("sha256", "argument"), [("ab" * 32, [f"--sha256={'ab' * 32}"]), (None, [])]
)
def test_the_fetch_checks_the_checksum_its_backup_recorded(
    sha256: str | None, argument: list[str]
) -> None:
    command = container(restore_job(sha256=sha256), "fetch")["command"]
    assert [arg for arg in command if arg.startswith("--sha256")] == argument


def test_the_fetch_checks_the_engine_and_version_restored_into() -> None:
    command = container(restore_job(Engine.MYSQL, version="8.0.36"), "fetch")["command"]
    assert {"--engine=mysql", "--version=8.0.36"} <= set(command)


def test_the_restore_runs_where_and_as_large_as_the_database() -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
    resources = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    job = restore_job(nodeSelector={"disk": "ssd"}, tolerations=[toleration], resources=resources)
    spec = pod_spec(job)
    assert spec["nodeSelector"] == {"disk": "ssd"}
    assert spec["tolerations"] == [toleration]
    assert container(job, "restore")["resources"] == resources


# --- the delete Job -------------------------------------------------------------------------


def test_the_delete_job_is_owned_by_its_database_backup() -> None:
    [owner] = delete_job()["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "DatabaseBackup",
        "shop-nightly",
        BACKUP_UID,
    )
    assert (owner["controller"], owner["blockOwnerDeletion"]) == (True, True)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_delete_job_runs_as_the_user_that_wrote_the_backup(engine: Engine) -> None:
    security = pod_spec(delete_job(engine))["securityContext"]
    uid = facts(engine).uid
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid, uid, uid)


@pytest.mark.parametrize("destination", DESTINATIONS)
def test_the_delete_job_deletes_where_the_status_says_the_backup_is(
    destination: BackupDestination,
) -> None:
    job = delete_job(Engine.REDIS, destination)
    deleter = container(job, "delete")
    env = env_of(deleter)
    assert env["BACKUP_KEY"] == "elsewhere/prod/shop/shop-nightly.rdb"
    if destination.pvc is not None:
        claim = {"name": None, "persistentVolumeClaim": {"claimName": "backup-volume"}}
        assert env["BACKUP_PVC_DIR"] == mount_path(job, deleter, claim)
    else:
        assert destination.s3 is not None
        assert env["BACKUP_S3_BUCKET"] == destination.s3.bucket
    assert deleter["command"] == [*jobs.AGENT_COMMAND, "delete"]


def test_the_delete_job_carries_the_backups_shard_label() -> None:
    labels = delete_job()["metadata"]["labels"]
    assert (labels[SHARD_LABEL], labels[DATABASE_LABEL]) == ("east", "shop")
    assert ROLE_LABEL not in labels


@pytest.mark.parametrize("build", [backup_job, restore_job, delete_job])
@pytest.mark.parametrize("engine", list(Engine))
def test_a_jobs_pods_are_never_counted_among_the_databases_pods(build: Any, engine: Engine) -> None:
    # status.selector (the scale subresource's) and the Services select the database pods.
    selector = selector_labels(make_db(engine))
    pod_labels = build(engine)["spec"]["template"]["metadata"]["labels"]
    assert not selector.items() <= pod_labels.items()


def test_a_backup_runs_on_the_nodes_its_database_may_use_but_not_by_its_affinity() -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"a": "b"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    spec = pod_spec(
        backup_job(nodeSelector={"pool": "db"}, tolerations=[toleration], affinity=affinity)
    )
    assert spec["nodeSelector"] == {"pool": "db"}
    assert spec["tolerations"] == [toleration]
    assert "affinity" not in spec
