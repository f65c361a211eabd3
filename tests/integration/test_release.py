"""The release and promotion scripts the workflows call, run for real: against an OCI registry on
loopback (tests/registry.py, pushed to with crane and helm as the workflows do), real git
repositories, and the session's kube-apiserver for installing a released chart.

What cannot run here is said in docs/pipeline.md: the multi-arch build, Trivy, cosign's keyless
signing and the attestations need Docker, GitHub's OIDC token and Sigstore.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cluster import Cluster
from tests.controlplane import ROOT, free_port
from tests.integration.helm import CHART_NAME, Helm, fullname
from tests.registry import CRANE, Registry, running_registry

IMAGE = ROOT / "hack" / "image.sh"
RELEASE = ROOT / "hack" / "release.py"
REPOSITORY = "acme/database-operator"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with running_registry(tmp_path_factory.mktemp("registry") / "registry.log") as running:
        yield running


def run(
    *args: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_released_chart_installs_from_the_registry_and_runs_the_released_digest(
    registry: Registry, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    digest = registry.push_image(REPOSITORY, "1.2.3", "the operator, release 1.2.3", tmp_path)
    repository = f"{registry.host}/{REPOSITORY}"
    packaged = run(
        RELEASE, "package-chart", "--version", "1.2.3", "--repository", repository,
        "--digest", digest, "--out", tmp_path / "chart", "--helm", ROOT / "bin" / "helm",
    )  # fmt: skip
    assert packaged.returncode == 0, packaged.stderr
    package = Path(packaged.stdout.strip())
    assert package.name == f"{CHART_NAME}-1.2.3.tgz"

    helm = Helm(cluster.kubeconfig, tmp_path / "helm")
    pushed = helm("push", str(package), f"oci://{registry.host}/acme/charts", "--plain-http")
    assert (
        f"Pushed: {registry.host}/acme/charts/{CHART_NAME}:1.2.3" in pushed.stdout + pushed.stderr
    )
    chart_ref = f"oci://{registry.host}/acme/charts/{CHART_NAME}"
    shown = yaml.safe_load(
        helm("show", "chart", chart_ref, "--version", "1.2.3", "--plain-http").stdout
    )
    assert (shown["version"], shown["appVersion"]) == ("1.2.3", "1.2.3")

    # As the README says a user installs a release (the session cluster has the CRDs already;
    # nothing here could answer the chart's webhooks).
    release = f"rel-{uuid.uuid4().hex[:6]}"
    helm(
        "install", release, chart_ref, "--version", "1.2.3", "--plain-http",
        "--namespace", namespace, "--set", "crds.enabled=false,webhook.enabled=false",
    )  # fmt: skip
    try:
        deployment = cluster.apps.read_namespaced_deployment(fullname(release), namespace)
        assert deployment.spec.template.spec.containers[0].image == f"{repository}@{digest}"
        assert deployment.metadata.labels["app.kubernetes.io/version"] == "1.2.3"
    finally:
        helm("uninstall", release, "--namespace", namespace)


def test_a_chart_is_never_packaged_with_a_wrong_version_digest_or_repository(
    tmp_path: Path,
) -> None:
    digest = "sha256:" + "a" * 64
    for args, error in [
        (["--version", "1.2", "--repository", "ghcr.io/a/b", "--digest", digest], "not semver"),
        (["--version", "1.2.3", "--repository", "ghcr.io/a/b", "--digest", "latest"], "digest"),
        (["--version", "1.2.3", "--repository", "ghcr.io/Acme/b", "--digest", digest], "lower"),
        (["--version", "1.2.3", "--repository", "ghcr.io/a/b:1", "--digest", digest], "tag"),
    ]:
        done = run(RELEASE, "package-chart", *args, "--out", tmp_path)
        assert done.returncode == 2, args
        assert error in done.stderr, done.stderr
    assert not list(tmp_path.iterdir())


class Repo:
    """A git repository with the deploy branches, as the deploy job's checkout has them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "--quiet", "--initial-branch=main")
        self.commit("base", "README", "base\n")
        self.git("branch", "staging")
        self.git("branch", "develop")

    def git(self, *args: str) -> str:
        done = run(
            "git", "-c", "user.name=CI", "-c", "user.email=ci@example.com", *args, cwd=self.path
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(self, message: str, name: str, content: str) -> str:
        (self.path / name).write_text(content)
        self.git("add", name)
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD")

    def on(self, branch: str) -> None:
        self.git("checkout", "--quiet", branch)


@pytest.fixture
def promote(registry: Registry, tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    """A repository, and hack/image.sh's environment for an image repository of the test's own."""
    repository = f"{REPOSITORY}-{uuid.uuid4().hex[:6]}"
    env = {
        "IMAGE_REPOSITORY": f"{registry.host}/{repository}",
        "CRANE": str(CRANE),
        "CRANE_FLAGS": "--insecure",
        # The branches are local here; the workflow's checkout has them under origin/.
        "LOWER_REF_PREFIX": "",
    }
    return Repo(tmp_path / "repo"), env


def test_promotion_by_digest_follows_the_source_tree_through_merges(
    registry: Registry, promote: tuple[Repo, dict[str, str]], tmp_path: Path
) -> None:
    repo, env = promote
    repository = env["IMAGE_REPOSITORY"].removeprefix(f"{registry.host}/")

    def image(*args: str) -> subprocess.CompletedProcess[str]:
        return run(IMAGE, *args, cwd=repo.path, env=env)

    def ci_builds(commit: str) -> str:
        """What ci.yaml's publish job leaves: the scanned image tagged sha-<commit>."""
        return registry.push_image(repository, f"sha-{commit}", commit, tmp_path / commit)

    # develop: dev deploys the image CI built for the commit, and its tag moves after the smoke.
    repo.on("develop")
    feature = repo.commit("feature", "app.py", "v1\n")
    built = ci_builds(feature)
    done = image("digest", "dev", feature)
    assert (done.returncode, done.stdout.strip()) == (0, built), done.stderr
    assert image("tag", built, "dev").returncode == 0
    assert registry.digest(repository, "dev") == built
    assert registry.digest(repository, f"dev-{built.removeprefix('sha256:')}") == built

    # staging: a merge commit (a new SHA, the same tree) promotes the digest dev ran...
    repo.on("staging")
    repo.git("merge", "--quiet", "--no-ff", "-m", "release", "develop")
    merge = repo.git("rev-parse", "HEAD")
    assert merge != feature
    done = image("digest", "staging", merge)
    assert (done.returncode, done.stdout.strip()) == (0, built), done.stderr
    assert f"built from {feature}" in done.stderr

    # ...and still does after dev moved on to a newer commit: dev ran it and it passed there.
    repo.on("develop")
    newer = repo.commit("newer", "app.py", "v2\n")
    newer_built = ci_builds(newer)
    assert image("tag", newer_built, "dev").returncode == 0
    done = image("digest", "staging", merge)
    assert (done.returncode, done.stdout.strip()) == (0, built), done.stderr

    # A squash of develop into staging (one new commit, develop's tree) promotes develop's image.
    repo.on("staging")
    repo.git("merge", "--quiet", "--squash", "develop")
    repo.git("commit", "--quiet", "-m", "squashed")
    squash = repo.git("rev-parse", "HEAD")
    done = image("digest", "staging", squash)
    assert (done.returncode, done.stdout.strip()) == (0, newer_built), done.stderr

    # A change made on staging itself never ran on dev: refused, saying what to do.
    hotfix = repo.commit("hotfix on staging", "app.py", "v2-hotfix\n")
    done = image("digest", "staging", hotfix)
    assert done.returncode == 1
    assert "was never on develop" in done.stderr
    assert "bring develop into the staging branch as it is" in done.stderr

    # prod promotes only what staging ran and passed.
    repo.on("staging")
    repo.git("reset", "--quiet", "--hard", squash)
    repo.on("main")
    repo.git("merge", "--quiet", "--no-ff", "-m", "to prod", "staging")
    prod = repo.git("rev-parse", "HEAD")
    done = image("digest", "prod", prod)
    assert done.returncode == 1
    assert "staging never passed a smoke test" in done.stderr
    assert image("tag", newer_built, "staging").returncode == 0
    done = image("digest", "prod", prod)
    assert (done.returncode, done.stdout.strip()) == (0, newer_built), done.stderr


def test_a_commit_without_a_scanned_image_or_a_missing_release_is_refused(
    registry: Registry, promote: tuple[Repo, dict[str, str]]
) -> None:
    repo, env = promote
    repo.on("develop")
    unscanned = repo.commit("never built", "app.py", "x\n")
    done = run(IMAGE, "digest", "dev", unscanned, cwd=repo.path, env=env)
    assert done.returncode == 1
    assert f"no scanned image for {unscanned}" in done.stderr
    for args, error in [
        (["digest", "dev", "main"], "not a full commit SHA"),
        (["digest", "qa", unscanned], "unknown environment 'qa'"),
        (["release", "9.9.9"], "no release 9.9.9"),
        (["release", "latest"], "not a release version"),
        (["tag", "latest", "dev"], "not a sha256 digest"),
    ]:
        done = run(IMAGE, *args, cwd=repo.path, env=env)
        assert done.returncode == 1, args
        assert error in done.stderr, done.stderr
    # A registry that does not answer is not an image that was never built.
    unreachable = {**env, "IMAGE_REPOSITORY": f"127.0.0.1:{free_port()}/acme/database-operator"}
    done = run(IMAGE, "digest", "dev", unscanned, cwd=repo.path, env=unreachable)
    assert done.returncode == 1
    assert "cannot read" in done.stderr and "connection refused" in done.stderr
    assert "no scanned image" not in done.stderr


def test_a_release_is_found_by_its_version(
    registry: Registry, promote: tuple[Repo, dict[str, str]], tmp_path: Path
) -> None:
    repo, env = promote
    repository = env["IMAGE_REPOSITORY"].removeprefix(f"{registry.host}/")
    digest = registry.push_image(repository, "2.0.0", "release 2.0.0", tmp_path / "r")
    done = run(IMAGE, "release", "2.0.0", cwd=repo.path, env=env)
    assert (done.returncode, done.stdout.strip()) == (0, digest), done.stderr
