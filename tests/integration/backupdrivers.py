"""How the backup recipe tests (tests/integration/test_backup_recipes.py) drive each engine here:
a `Driver` per engine (`POSTGRES`, `MYSQL`, `REDIS`) starts a Database's first instance as its
image does, writes what an application would have and digests it (counts and checksums, to
compare a restore with its source), runs the restore Job's pod and then what the image's
entrypoint does with what it left, and serves the restored data as the Database's first pod
would. Each uses Debian's build of the engine (tests/engines.py), which must be installed:
importing this module reads their versions.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from database_operator import replication
from database_operator.api.models import Database
from database_operator.desired.workload import settings
from database_operator.engines import Engine
from tests.cluster import wait_for
from tests.controlplane import free_port
from tests.engines import (
    answers_db,
    container_env,
    engine_user,
    mariadbd,
    mysql,
    mysql_answers,
    mysql_first_start,
    owned,
    pg_running,
    ping,
    postgres_bin,
    postgres_first_start,
    psql,
    redis_cli,
    redis_server,
    run_as,
    running,
)
from tests.integration.jobpods import (
    Local,
    Pod,
    Ran,
    StandIn,
    source_init_script,
    succeeded,
    the_loader,
)

#: A megabyte, for the figures.
MB = 1_000_000


def installed_version(server: str, pattern: str) -> str:
    """MAJOR.MINOR of a server installed here (what the Database's spec.version says)."""
    said = subprocess.run([server, "--version"], capture_output=True, text=True, check=True)
    found = re.search(pattern, said.stdout)
    assert found, said.stdout
    return f"{found[1]}.{found[2]}"


@dataclass(frozen=True)
class Restored:
    """The restore Job's work: the fetch, the load (the loader, or the whole restore
    container), and the data directory it left."""

    fetched: Ran
    loaded: Ran
    data: Path


class Driver(Protocol):
    """How a test runs one engine here: a first start as its image does it, the restore Job
    and what its entrypoint then does, and a server as the Database's pod would start it."""

    engine: Engine
    version: str  # the Database's spec.version (the engine installed here)
    dump_path: str  # PATH of the dump container: the engine's client tools

    def source(
        self, db: Database, credentials: Mapping[str, str], folder: Path
    ) -> AbstractContextManager[int]:
        """A first start of ``db`` (no data yet), serving on the port it yields."""
        ...

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None: ...
    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]: ...
    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        """The server's version, as the dump records it, and the data's size, for people."""
        ...

    def restore(self, pod: Pod, folder: Path) -> Restored: ...
    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        """The restored data, served as the Database's first pod would."""
        ...


# --- PostgreSQL ----------------------------------------------------------------------------------

PG_PATH = f"{postgres_bin()}:{os.environ['PATH']}"


def pg_query(port: int, credentials: Mapping[str, str], sql: str) -> str:
    """``sql`` as the Database's user, in its database (named after the user)."""
    user = credentials["username"]
    return psql(port, credentials["password"], user, sql, user)


PG_TABLES = ("customers", "orders", "attachments")


