"""The deploy pipeline's decisions, made by scripts that CI calls and people can run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

RESOLVE = Path(__file__).resolve().parents[2] / "hack" / "resolve-env.sh"


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
