"""The webhook Secret the replicas share: a write lost to another replica is read again, and
after five lost in a row the caller gets the server's own last answer."""

from __future__ import annotations

import datetime
from typing import cast

import pytest

from database_operator.config import Settings
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.manifest import Manifest
from database_operator.webhooks.keeper import SecretKeeper
from tests.aio import synchronously

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
SETTINGS = Settings(webhook_service="ops/database-operator-webhook")


class ContendedSecret:
    """No Secret yet, and each create loses to another replica's (a 409), ``losses`` times."""

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.reads = 0
        self.created: list[Manifest] = []

    async def get_live(self, kind: str, namespace: str, name: str) -> Manifest | None:
        self.reads += 1
        return None

    async def create(self, manifest: Manifest) -> None:
        if self.losses:
            self.losses -= 1
            path = f"/api/v1/namespaces/ops/secrets/attempt-{self.reads}"
            raise ApiError(409, "AlreadyExists", "secrets already exists", "POST", path)
        self.created.append(manifest)


def keeper(kube: ContendedSecret) -> SecretKeeper:
    return SecretKeeper(cast(Kube, kube), SETTINGS, clock=lambda: NOW)


@pytest.mark.parametrize("losses", [1, 4])
@synchronously
async def test_a_lost_write_is_read_again_until_one_is_made(losses: int) -> None:
    kube = ContendedSecret(losses)
    pair = await keeper(kube).refresh()
    assert pair is not None
    assert kube.reads == losses + 1
    assert [m["metadata"]["name"] for m in kube.created] == [SETTINGS.webhook_secret]


@synchronously
async def test_after_five_lost_writes_the_servers_last_conflict_is_raised_as_it_came() -> None:
    kube = ContendedSecret(losses=5)
    with pytest.raises(ApiError) as raised:
        await keeper(kube).refresh()
    assert (raised.value.status, raised.value.reason) == (409, "AlreadyExists")
    assert raised.value.path == "/api/v1/namespaces/ops/secrets/attempt-5"
    assert kube.reads == 5
    assert kube.created == []