class Postgres:
    engine = Engine.POSTGRES
    version = postgres_bin().parent.name
    dump_path = PG_PATH

    @contextlib.contextmanager
    def source(self, db: Database, credentials: Mapping[str, str], folder: Path) -> Iterator[int]:
        user = run_as()
        sockets = owned(folder / "sockets", user)
        data = owned(folder / "volume", user) / "pgdata"
        env = container_env(db, dict(credentials)) | {
            "PGDATA": str(data),
            "PGPORT": "5432",
            "PATH": PG_PATH,
        }
        with postgres_first_start(env, sockets, user):
            pass
        with self._serving(db, data, sockets, credentials, folder / "server.log") as port:
            yield port

    @contextlib.contextmanager
    def _serving(
        self, db: Database, data: Path, sockets: Path, credentials: Mapping[str, str], log: Path
    ) -> Iterator[int]:
        """The server as the Database's pod runs it (its recipe), on 127.0.0.1, a free port."""
        port = free_port()
        local = ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={sockets}"]
        recipe = replication.primary(Engine.POSTGRES, port=port, data_dir=str(data), settings=local)
        env = (
            container_env(db, dict(credentials))
            | recipe.env
            | {"PATH": PG_PATH, "PGDATA": str(data)}
        )
        argv = [str(postgres_bin() / "postgres"), "-D", str(data), *recipe.args[1:]]
        with running(argv, env, log, run_as()):
            username, password = credentials["username"], credentials["password"]
            wait_for(lambda: answers_db(port, password, username), what="PostgreSQL to answer")
            yield port

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None:
        """What an application would have: customers, ``amount`` orders with an index and a
        foreign key, binary attachments (bytea), a large object, a view, a sequence in use."""
        pg_query(
            port,
            credentials,
            f"""
            CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text UNIQUE,
                                    created timestamptz NOT NULL);
            INSERT INTO customers SELECT i, 'customer ' || i, 'c' || i || '@example.com',
                timestamptz '2024-01-01 00:00+00' + i * interval '1 minute'
              FROM generate_series(1, 10000) i;
            CREATE TABLE orders (id bigserial PRIMARY KEY,
                                 customer int NOT NULL REFERENCES customers,
                                 amount numeric(12, 2), note text, placed date);
            INSERT INTO orders (customer, amount, note, placed)
              SELECT 1 + i % 10000, (i % 99991) / 100.0,
                     md5(i::text) || md5((i * 31)::text) || md5((i * 97)::text) || ' ünïcødé',
                     date '2024-01-01' + i % 365
                FROM generate_series(1, {amount}) i;
            CREATE INDEX orders_by_customer ON orders (customer);
            CREATE TABLE attachments (id int PRIMARY KEY, body bytea NOT NULL);
            INSERT INTO attachments
              SELECT i, decode(repeat(md5(i::text) || md5((-i)::text), 32), 'hex')
              FROM generate_series(1, 2000) i;
            SELECT lo_from_bytea(0, decode(string_agg(md5(i::text), '' ORDER BY i), 'hex'))
              FROM generate_series(1, 65536) i;
            CREATE VIEW big_spenders AS SELECT customer, sum(amount) AS total FROM orders
              GROUP BY customer HAVING sum(amount) > {amount // 20};
            """,  # noqa: S608 - no values from outside
        )

    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]:
        """Row count and md5 of each table's rows in order, of each large object, and the
        sequence and the view."""
        found = {}
        for table in PG_TABLES:
            copy = f"COPY (SELECT * FROM {table} ORDER BY id) TO STDOUT"  # noqa: S608
            rows = pg_query(port, credentials, copy)
            # psql() strips the last row's newline.
            found[table] = rows_digest(rows.encode() + b"\n" if rows else b"")
        found["large objects"] = pg_query(
            port,
            credentials,
            "SELECT count(*) || ' ' || string_agg(oid || ':' || md5(lo_get(oid)), ',' ORDER BY oid)"
            " FROM pg_largeobject_metadata",
        )
        found["sequence"] = pg_query(port, credentials, "SELECT last_value FROM orders_id_seq")
        found["view"] = pg_query(
            port, credentials, "SELECT count(*) || ' ' || sum(total) FROM big_spenders"
        )
        return found

    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        size = int(pg_query(port, credentials, "SELECT pg_database_size(current_database())"))
        return pg_query(port, credentials, "SHOW server_version"), f"{size / MB:.1f} MB on disk"

    def restore(self, pod: Pod, folder: Path) -> Restored:
        user = run_as()
        stand_in = StandIn.create(folder / "image", user)
        local = Local(path=stand_in.path(postgres_bin()), user=user)
        ran = succeeded(pod.run_all({"restore": local}), pod)
        assert stand_in.args() == ["postgres"], "the restore ends in the image's entrypoint"
        loader = the_loader(pod)
        # The entrypoint's env: the container's, what its first start exports, and PGHOST for
        # this machine's socket folder (a pod's is the default /var/run/postgresql).
        sockets = owned(folder / "sockets", user)
        env = pod.environment("restore", Local(path=PG_PATH))
        env |= {
            "PGHOST": str(sockets),
            "PGUSER": env["POSTGRES_USER"],
            "PGPASSWORD": env["POSTGRES_PASSWORD"],
        }
        with postgres_first_start(env, sockets, user):
            loaded = source_init_script(loader, env, user)
            assert loaded.returncode == 0, loaded.stderr
            assert "database-operator: restored" in loaded.stdout
            assert not pg_running(env, user), "the loader stops the temporary server"
        return Restored(ran["fetch"], loaded, Path(env["PGDATA"]))

    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        sockets = owned(folder / "sockets", run_as())
        return self._serving(db, restored.data, sockets, credentials, folder / "server.log")


