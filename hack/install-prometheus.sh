#!/usr/bin/env bash
# Makes sure `prometheus` and `promtool` are on PATH (the Prometheus integration tests run a real
# server and `promtool check metrics`). When both are there it does nothing; otherwise it installs
# Debian's `prometheus` package (which ships both) non-interactively. Needs root and apt-get.
#
# The package's maintainer scripts would start a system service; nothing here wants one, so a
# temporary policy-rc.d (the Debian mechanism that invoke-rc.d and deb-systemd-invoke both obey)
# forbids it while the package installs. Without systemd (containers, CI) that is all there is to
# it; with systemd the unit is stopped again if it came up anyway.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "[prometheus] prometheus/promtool missing and no apt-get here: install Prometheus" \
        "(https://prometheus.io/download/) so that both are on PATH" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "[prometheus] prometheus/promtool missing: run this as root (apt-get install)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
added_policy=""
cleanup() {
    if [ -n "$added_policy" ]; then rm -f "$policy"; fi
}
trap cleanup EXIT
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# hack/install-prometheus.sh: start no service while installing\nexit 101\n' \
        >"$policy"
    chmod 0755 "$policy"
    added_policy=1
fi

install_package() {
    apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold prometheus
}

# `apt-get update` only when the package lists do not know the package, or are too old to fetch it.
if ! apt-cache show prometheus >/dev/null 2>&1; then
    echo "[prometheus] apt-get update" >&2
    apt-get update -qq
fi
echo "[prometheus] installing Debian's prometheus package" >&2
if ! install_package; then
    echo "[prometheus] install failed; refreshing the package lists and retrying" >&2
    apt-get update -qq
    install_package
fi

# Debian installs the binaries into /usr/bin; on a systemd host the service may still have been
# enabled and started by an existing policy that allowed it: stop it, the tests run their own.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl stop prometheus.service >/dev/null 2>&1 || true
fi

for tool in prometheus promtool; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "[prometheus] $tool is still not on PATH after installing the package" >&2
        exit 1
    fi
done
version="$(prometheus --version 2>&1)"
echo "${version%%$'\n'*}" >&2
