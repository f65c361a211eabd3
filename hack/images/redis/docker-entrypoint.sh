#!/bin/sh
# The entry point of localhost/debian/redis: the contract the official redis image follows,
# written anew for Debian's Redis.
#
#   - Options first (`--port 6379`...) or a first argument ending in .conf are the server's:
#     `redis-server` is put before them. No config file is read unless one is given, so the
#     server runs on its built-in defaults (logging to stdout, its files in the working
#     directory, /data).
#   - Started as root to run redis-server: what the working directory holds is given to redis
#     (999), which the server then runs as (setpriv).
#   - The default umask 0022 becomes 0077: the data files are the server's alone.
#   - Anything else is exec-ed as given.
set -e

case "${1:-}" in
  -* | *.conf) set -- redis-server "$@" ;;
esac

if [ "${1:-}" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . ! -user redis -exec chown redis '{}' +
  exec setpriv --reuid=redis --regid=redis --init-groups -- "$0" "$@"
fi

if [ "$(umask)" = 0022 ]; then
  umask 0077
fi

exec "$@"
