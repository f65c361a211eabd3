"""The agent the backup, restore and delete Jobs run: its command line, with its environment,
storing into and fetching from a folder (the PVC destination; the S3 one is tested against a
real store in tests/integration: test_backup_recipes.py, and test_agent_store.py for the store's
failures)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from database_operator.backups import agent

KEY = "team/prod/shop/shop-1.pgdump"
DUMP = b"PGDMP" + bytes(range(256)) * 64


@dataclass
class Run:
    """What one `database-operator agent ...` said: its exit status and its result."""

    status: int
    result: dict[str, Any]


@dataclass
class Agent:
    """The agent's command line, in a pod whose destination claim is ``store``."""

    store: Path
    work: Path

    def env(self, **changes: str | None) -> dict[str, str]:
        environ = {agent.KEY: KEY, agent.PVC_DIR: str(self.store)} | changes
        return {name: value for name, value in environ.items() if value is not None}

    def run(self, *args: str, **env: str | None) -> Run:
        result_file = self.work / "termination-log"
        result_file.unlink(missing_ok=True)
        status = agent.main(["--result-file", str(result_file), *args], self.env(**env))
        return Run(status, json.loads(result_file.read_text()))

    def upload(self, dump: bytes = DUMP, version: str = "16.4\n", engine: str = "postgres") -> Run:
        (self.work / "backup.pgdump").write_bytes(dump)
        (self.work / "engine-version").write_text(version)
        return self.run(
            "upload",
            f"--file={self.work / 'backup.pgdump'}",
            f"--version-file={self.work / 'engine-version'}",
            f"--engine={engine}",
            "--namespace=prod",
            "--database=shop",
            "--backup=shop-1",
        )

    @property
    def target(self) -> Path:
        return self.work / "restore" / "backup.pgdump"

    def fetch(self, *extra: str, engine: str = "postgres", version: str = "16") -> Run:
        self.target.parent.mkdir(exist_ok=True)
        return self.run(
            "fetch", f"--to={self.target}", f"--engine={engine}", f"--version={version}", *extra
        )

    def stored(self, suffix: str = "") -> Path:
        return self.store / f"{KEY}{suffix}"


@pytest.fixture
def cli(tmp_path: Path) -> Agent:
    (tmp_path / "store").mkdir()
    (tmp_path / "work").mkdir()
    return Agent(tmp_path / "store", tmp_path / "work")


SHA256 = hashlib.sha256(DUMP).hexdigest()


# --- upload ---------------------------------------------------------------------------------


def test_upload_stores_the_dump_its_checksum_and_its_metadata(cli: Agent) -> None:
    run = cli.upload()
    assert run.status == 0
    assert cli.stored().read_bytes() == DUMP
    assert cli.stored(".sha256").read_text() == f"{SHA256}  shop-1.pgdump\n"
    metadata = json.loads(cli.stored(".json").read_text())
    assert {key: metadata[key] for key in ("size", "sha256", "engine", "engineVersion")} == {
        "size": len(DUMP),
        "sha256": SHA256,
        "engine": "postgres",
        "engineVersion": "16.4",
    }
    assert (metadata["namespace"], metadata["database"], metadata["backup"]) == (
        "prod",
        "shop",
        "shop-1",
    )


def test_upload_reports_what_it_stored(cli: Agent) -> None:
    run = cli.upload()
    assert (run.result["size"], run.result["sha256"]) == (len(DUMP), SHA256)
    assert (run.result["engineVersion"], run.result["location"]) == ("16.4", KEY)
    assert run.result == json.loads(cli.stored(".json").read_text())


def test_upload_leaves_no_partial_file_behind(cli: Agent) -> None:
    cli.upload()
    assert sorted(p.name for p in cli.stored().parent.iterdir()) == [
        "shop-1.pgdump",
        "shop-1.pgdump.json",
        "shop-1.pgdump.sha256",
    ]


def test_an_upload_without_a_dump_fails_for_good(cli: Agent) -> None:
    run = cli.run(
        "upload",
        f"--file={cli.work / 'absent.pgdump'}",
        f"--version-file={cli.work / 'engine-version'}",
        "--engine=postgres",
        "--namespace=prod",
        "--database=shop",
        "--backup=shop-1",
    )
    assert run.status == agent.PERMANENT
    assert "absent.pgdump does not exist: the dump did not complete" in run.result["error"]
    assert not cli.stored().exists()


# --- fetch ----------------------------------------------------------------------------------


def test_fetch_verifies_an_intact_backup_and_hands_it_on(cli: Agent) -> None:
    cli.upload()
    run = cli.fetch(f"--sha256=sha256:{SHA256}")
    assert run.status == 0
    assert cli.target.read_bytes() == DUMP
    assert (run.result["verified"], run.result["sha256"]) == (True, SHA256)
    assert sorted(p.name for p in cli.target.parent.iterdir()) == ["backup.pgdump"]


def test_fetch_restores_an_older_major_into_a_newer_one(cli: Agent) -> None:
    cli.upload(version="15.6")
    assert cli.fetch(version="16").status == 0


def corrupt(cli: Agent) -> None:
    data = bytearray(cli.stored().read_bytes())
    data[100] ^= 0xFF
    cli.stored().write_bytes(bytes(data))


def truncate(cli: Agent) -> None:
    cli.stored().write_bytes(DUMP[:-10])


def untouched(cli: Agent) -> None:
    """The backup as stored."""


