#!/usr/bin/env bash
# Usage: hack/apt-install.sh PACKAGE COMMAND [COMMAND...]
# Makes sure each COMMAND is on PATH (or, for one with a '/', that a file matches that pattern),
# installing Debian's PACKAGE (non-interactively) when one is missing. When all are there it does
# nothing. Needs root and apt-get to install.
#
# Packages that ship a service (prometheus, postgresql, redis-server) would start it from their
# maintainer scripts; the tests run their own, so a temporary policy-rc.d (the Debian mechanism
# that invoke-rc.d and deb-systemd-invoke both obey) forbids it while the package installs.
# Without systemd (containers, CI) that is all there is to it; with systemd the unit is stopped
# again if it came up anyway.
set -euo pipefail

package="${1:?usage: $0 PACKAGE COMMAND...}"
shift
commands=("$@")

missing() {
    local command
    for command in "${commands[@]}"; do
        if [[ "$command" == */* ]]; then
            compgen -G "$command" >/dev/null || return 0
        elif ! command -v "$command" >/dev/null 2>&1; then
            return 0
        fi
    done
    return 1
}

if ! missing; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "[$package] ${commands[*]} missing and no apt-get here: install $package so that" \
        "they are on PATH" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "[$package] ${commands[*]} missing: run this as root (apt-get install $package)" >&2
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
    printf '#!/bin/sh\n# hack/apt-install.sh: start no service while installing\nexit 101\n' \
        >"$policy"
    chmod 0755 "$policy"
    added_policy=1
fi

install_package() {
    apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$package" \
        >/dev/null
}

# `apt-get update` only when the package lists do not know the package, or are too old to fetch it.
if ! apt-cache show "$package" >/dev/null 2>&1; then
    echo "[$package] apt-get update" >&2
    apt-get update -qq
fi
echo "[$package] installing Debian's $package package" >&2
if ! install_package; then
    echo "[$package] install failed; refreshing the package lists and retrying" >&2
    apt-get update -qq
    install_package
fi

# On a systemd host the service may still have been enabled and started by an existing policy
# that allowed it: stop it, the tests run their own.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl stop "$package.service" >/dev/null 2>&1 || true
fi

if missing; then
    echo "[$package] ${commands[*]} still not all on PATH after installing the package" >&2
    exit 1
fi
