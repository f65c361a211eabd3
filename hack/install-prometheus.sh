#!/usr/bin/env bash
# Makes sure `prometheus` and `promtool` are on PATH (the Prometheus integration tests run a real
# server and `promtool check metrics`), from Debian's `prometheus` package when they are missing.
set -euo pipefail
"$(dirname "$0")/apt-install.sh" prometheus prometheus promtool
version="$(prometheus --version 2>&1)"
echo "${version%%$'\n'*}" >&2
