"""The deploy pipeline's decisions, made by scripts that CI calls and people can run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from database_operator.engines import ENGINES
from tests.hack import load

ROOT = Path(__file__).resolve().parents[2]
RESOLVE = ROOT / "hack" / "resolve-env.sh"
release: Any = load("release")


def resolve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(RESOLVE), *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    ("event", "ref", "environment"),
    [
        ("push", "refs/heads/develop", "dev"),
        ("push", "refs/heads/staging", "staging"),
        ("push", "refs/heads/main", "prod"),
        # Refs that must not deploy.
        ("push", "refs/heads/feature/login", ""),
        ("push", "refs/heads/mainline", ""),
        ("push", "refs/heads/develop-old", ""),
        ("push", "refs/tags/v1.0.0", ""),
        ("pull_request", "refs/pull/42/merge", ""),
        ("pull_request", "refs/heads/main", ""),
        ("schedule", "refs/heads/main", ""),
    ],
)
def test_ref_to_environment(event: str, ref: str, environment: str) -> None:
    done = resolve(event, ref)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == environment


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_a_manual_run_deploys_where_it_is_told(environment: str) -> None:
    assert resolve("workflow_dispatch", "refs/heads/anything", environment).stdout.strip() == (
        environment
    )


def test_a_manual_run_to_an_unknown_environment_fails_clearly() -> None:
    done = resolve("workflow_dispatch", "refs/heads/main", "production")
    assert done.returncode == 2
    assert "unknown environment 'production'" in done.stderr


# --- The workflows, read as data: what a review of them checks, checked on every run. ---------

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yaml"))
DEPLOY_ACTION = ROOT / ".github" / "actions" / "deploy" / "action.yaml"
SHA_PIN = re.compile(r"^[ -]*uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$")
#: The one action of this repository, and why zizmor's preferred form for it is not used.
LOCAL_ACTION = (
    "uses: ./.github/actions/deploy # zizmor: ignore[self-repository] actionlint cannot parse $/"
)
DEPLOY_BRANCHES = {"develop": "dev", "staging": "staging", "main": "prod"}


def workflow(name: str) -> dict[str, Any]:
    data: dict[Any, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    data["on"] = data.pop(True)  # YAML 1.1 reads the key `on` as a boolean
    return data


def steps_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job.get("steps", [])  # type: ignore[no-any-return]


def test_the_workflows_are_the_three_we_describe() -> None:
    assert [path.name for path in WORKFLOWS] == ["ci.yaml", "deploy.yaml", "release.yaml"]


@pytest.mark.parametrize("path", [*WORKFLOWS, DEPLOY_ACTION], ids=lambda path: path.name)
def test_every_action_is_pinned_by_a_commit_sha_with_its_version(path: Path) -> None:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if "uses:" in line and not line.strip().startswith("#"):
            assert SHA_PIN.match(line) or line.strip().removeprefix("- ") == LOCAL_ACTION, (
                f"{path.name}:{number}: not pinned by SHA: {line.strip()}"
            )


def test_one_action_one_pin_across_the_workflows() -> None:
    pins: dict[str, set[tuple[str, str]]] = {}
    for path in [*WORKFLOWS, DEPLOY_ACTION]:
        for line in path.read_text().splitlines():
            if match := SHA_PIN.match(line):
                pins.setdefault(match[1], set()).add((match[2], match[3]))
    assert {action: len(seen) for action, seen in pins.items() if len(seen) > 1} == {}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_nothing_is_granted_by_default_and_each_job_says_what_it_needs(path: Path) -> None:
    data = workflow(path.name)
    assert data["permissions"] == {}
    for name, job in data["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} inherits no permissions: say them"
        granted = job["permissions"]
        assert granted.get("contents") in ("read", "write"), name
        # Writing the repository is the release's job alone.
        if granted.get("contents") == "write":
            assert (path.name, name) == ("release.yaml", "github-release")
        if "id-token" in granted:
            assert any("cosign" in str(step) or "attest" in str(step) for step in steps_of(job))


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_checkout_never_keeps_the_token(path: Path) -> None:
    for job in workflow(path.name)["jobs"].values():
        for step in steps_of(job):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_the_release_shares_no_cache_with_ci() -> None:
    text = (ROOT / ".github" / "workflows" / "release.yaml").read_text()
    assert "actions/cache@" not in text
    assert "cache-from" not in text and "cache-to" not in text
    for job in workflow("release.yaml")["jobs"].values():
        for step in steps_of(job):
            uses = str(step.get("uses", ""))
            if uses.startswith(("actions/setup-", "aquasecurity/trivy-action@")):
                assert step["with"]["cache"] is False, uses
            if uses.startswith("docker/build-push-action@"):
                assert step["with"]["no-cache"] is True
                assert "linux/amd64" in step["with"]["platforms"]
                assert "linux/arm64" in step["with"]["platforms"]


def test_the_release_scans_before_it_tags_signs_or_publishes() -> None:
    steps = steps_of(workflow("release.yaml")["jobs"]["image"])
    names = [step.get("name", step.get("uses", "")) for step in steps]
    scan = names.index("Vulnerability scan of the pushed digest")
    for later in (
        "Tag the scanned digest with the version",
        "Sign the image keyless",
        "Attest the SBOM",
        "Attest build provenance",
        "Package, push and sign the chart",
    ):
        assert names.index(later) > scan, later
    assert steps[scan]["with"]["exit-code"] == "1"
    assert steps[scan]["with"]["ignore-unfixed"] is True
    assert "@${{ steps.build.outputs.digest }}" in steps[scan]["with"]["image-ref"]
    assert not any("if" in step for step in steps)


def test_ci_deploys_only_after_every_test_job_passed() -> None:
    jobs = workflow("ci.yaml")["jobs"]
    deploy = jobs["deploy"]
    assert set(deploy["needs"]) == set(jobs) - {"deploy"}
    # image and publish are skipped by branch; a skipped need must not stop the deploy, a
    # failed or cancelled one must.
    assert "!cancelled() && !failure()" in deploy["if"]
    for branch, environment in DEPLOY_BRANCHES.items():
        assert f"refs/heads/{branch}' && '{environment}'" in deploy["environment"] or (
            environment == "prod" and deploy["environment"].rstrip("} \n").endswith("'prod'")
        )


def test_ci_scans_every_image_the_operator_runs_by_default() -> None:
    """Each engine's image at its default version and each exporter's pinned release: the
    list in ci.yaml is engines.py's, so a new default is scanned from the commit it lands in."""
    job = workflow("ci.yaml")["jobs"]["engine-images"]
    scanned = job["strategy"]["matrix"]["image"]
    wanted = [f"{facts.image}:{facts.default_version}" for facts in ENGINES.values()] + [
        facts.exporter.image for facts in ENGINES.values() if facts.exporter is not None
    ]
    assert scanned == wanted
    [scan] = job["steps"]
    assert scan["with"]["image-ref"] == "${{ matrix.image }}"
    assert scan["with"]["exit-code"] == "1"


