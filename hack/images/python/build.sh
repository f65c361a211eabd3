#!/usr/bin/env bash
# build.sh OUT REF: a Python 3.11 base made of Debian's packages, standing in for the official
# python:3.11-slim-bookworm when the operator's image is built here (hack/images/operator): the
# interpreter (python3 and `python`), venv with pip, and what the slim image also carries that
# the operator may use (CA certificates, /etc/services and /etc/protocols, time zones), plus
# groupadd/useradd (passwd). Debian's interpreter is /usr/bin/python3.11, not /usr/local/bin.
# shellcheck disable=SC2016 # the hooks' "$1" is for mmdebstrap's sh to expand
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT REF}" ref="${2:?usage: build.sh OUT REF}"
# shellcheck source=hack/images/rootfs.sh
. "$here/../rootfs.sh"
layer="$out.layer.tar"
trap 'rm -f "$layer"' EXIT

debian_rootfs "$layer" python3,python3-venv,python3-pip,python-is-python3,passwd,ca-certificates,netbase,tzdata \
  --customize-hook='chroot "$1" python -B -c "import ensurepip, ssl, sqlite3, venv"'

pack_image "$layer" "$out" "$ref" \
  --cmd '["python3"]' --env LANG=C.UTF-8 \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
