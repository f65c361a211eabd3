#!/usr/bin/env bash
# Makes sure the database engines' own programs are here, from Debian's packages: the recipe tests
# run them on loopback — a real PostgreSQL primary and replica (initdb, postgres, pg_basebackup,
# psql) and a real Redis primary and replica (redis-server, redis-cli) for replication, and all
# three engines for the backup and restore recipes (pg_dump, pg_restore, mysqldump,
# redis-cli --rdb, redis-check-rdb) — and Debian's builds of the metrics exporters the pods run
# beside them, which the exporter tests start against those engines.
set -euo pipefail
here="$(dirname "$0")"
# PostgreSQL's server programs live in /usr/lib/postgresql/<version>/bin; psql and
# pg_basebackup are on PATH through postgresql-common's wrapper.
"$here/apt-install.sh" postgresql '/usr/lib/postgresql/*/bin/postgres' psql pg_basebackup \
  pg_dump pg_restore
"$here/apt-install.sh" redis-server redis-server redis-cli redis-check-rdb
# MariaDB stands in for MySQL in the backup recipe tests: the same mysqldump and mysql clients and
# the same SQL dump of an InnoDB database (the pods run the official MySQL image).
"$here/apt-install.sh" mariadb-server mariadbd mysql mysqldump mysqladmin mariadb-install-db
# The exporters: Debian bookworm packages the very upstream releases engines.py pins in the
# exporter images (tests/integration/test_exporters.py fails should `--version` say another).
"$here/apt-install.sh" prometheus-postgres-exporter prometheus-postgres-exporter
"$here/apt-install.sh" prometheus-mysqld-exporter prometheus-mysqld-exporter
"$here/apt-install.sh" prometheus-redis-exporter prometheus-redis-exporter