def test_the_concurrency_groups_agree_with_resolve_env() -> None:
    group = workflow("ci.yaml")["concurrency"]["group"]
    for branch, environment in DEPLOY_BRANCHES.items():
        assert resolve("push", f"refs/heads/{branch}").stdout.strip() == environment
        assert f"github.ref == 'refs/heads/{branch}' && 'deploy-{environment}'" in group
    manual = workflow("deploy.yaml")["concurrency"]
    assert manual == {"group": "deploy-${{ inputs.environment }}", "cancel-in-progress": False}


@pytest.mark.parametrize("name", ["ci.yaml", "deploy.yaml"])
def test_both_deploys_run_the_one_deploy_action_last(name: str) -> None:
    job = workflow(name)["jobs"]["deploy"]
    steps = steps_of(job)
    assert steps[-1]["uses"] == "./.github/actions/deploy"
    assert set(steps[-1]["with"]) >= {"environment", "kubeconfig", "registry-token"}
    checkout = steps[0]
    assert checkout["uses"].startswith("actions/checkout@")
    # staging and prod look for their image among develop's commits.
    assert checkout["with"]["fetch-depth"] == 0


def test_the_environment_tag_moves_only_after_the_smoke_test() -> None:
    steps = yaml.safe_load(DEPLOY_ACTION.read_text())["runs"]["steps"]
    runs = [str(step.get("run", "")) for step in steps]
    deploy = next(i for i, run in enumerate(runs) if "hack/deploy.sh" in run)
    tag = next(i for i, run in enumerate(runs) if "hack/image.sh tag" in run)
    assert tag == deploy + 1 == len(steps) - 1
    # No `if:` on either: a composite action stops at the first failing step, so the tag step
    # runs only when the deploy and its smoke test passed.
    assert "if" not in steps[deploy] and "if" not in steps[tag]
    assert steps[deploy]["env"]["IMAGE_DIGEST"] == steps[tag]["env"]["DIGEST"]


