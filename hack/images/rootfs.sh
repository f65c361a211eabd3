# shellcheck shell=bash disable=SC2016 # the hooks' "$1" is for mmdebstrap's sh to expand
# Sourced by the images' build.sh: a Debian bookworm root file system, made by mmdebstrap as one
# tar, which is the image's single layer (see mkimage.py).
#
#   debian_rootfs OUT.tar PACKAGES [MMDEBSTRAP-OPTION...]
#
# PACKAGES (comma-separated) are installed without their recommends over the Essential:yes set,
# from the suites the machines' apt uses (bookworm, its updates and its security updates). Manual
# pages, docs (but the copyright files), info pages and translations are left out; apt's lists
# and caches and the host's resolv.conf and hostname are left out; /run is kept (mmdebstrap would
# empty it, and the images keep their sockets' directories there). The options (hooks, mostly)
# come before the clean-up. A hook runs outside the chroot with the root as "$1": write
# "$1"/run/..., never "$1"/var/run/... (an absolute symlink to the host's /run).
#
#   service_user NAME ID HOME GECOS SHELL
#
# prints an --essential-hook option that adds the user NAME and its group with uid = gid = ID
# before the packages install, so that their maintainer scripts (adduser --system) keep it: the
# official images' service users are 999, and the operator's pods run as that.

DEBIAN_SUITE=bookworm
DEBIAN_SOURCES=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)

debian_rootfs() {
  local out="$1" packages="$2"
  shift 2
  nice -n 19 mmdebstrap --quiet --variant=essential --mode=root --skip=cleanup/run \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --include="$packages" \
    "$@" \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*.log "$1"/var/log/apt/* "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old' \
    --customize-hook=': > "$1"/etc/resolv.conf; : > "$1"/etc/hostname' \
    "$DEBIAN_SUITE" "$out" "${DEBIAN_SOURCES[@]}"
}

service_user() {
  local name="$1" id="$2" home="$3" gecos="$4" shell="$5"
  printf -- '--essential-hook=echo %s >> "$1"/etc/passwd && echo %s >> "$1"/etc/group\n' \
    "'$name:x:$id:$id:$gecos:$home:$shell'" "'$name:x:$id:'"
}

# pack_image ROOTFS.tar OUT REF [mkimage.py OPTION...]: the image archive of the layer ROOTFS.tar.
pack_image() {
  local layer="$1" out="$2" ref="$3"
  shift 3
  python3 "$(dirname "${BASH_SOURCE[0]}")/mkimage.py" --layer "$layer" --ref "$ref" --out "$out" "$@"
}
