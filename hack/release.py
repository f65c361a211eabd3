#!/usr/bin/env python3
"""The release workflow's decisions, in one place that runs the same on a laptop and is tested.

    hack/release.py version REF            refs/tags/v1.2.3 (or v1.2.3) -> 1.2.3; anything
                                           that is not v + semver is refused
    hack/release.py names OWNER            the lowercase GHCR names of the image and the chart
                                           (GitHub owners may have capitals; GHCR refuses them),
                                           as KEY=VALUE lines for $GITHUB_OUTPUT
    hack/release.py package-chart ...      the chart with version/appVersion = the release and
                                           image.repository/digest = what was built and
                                           scanned, packaged as a .tgz (its path is printed)
    hack/release.py notes ...              the GitHub release's text: install and verify

Only the standard library: the release job runs it with the runner's own python3.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "database-operator"
REGISTRY = "ghcr.io"
IMAGE_NAME = "database-operator"
CHART_NAME = "database-operator"
WORKFLOW = ".github/workflows/release.yaml"
OIDC_ISSUER = "https://token.actions.githubusercontent.com"

# Semantic Versioning 2.0.0's grammar, without build metadata (OCI tags cannot carry '+').
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# An image repository: registry host[:port] and a lowercase path, no tag or digest.
REPOSITORY = re.compile(r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+")


class ReleaseError(Exception):
    """A release input that cannot be right; the message says which and why."""


def version_of(ref: str) -> str:
    """The release version a pushed tag names: refs/tags/v1.2.3 -> 1.2.3."""
    tag = ref.removeprefix("refs/tags/")
    if not tag.startswith("v") or not SEMVER.fullmatch(tag[1:]):
        raise ReleaseError(
            f"tag {tag!r} is not a release tag: releases are tagged v<major>.<minor>.<patch>"
            "[-<pre-release>], e.g. v1.2.3 or v1.3.0-rc.1"
        )
    return tag[1:]


def names(owner: str) -> dict[str, str]:
    """Where a release of OWNER's fork is published. GHCR names must be lowercase."""
    if not re.fullmatch(r"[A-Za-z0-9](-?[A-Za-z0-9])*", owner):
        raise ReleaseError(f"{owner!r} is not a GitHub owner name")
    lower = owner.lower()
    return {
        "image": f"{REGISTRY}/{lower}/{IMAGE_NAME}",
        "chart_registry": f"oci://{REGISTRY}/{lower}/charts",
        "chart": f"oci://{REGISTRY}/{lower}/charts/{CHART_NAME}",
    }


def _replace_line(text: str, pattern: str, replacement: str, what: str) -> str:
    new, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    if count != 1:
        raise ReleaseError(f"the chart has no {what} to set")
    return new


def set_chart_version(chart_yaml: str, version: str) -> str:
    text = _replace_line(chart_yaml, r"^version: .*$", f"version: {version}", "version")
    return _replace_line(text, r"^appVersion: .*$", f'appVersion: "{version}"', "appVersion")


def set_image(values_yaml: str, repository: str, digest: str, version: str) -> str:
    """values.yaml with the released image, its comments (the chart's README) kept: only the
    three lines of the top-level `image:` block change."""
    block = re.search(r"^image:\n((?:[ \t]+.*\n|[ \t]*#.*\n|\n)*)", values_yaml, re.MULTILINE)
    if block is None:
        raise ReleaseError("the chart's values.yaml has no top-level image block")
    body = block.group(1)
    body = _replace_line(body, r"^  repository: .*$", f"  repository: {repository}", "repository")
    body = _replace_line(body, r"^  tag: .*$", f'  tag: "{version}"', "image.tag")
    body = _replace_line(body, r"^  digest: .*$", f'  digest: "{digest}"', "image.digest")
    return values_yaml[: block.start(1)] + body + values_yaml[block.end(1) :]