def rows_digest(rows: bytes) -> str:
    """How many rows (lines, each ended by a newline: the clients escape those in values)
    and the md5 of them all."""
    count = rows.count(b"\n")
    return f"{count} rows, md5 {hashlib.md5(rows).hexdigest()}"  # noqa: S324


# --- MySQL (MariaDB standing in) -----------------------------------------------------------------

MYSQL_TABLES = ("customers", "orders", "attachments")


class MySQL:
    engine = Engine.MYSQL
    version = installed_version("mariadbd", r"Ver (\d+)\.(\d+)")
    dump_path = os.environ["PATH"]

    @contextlib.contextmanager
    def source(self, db: Database, credentials: Mapping[str, str], folder: Path) -> Iterator[int]:
        user = engine_user(Engine.MYSQL)
        data = owned(folder / "volume", user) / "mysql"
        socket = folder / "volume" / "mysqld.sock"
        env = container_env(db, dict(credentials))
        with mysql_first_start(env, data, socket, folder / "first-start.log", user):
            pass
        with self._serving(data, socket, credentials, folder / "server.log") as port:
            yield port

    @contextlib.contextmanager
    def _serving(
        self, data: Path, socket: Path, credentials: Mapping[str, str], log: Path
    ) -> Iterator[int]:
        """The server as the image's entrypoint starts it, on 127.0.0.1 and a free port."""
        port = free_port()
        argv = mariadbd(data, socket, f"--port={port}", "--bind-address=127.0.0.1")
        with running(argv, dict(os.environ), log, engine_user(Engine.MYSQL)):
            username, password = credentials["username"], credentials["password"]
            wait_for(lambda: mysql_answers(username, password, port=port), what="MariaDB to answer")
            yield port

    def query(self, port: int, credentials: Mapping[str, str], sql: str) -> bytes:
        user = credentials["username"]
        return mysql(sql, user, credentials["password"], port=port, database=user)

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None:
        """As the application (the Database's user): InnoDB tables with a foreign key, a
        trigger that fills a column, a stored function, a view, binary data."""
        self.query(
            port,
            credentials,
            f"""
            CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL,
                                    email VARCHAR(200) UNIQUE, created DATETIME NOT NULL)
              ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
            INSERT INTO customers SELECT seq, CONCAT('customer ', seq),
                CONCAT('c', seq, '@example.com'), '2024-01-01' + INTERVAL seq MINUTE
              FROM seq_1_to_10000;
            CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL,
                                 amount DECIMAL(12, 2), note TEXT, placed DATE,
                                 audited VARCHAR(20),
                                 KEY by_customer (customer),
                                 CONSTRAINT orders_customer FOREIGN KEY (customer)
                                   REFERENCES customers (id))
              ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
            CREATE TRIGGER orders_audit BEFORE INSERT ON orders FOR EACH ROW
              SET NEW.audited = CONCAT('trigger ', NEW.customer % 7);
            CREATE FUNCTION order_total(c INT) RETURNS DECIMAL(14, 2) READS SQL DATA
              RETURN (SELECT COALESCE(SUM(amount), 0) FROM orders WHERE customer = c);
            INSERT INTO orders (customer, amount, note, placed)
              SELECT 1 + seq % 10000, (seq % 99991) / 100,
                     CONCAT(MD5(seq), MD5(seq * 31), MD5(seq * 97), ' ünïcødé'),
                     '2024-01-01' + INTERVAL (seq % 365) DAY
                FROM seq_1_to_{amount};
            CREATE TABLE attachments (id INT PRIMARY KEY, body BLOB NOT NULL) ENGINE=InnoDB;
            INSERT INTO attachments SELECT seq, UNHEX(REPEAT(CONCAT(MD5(seq), MD5(-seq)), 32))
              FROM seq_1_to_2000;
            CREATE VIEW big_spenders AS SELECT customer, SUM(amount) AS total FROM orders
              GROUP BY customer HAVING SUM(amount) > {amount // 20};
            """,  # noqa: S608 - no values from outside
        )

    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]:
        """Row count and md5 of each table's rows in order; the trigger, the function (its
        definition and a result), the view and the next AUTO_INCREMENT value."""
        found = {
            table: rows_digest(self.query(port, credentials, f"SELECT * FROM {table} ORDER BY id"))  # noqa: S608
            for table in MYSQL_TABLES
        }
        for name, sql in {
            "triggers": "SELECT TRIGGER_NAME, EVENT_MANIPULATION, ACTION_TIMING, ACTION_STATEMENT,"
            " DEFINER FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
            "routines": "SELECT ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION, DEFINER"
            " FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()",
            "function": "SELECT order_total(42)",
            "view": "SELECT COUNT(*), SUM(total) FROM big_spenders",
            "auto increment": "SELECT AUTO_INCREMENT FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'",
        }.items():
            found[name] = self.query(port, credentials, sql).decode().strip()
        return found

    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        size = self.query(
            port,
            credentials,
            "SELECT SUM(DATA_LENGTH + INDEX_LENGTH) FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE()",
        )
        version = self.query(port, credentials, "SELECT VERSION()").decode().strip()
        return version, f"{int(size) / MB:.1f} MB of InnoDB tables and indexes"

    def restore(self, pod: Pod, folder: Path) -> Restored:
        user = engine_user(Engine.MYSQL)
        stand_in = StandIn.create(folder / "image", user)
        ran = succeeded(pod.run_all({"restore": Local(path=stand_in.path(), user=user)}), pod)
        assert stand_in.args() == ["mysqld"], "the restore ends in the image's entrypoint"
        loader = the_loader(pod)
        env = pod.environment("restore", Local())
        data = Path(env["RESTORE_DATA_DIR"])
        socket = data.parent / f"{data.name}.sock"
        # The entrypoint's env: the container's and SOCKET, where its temporary server listens.
        env["SOCKET"] = str(socket)
        with mysql_first_start(env, data, socket, folder / "first-start.log", user):
            loaded = source_init_script(loader, env, user)
            assert loaded.returncode == 0, loaded.stderr
            assert "database-operator: restored" in loaded.stdout
            pid = data.parent / "mysqld.pid"
            wait_for(lambda: not pid.exists(), what="the loader to stop the temporary server")
        return Restored(ran["fetch"], loaded, data)

    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        socket = restored.data.parent / f"{restored.data.name}.sock"
        return self._serving(restored.data, socket, credentials, folder / "server.log")


