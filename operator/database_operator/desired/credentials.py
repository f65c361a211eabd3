"""The generated credentials Secret.

Generated once, when the Database has no credentialsSecretRef, and never regenerated: the
password lives only in this Secret's data and reaches the container through secretKeyRef.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import string
from collections.abc import Mapping

from database_operator.api.models import Database
from database_operator.desired.common import (
    credentials_secret_name,
    engine_facts,
    kept_object_meta,
    read_replica_count,
)
from database_operator.manifest import Manifest

PASSWORD_LENGTH = 32
#: Letters and digits only: safe in URLs, connection strings and the probes' shell commands.
PASSWORD_ALPHABET = string.ascii_letters + string.digits


def generate_password() -> str:
    """A fresh random password from the `secrets` CSPRNG."""
    return "".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH))


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _secret_values(db: Database, password: str, replication_password: str) -> dict[str, str]:
    """The value of each key the engine needs in its Secret."""
    facts = engine_facts(db)
    username = facts.default_username
    known = {"password": password} | ({"username": username} if username else {})
    known |= {key: replication_password for key in facts.replication_keys}
    keys = facts.secret_keys + facts.replication_keys
    missing = [key for key in keys if not known.get(key)]
    if missing:
        raise ValueError(f"no generated value for Secret key(s) {missing} of {db.spec.engine}")
    return {key: known[key] for key in keys}


def replication_keys_to_generate(
    db: Database, secret_data: Mapping[str, object] | None
) -> list[str]:
    """The replication keys a generated Secret lacks (one made before the operator ran
    replicas): each can be added with a fresh password, touching no other key."""
    present = secret_data or {}
    return [key for key in engine_facts(db).replication_keys if not present.get(key)]


def secret(db: Database, password: str, replication_password: str = "") -> Manifest:
    """The generated credentials Secret (``data``, base64; not ``stringData``, which the API
    server folds into ``data`` and would make every apply look like a change). It holds the
    replication password too (for the engines that replicate), so scaling up needs no new
    Secret."""
    if db.spec.credentials_secret_ref is not None:
        raise ValueError(
            f"spec.credentialsSecretRef names {db.spec.credentials_secret_ref.name!r}: "
            "the operator generates no Secret and must not overwrite the user's"
        )
    if not password:
        raise ValueError("the generated Secret needs a non-empty password")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": kept_object_meta(db, credentials_secret_name(db)),
        "type": "Opaque",
        "data": {
            key: _b64(value)
            for key, value in _secret_values(db, password, replication_password).items()
        },
    }


def decoded(secret_data: Mapping[str, object] | None) -> dict[str, str]:
    """A Secret's ``data`` decoded (keys whose value is not valid base64 text are left out)."""
    values: dict[str, str] = {}
    for key, value in (secret_data or {}).items():
        try:
            values[key] = base64.b64decode(str(value), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            continue
    return values


def missing_credentials_keys(db: Database, secret_data: Mapping[str, object] | None) -> list[str]:
    """The engine's keys a credentials Secret's ``data`` lacks (empty: the Secret is usable).

    For checking a user's Secret (credentialsSecretRef) before pods fail on a missing key.
    """
    present = secret_data or {}
    facts = engine_facts(db)
    needed = facts.secret_keys + (facts.replication_keys if read_replica_count(db) else ())
    return [key for key in needed if not present.get(key)]


def reserved_username(db: Database, secret_data: Mapping[str, object] | None) -> str | None:
    """The Secret's ``username``, if it names one of the engine's own users the operator makes
    (the replication role, the exporter's): the pods would take that user over."""
    username = decoded(secret_data).get("username")
    return username if username in engine_facts(db).reserved_usernames else None


def credentials_checksum(db: Database, secret_data: Mapping[str, object] | None) -> str:
    """A checksum of the values the pods read from the credentials Secret (its ``data``).

    It goes into the pod template, so a changed Secret (regenerated, or a user's edited) rolls
    the pods. Salted with the Secret's namespace and name and never logged; it is still a hash
    of the password that anyone who can read the Deployment can test guesses against, which is
    why generated passwords are long and random (docs/operations.md).
    """
    digest = hashlib.sha256(f"{db.namespace}/{credentials_secret_name(db)}".encode())
    data = secret_data or {}
    facts = engine_facts(db)
    for key in sorted(set(facts.secret_env.values()) | set(facts.replication_env.values())):
        digest.update(b"\0" + key.encode() + b"=" + str(data.get(key, "")).encode())
    return digest.hexdigest()[:32]