def package_chart(
    version: str, repository: str, digest: str, out: Path, helm: str = "helm"
) -> Path:
    """Packages a copy of the chart set to this release; the working tree is not touched."""
    if not SEMVER.fullmatch(version):
        raise ReleaseError(f"chart version {version!r} is not semver")
    if not DIGEST.fullmatch(digest):
        raise ReleaseError(f"image digest {digest!r} is not sha256:<64 hex digits>")
    if not REPOSITORY.fullmatch(repository):
        raise ReleaseError(
            f"image repository {repository!r} must be lowercase host/path, without tag or digest"
        )
    with tempfile.TemporaryDirectory() as scratch:
        chart = Path(scratch) / CHART_NAME
        shutil.copytree(CHART, chart)
        chart_yaml = chart / "Chart.yaml"
        chart_yaml.write_text(set_chart_version(chart_yaml.read_text(), version))
        values = chart / "values.yaml"
        values.write_text(set_image(values.read_text(), repository, digest, version))
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [helm, "package", str(chart), "--destination", str(out)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return out / f"{CHART_NAME}-{version}.tgz"


def notes(version: str, repository: str, image_digest: str, chart_digest: str) -> str:
    """The GitHub release's text. REPOSITORY is owner/name as GitHub spells it: the signing
    identity keeps its case, the registry names do not."""
    owner = repository.split("/", 1)[0]
    where = names(owner)
    identity = f"https://github.com/{repository}/{WORKFLOW}@refs/tags/v{version}"
    # cosign names an OCI artifact without helm's oci:// scheme.
    chart_ref = f"{where['chart'].removeprefix('oci://')}@{chart_digest}"
    return f"""\
## Install

```sh
helm install database-operator {where["chart"]} --version {version} \\
  --namespace database-operator-system --create-namespace
```

The chart runs the image by digest: `{where["image"]}@{image_digest}`.

## Verify

Both are signed keyless by this repository's release workflow (Sigstore):

```sh
cosign verify {where["image"]}@{image_digest} \\
  --certificate-identity {identity} \\
  --certificate-oidc-issuer {OIDC_ISSUER}
cosign verify {chart_ref} \\
  --certificate-identity {identity} \\
  --certificate-oidc-issuer {OIDC_ISSUER}
gh attestation verify oci://{where["image"]}@{image_digest} --owner {owner}
```

The image's build provenance and its SBOM (SPDX, by Syft) are attestations stored beside it in
the registry (`gh attestation download` fetches them).

The image passed a Trivy scan (no fixable HIGH or CRITICAL vulnerability) before it was signed.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/release.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    version = commands.add_parser("version", help="the release version of a tag")
    version.add_argument("ref")
    owner = commands.add_parser("names", help="where an owner's release is published")
    owner.add_argument("owner")
    package = commands.add_parser("package-chart", help="package the chart for a release")
    package.add_argument("--version", required=True)
    package.add_argument("--repository", required=True, help="the image repository")
    package.add_argument("--digest", required=True, help="the image digest")
    package.add_argument("--out", type=Path, default=Path(".local/release"))
    package.add_argument("--helm", default="helm")
    text = commands.add_parser("notes", help="the GitHub release's text")
    text.add_argument("--version", required=True)
    text.add_argument("--repository", required=True, help="owner/name of the GitHub repository")
    text.add_argument("--image-digest", required=True)
    text.add_argument("--chart-digest", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "version":
            print(version_of(args.ref))
        elif args.command == "names":
            for key, value in names(args.owner).items():
                print(f"{key}={value}")
        elif args.command == "package-chart":
            print(package_chart(args.version, args.repository, args.digest, args.out, args.helm))
        else:
            for digest in (args.image_digest, args.chart_digest):
                if not DIGEST.fullmatch(digest):
                    raise ReleaseError(f"digest {digest!r} is not sha256:<64 hex digits>")
            print(notes(args.version, args.repository, args.image_digest, args.chart_digest))
    except ReleaseError as error:
        print(f"release: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