# --- Redis ---------------------------------------------------------------------------------------

#: Every key's name, type, whether it expires, and value (members sorted where the type has no
#: order), in key order: the count and a SHA-1 of it all (Redis's Lua has sha1hex).
REDIS_DIGEST = r"""
local keys = redis.call('KEYS', '*')
table.sort(keys)
local out = {}
for _, key in ipairs(keys) do
  local kind = redis.call('TYPE', key)['ok']
  local parts = {key, kind, redis.call('PTTL', key) > 0 and 'expires' or 'persists'}
  if kind == 'string' then
    parts[#parts + 1] = redis.call('GET', key)
  elseif kind == 'hash' then
    local flat, fields = redis.call('HGETALL', key), {}
    for i = 1, #flat, 2 do fields[#fields + 1] = flat[i] .. '=' .. flat[i + 1] end
    table.sort(fields)
    parts[#parts + 1] = table.concat(fields, ',')
  elseif kind == 'list' then
    parts[#parts + 1] = table.concat(redis.call('LRANGE', key, 0, -1), ',')
  elseif kind == 'set' then
    local members = redis.call('SMEMBERS', key)
    table.sort(members)
    parts[#parts + 1] = table.concat(members, ',')
  elseif kind == 'zset' then
    parts[#parts + 1] = table.concat(redis.call('ZRANGE', key, 0, -1, 'WITHSCORES'), ',')
  elseif kind == 'stream' then
    for _, entry in ipairs(redis.call('XRANGE', key, '-', '+')) do
      parts[#parts + 1] = entry[1] .. ':' .. table.concat(entry[2], ',')
    end
  else
    return redis.error_reply('no digest for type ' .. kind)
  end
  out[#out + 1] = table.concat(parts, '\0')
end
return {#keys, redis.sha1hex(table.concat(out, '\n'))}
"""


