#!/usr/bin/env python3
"""Wrap one filesystem layer (a tar, as mmdebstrap writes it) into an image archive that
`ctr images import` and `buildah pull docker-archive:` read: the layout `docker save` writes
(manifest.json, the image config, ``<digest>/layer.tar``), so no registry and no daemon are
needed. Standard library only; the layer is stored uncompressed (importing is then a copy).

    mkimage.py --layer rootfs.tar --ref localhost/debian/postgresql:15 \
        --entrypoint '["docker-entrypoint.sh"]' --cmd '["postgres"]' \
        --env PGDATA=/var/lib/postgresql/data --user 999:999 --port 5432/tcp --out image.tar
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
import time
from pathlib import Path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as layer:
        for chunk in iter(lambda: layer.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def image_config(args: argparse.Namespace, diff_id: str) -> dict[str, object]:
    """The OCI/Docker image config: how a container of it starts."""
    config: dict[str, object] = {"Env": args.env}
    for key, value in (
        ("Entrypoint", json.loads(args.entrypoint) if args.entrypoint else None),
        ("Cmd", json.loads(args.cmd) if args.cmd else None),
        ("User", args.user),
        ("WorkingDir", args.workdir),
        ("StopSignal", args.stopsignal),
        ("ExposedPorts", {port: {} for port in args.port} or None),
        ("Labels", dict(label.split("=", 1) for label in args.label) or None),
    ):
        if value:
            config[key] = value
    return {
        "architecture": "amd64",
        "os": "linux",
        # A fixed time: the same layer and settings give the same image id.
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.created)),
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "hack/images/mkimage.py"}],
    }


def write_archive(args: argparse.Namespace) -> None:
    layer = Path(args.layer)
    diff_id = _sha256(layer)
    config = json.dumps(image_config(args, diff_id), sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": [args.ref], "Layers": [f"{diff_id}/layer.tar"]}]
    ).encode()
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in ((config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), args.created
            archive.addfile(info, io.BytesIO(data))
        archive.add(layer, arcname=f"{diff_id}/layer.tar", recursive=False)
    tmp.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layer", required=True, help="the filesystem layer (a tar)")
    parser.add_argument("--ref", required=True, help="the image's name, e.g. localhost/x:1")
    parser.add_argument("--out", required=True, help="the image archive to write")
    parser.add_argument("--entrypoint", help="JSON list")
    parser.add_argument("--cmd", help="JSON list")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE (repeat)")
    parser.add_argument("--user", help="uid[:gid]")
    parser.add_argument("--workdir")
    parser.add_argument("--stopsignal")
    parser.add_argument("--port", action="append", default=[], help="5432/tcp (repeat)")
    parser.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeat)")
    parser.add_argument("--created", type=int, default=0, help="epoch seconds (default 0)")
    write_archive(parser.parse_args())


if __name__ == "__main__":
    main()