@pytest.mark.parametrize(
    ("spoil", "args", "words"),
    [
        pytest.param(
            corrupt,
            {},
            f"is corrupt or truncated (sha256 {{actual}}, {KEY}.sha256 says",
            id="corrupted",
        ),
        pytest.param(
            truncate,
            {},
            f"is corrupt or truncated (size {len(DUMP) - 10} bytes, stored as {len(DUMP)}",
            id="truncated",
        ),
        pytest.param(
            untouched,
            {"sha256": "0" * 64},
            f"the DatabaseBackup says {'0' * 64}",
            id="not-what-the-backup-recorded",
        ),
        pytest.param(
            untouched,
            {"engine": "mysql"},
            "cannot be restored here: it is a backup of 'postgres', not of 'mysql'",
            id="another-engine",
        ),
        pytest.param(
            untouched,
            {"version": "15"},
            "it was taken from postgres 16.4, and postgres 15 cannot read what a newer major",
            id="a-newer-major",
        ),
    ],
)
def test_fetch_refuses_a_backup_it_cannot_restore_and_leaves_nothing(
    cli: Agent, spoil: Callable[[Agent], None], args: dict[str, str], words: str
) -> None:
    cli.upload()
    spoil(cli)
    actual = hashlib.sha256(cli.stored().read_bytes()).hexdigest()
    extra = [f"--sha256={args['sha256']}"] if "sha256" in args else []
    run = cli.fetch(
        *extra, engine=args.get("engine", "postgres"), version=args.get("version", "16")
    )
    assert run.status == agent.PERMANENT
    assert words.format(actual=actual) in run.result["error"]
    assert KEY in run.result["error"]
    assert list(cli.target.parent.iterdir()) == [], "neither the file nor its .partial"


def test_fetch_of_a_backup_that_is_not_there_fails_for_good(cli: Agent) -> None:
    run = cli.fetch()
    assert run.status == agent.PERMANENT
    assert f"{KEY}.json does not exist" in run.result["error"]


def test_fetch_of_a_backup_with_unreadable_metadata_fails_for_good(cli: Agent) -> None:
    cli.upload()
    cli.stored(".json").write_text("{not json")
    run = cli.fetch()
    assert run.status == agent.PERMANENT
    assert f"{KEY}.json" in run.result["error"]
    assert list(cli.target.parent.iterdir()) == []


# --- delete ---------------------------------------------------------------------------------


def test_delete_removes_the_backup_and_its_companions(cli: Agent) -> None:
    cli.upload()
    run = cli.run("delete")
    assert (run.status, run.result) == (0, {"deleted": KEY})
    assert [p for p in cli.store.rglob("*") if p.is_file()] == []


def test_delete_of_a_backup_already_gone_succeeds(cli: Agent) -> None:
    cli.upload()
    assert cli.run("delete").status == 0
    assert cli.run("delete").status == 0


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "words"),
    [
        pytest.param({agent.KEY: None}, "BACKUP_KEY is not set", id="no-key"),
        pytest.param(
            {agent.PVC_DIR: None},
            "neither BACKUP_PVC_DIR nor BACKUP_S3_BUCKET is set: no destination",
            id="no-destination",
        ),
        pytest.param(
            {agent.PVC_DIR: "/nonexistent/claim"},
            "is not a folder: is the claim mounted?",
            id="no-claim",
        ),
    ],
)
def test_an_agent_without_its_settings_fails_for_good_and_says_which(
    cli: Agent, env: dict[str, str | None], words: str
) -> None:
    run = cli.run("delete", **env)
    assert run.status == agent.PERMANENT
    assert words in run.result["error"]


def test_the_result_is_also_printed_for_the_pods_log(
    cli: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    cli.upload()
    assert json.loads(capsys.readouterr().out)["sha256"] == SHA256


# --- encryption, on a claim -----------------------------------------------------------------------


def test_an_encrypted_backup_on_a_claim_is_ciphertext_and_its_key_restores_it(cli: Agent) -> None:
    """The claim's store: the dump encrypted as it is copied, under a temporary name, then
    decrypted by a fetch with the key; one with a key of another id is refused."""
    key_file = cli.work / "key"
    key_file.write_text(base64.b64encode(os.urandom(32)).decode())
    sealed = {agent.ENCRYPTION_KEY_FILE: str(key_file)}
    (cli.work / "backup.pgdump").write_bytes(DUMP)
    (cli.work / "engine-version").write_text("16.4\n")
    upload = [
        "upload",
        f"--file={cli.work / 'backup.pgdump'}",
        f"--version-file={cli.work / 'engine-version'}",
        "--engine=postgres",
        "--namespace=prod",
        "--database=shop",
        "--backup=shop-1",
    ]
    assert cli.run(*upload, **sealed).status == 0
    stored = cli.stored().read_bytes()
    assert stored.startswith(b"DBOPAES1") and DUMP[:64] not in stored
    assert not list(cli.store.rglob("*.partial"))
    cli.target.parent.mkdir(exist_ok=True)
    fetch = ["fetch", f"--to={cli.target}", "--engine=postgres", "--version=16"]
    assert cli.run(*fetch, **sealed).status == 0
    assert cli.target.read_bytes() == DUMP
    other = cli.work / "other-key"
    other.write_text(base64.b64encode(os.urandom(32)).decode())
    refused = cli.run(*fetch, **{agent.ENCRYPTION_KEY_FILE: str(other)})
    assert refused.status == agent.PERMANENT
    assert "was encrypted with key" in refused.result["error"]


def test_a_key_file_that_holds_no_key_fails_for_good_and_shows_nothing_of_it(cli: Agent) -> None:
    key_file = cli.work / "key"
    key_file.write_text("too-short\n")
    ran = cli.run("delete", **{agent.ENCRYPTION_KEY_FILE: str(key_file)})
    assert ran.status == agent.PERMANENT
    assert "does not hold a key" in ran.result["error"]
    assert "too-short" not in ran.result["error"]