def resp(*args: str | bytes) -> bytes:
    """One command in Redis's protocol (what `redis-cli --pipe` sends as it is)."""
    parts = [arg.encode() if isinstance(arg, str) else arg for arg in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


class Redis:
    engine = Engine.REDIS
    version = installed_version("redis-server", r"v=(\d+)\.(\d+)")
    dump_path = os.environ["PATH"]

    @contextlib.contextmanager
    def source(self, db: Database, credentials: Mapping[str, str], folder: Path) -> Iterator[int]:
        with self._serving(
            db,
            credentials,
            owned(folder / "data", engine_user(Engine.REDIS)),
            folder / "server.log",
        ) as port:
            yield port

    @contextlib.contextmanager
    def _serving(
        self, db: Database, credentials: Mapping[str, str], data: Path, log: Path
    ) -> Iterator[int]:
        """The server as the Database's pod runs it (its recipe and spec.parameters), on
        127.0.0.1 and a free port."""
        port = free_port()
        local = [*settings(db), "--bind", "127.0.0.1"]
        recipe = replication.primary(Engine.REDIS, port=port, data_dir=str(data), settings=local)
        env = container_env(db, dict(credentials))
        argv, server_env = redis_server(recipe, env, data.parent)
        with running(argv, server_env, log, engine_user(Engine.REDIS)):
            password = credentials["password"]
            wait_for(lambda: ping(port, password), what="Redis to answer")
            # Loading a large dataset answers LOADING until it is done.
            wait_for(
                lambda: "loading:0" in redis_cli(port, password, "INFO", "persistence"),
                what="Redis to load",
            )
            yield port

    def write(self, port: int, credentials: Mapping[str, str], amount: int) -> None:
        """``amount`` keys of every type: strings (binary ones, some expiring in a day),
        hashes, lists, sets, sorted sets, and a stream."""
        commands = bytearray()
        for i in range(amount):
            kind = i % 10
            if kind < 6:
                expiry = ["PX", "86400000"] if i % 100 == 0 else []
                commands += resp("SET", f"string:{i}", b"value %d \x00\xff\r\n" % i, *expiry)
            elif kind == 6:
                commands += resp(
                    "HSET",
                    f"hash:{i}",
                    "name",
                    f"n{i}",
                    "count",
                    str(i),
                    "blob",
                    bytes([i % 256]) * 40,
                )
            elif kind == 7:
                commands += resp("RPUSH", f"list:{i}", *(f"item {i}.{j}" for j in range(5)))
            elif kind == 8:
                commands += resp("SADD", f"set:{i}", *(f"member {i * j % 97}" for j in range(1, 6)))
            else:
                commands += resp("ZADD", f"zset:{i}", "1.5", "a", "-2", f"b{i}", "3e10", "c")
        for i in range(100):
            commands += resp("XADD", "events", f"{i + 1}-1", "order", str(i), "state", "placed")
        done = subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--no-auth-warning", "--pipe"],
            input=bytes(commands),
            env={**os.environ, "REDISCLI_AUTH": credentials["password"]},
            capture_output=True,
            check=True,
        )
        assert b"errors: 0" in done.stdout, done.stdout

    def digest(self, port: int, credentials: Mapping[str, str]) -> dict[str, str]:
        count, sha1 = redis_cli(port, credentials["password"], "EVAL", REDIS_DIGEST, "0").split()
        return {"keys": count, "sha1": sha1}

    def about(self, port: int, credentials: Mapping[str, str]) -> tuple[str, str]:
        info = redis_cli(port, credentials["password"], "INFO", "server", "memory")
        said = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        return said["redis_version"], f"{said['used_memory_human']} in memory"

    def restore(self, pod: Pod, folder: Path) -> Restored:
        ran = succeeded(pod.run_all({"restore": Local(user=engine_user(Engine.REDIS))}), pod)
        assert "database-operator: restored" in ran["restore"].stdout
        return Restored(ran["fetch"], ran["restore"], Path(pod.env("restore")["RESTORE_DATA_DIR"]))

    def serve(
        self, db: Database, credentials: Mapping[str, str], restored: Restored, folder: Path
    ) -> AbstractContextManager[int]:
        return self._serving(db, credentials, restored.data, folder / "server.log")


POSTGRES, MYSQL, REDIS = Postgres(), MySQL(), Redis()
