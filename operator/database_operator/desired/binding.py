"""The connection Secret an application binds to, in the shape of the Service Binding
specification (servicebinding.io): well-known entries an application (or a platform's binding
controller) reads without knowing the operator.

Built from the credentials Secret's data, so it never has a password of its own: it follows the
credentials (generated or the user's) and is rewritten when they, the port or the name change.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from urllib.parse import quote

from database_operator.api.models import Database
from database_operator.desired.common import (
    connection_secret_name,
    controlled_owner_references,
    engine_facts,
    host,
    object_meta,
    read_host,
    read_replica_count,
    resolved_port,
    stamped,
)
from database_operator.desired.credentials import decoded
from database_operator.manifest import Manifest

PROVIDER = "database-operator"


def _uri(db: Database, at: str, username: str | None, password: str, database: str | None) -> str:
    facts = engine_facts(db)
    user = quote(username, safe="") if username else ""
    where = f"{at}:{resolved_port(db)}"
    path = f"/{quote(database, safe='')}" if database else "/0"
    return f"{facts.uri_scheme}://{user}:{quote(password, safe='')}@{where}{path}"


def connection_entries(db: Database, credentials: Mapping[str, object] | None) -> dict[str, str]:
    """The entries (plain text) from the credentials Secret's ``data`` (base64)."""
    facts = engine_facts(db)
    values = decoded(credentials)
    username = (
        values.get("username") if facts.default_username is not None else facts.binding_username
    )
    password = values.get("password", "")
    database = username if facts.has_database else None
    entries = {
        "type": facts.binding_type,
        "provider": PROVIDER,
        "host": host(db),
        "port": str(resolved_port(db)),
        "password": password,
        "uri": _uri(db, host(db), username, password, database),
    }
    if username:
        entries["username"] = username
    if database:
        entries["database"] = database
    if facts.jdbc_scheme and database:
        entries["jdbc-uri"] = (
            f"jdbc:{facts.jdbc_scheme}://{host(db)}:{resolved_port(db)}/{database}"
        )
    if read_replica_count(db):
        entries["read-only-host"] = read_host(db)
        entries["read-only-uri"] = _uri(db, read_host(db), username, password, database)
    return entries


def connection_secret(db: Database, credentials: Mapping[str, object] | None) -> Manifest:
    """The Secret ``<name>-connection`` (type servicebinding.io/<type>), controlled by the
    Database: it goes with it."""
    entries = connection_entries(db, credentials)
    return stamped(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": object_meta(
                db, connection_secret_name(db), controlled_owner_references(db)
            ),
            "type": f"servicebinding.io/{engine_facts(db).binding_type}",
            "data": {
                key: base64.b64encode(value.encode()).decode() for key, value in entries.items()
            },
        }
    )