def test_dependabot_watches_every_pinned_ecosystem() -> None:
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    updates = {update["package-ecosystem"]: update for update in config["updates"]}
    assert set(updates) == {"github-actions", "pip", "docker", "gomod"}
    envtest = sorted(f"/hack/envtest/{path.name}" for path in (ROOT / "hack/envtest").iterdir())
    assert sorted(updates["gomod"]["directories"]) == envtest
    for update in updates.values():
        assert update["cooldown"]["default-days"] >= 7


# --- hack/release.py: the release's names, versions, chart and notes. --------------------------


@pytest.mark.parametrize(
    ("ref", "version"),
    [("refs/tags/v1.2.3", "1.2.3"), ("v0.1.0", "0.1.0"), ("refs/tags/v2.0.0-rc.1", "2.0.0-rc.1")],
)
def test_a_release_tag_names_its_version(ref: str, version: str) -> None:
    assert release.version_of(ref) == version


@pytest.mark.parametrize("ref", ["refs/tags/1.2.3", "v1.2", "v01.2.3", "v1.2.3+build", "main"])
def test_a_tag_that_is_not_a_release_is_refused(ref: str) -> None:
    with pytest.raises(release.ReleaseError, match="is not a release tag"):
        release.version_of(ref)


def test_ghcr_names_are_lowercase() -> None:
    assert release.names("Acme-Corp") == {
        "image": "ghcr.io/acme-corp/database-operator",
        "chart_registry": "oci://ghcr.io/acme-corp/charts",
        "chart": "oci://ghcr.io/acme-corp/charts/database-operator",
    }
    with pytest.raises(release.ReleaseError):
        release.names("acme/other")


def test_the_packaged_values_change_only_the_image() -> None:
    values = (ROOT / "helm" / "database-operator" / "values.yaml").read_text()
    digest = "sha256:" + "b" * 64
    changed = release.set_image(values, "ghcr.io/acme/database-operator", digest, "1.2.3")
    before, after = yaml.safe_load(values), yaml.safe_load(changed)
    assert after["image"] == {
        **before["image"],
        "repository": "ghcr.io/acme/database-operator",
        "tag": "1.2.3",
        "digest": digest,
    }
    assert {k: v for k, v in after.items() if k != "image"} == {
        k: v for k, v in before.items() if k != "image"
    }
    # The comments (the chart's README is made from them) stay.
    assert [line for line in changed.splitlines() if line.lstrip().startswith("#")] == [
        line for line in values.splitlines() if line.lstrip().startswith("#")
    ]


def test_the_release_notes_install_by_version_and_verify_the_workflow_identity() -> None:
    image, chart = "sha256:" + "c" * 64, "sha256:" + "d" * 64
    text = release.notes("1.2.3", "Acme/database-operator", image, chart)
    assert "helm install database-operator oci://ghcr.io/acme/charts/database-operator" in text
    assert "--version 1.2.3" in text
    identity = (
        "--certificate-identity https://github.com/Acme/database-operator/"
        ".github/workflows/release.yaml@refs/tags/v1.2.3"
    )
    assert text.count(identity) == 2
    assert f"cosign verify ghcr.io/acme/database-operator@{image}" in text
    assert f"cosign verify oci://ghcr.io/acme/charts/database-operator@{chart}" not in text
    assert f"cosign verify ghcr.io/acme/charts/database-operator@{chart}" in text


def test_the_test_job_checks_out_the_history_the_upgrade_tests_read() -> None:
    from tests.upgrade.versions import EARLIER

    checkout = steps_of(workflow("ci.yaml")["jobs"]["test"])[0]
    assert checkout["uses"].startswith("actions/checkout@")
    # tests/upgrade checks out each earlier version's commit: a shallow clone has none.
    assert checkout["with"]["fetch-depth"] == 0
    assert all(re.fullmatch(r"[0-9a-f]{40}", version.sha) for version in EARLIER)
