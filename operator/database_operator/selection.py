"""What one operator process reconciles: the Databases of its shard (all, without one) and the
children it made for them, each selected by labels on the API server; and in which namespaces."""

from __future__ import annotations

from collections.abc import Iterable

from database_operator.api.models import SHARD_LABEL
from database_operator.config import Settings, is_exact
from database_operator.desired import MANAGED_BY
from database_operator.manifest import Key, Manifest
from database_operator.ownership import MANAGED_BY_LABEL


def database_selector(settings: Settings) -> str | None:
    """The label selector of the Databases this operator reconciles (None: every one)."""
    return f"{SHARD_LABEL}={settings.shard}" if settings.shard else None


def database_selected(settings: Settings, obj: Manifest) -> bool:
    """Whether ``database_selector`` selects the Database ``obj``: this operator's to reconcile."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return not settings.shard or labels.get(SHARD_LABEL) == settings.shard


def child_selector(settings: Settings) -> str:
    """The label selector of the children it watches: those it made, for its shard."""
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
    return selector + (f",{SHARD_LABEL}={settings.shard}" if settings.shard else "")


def child_selected(settings: Settings, obj: Manifest) -> bool:
    """Whether ``child_selector`` selects ``obj``: the watches deliver its events."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY and (
        not settings.shard or labels.get(SHARD_LABEL) == settings.shard
    )


def unselected_child_selectors(settings: Settings) -> list[str]:
    """Label selectors that together select every object ``child_selector`` does not: a
    user's, and another shard's (a selector cannot say "not ours or not our shard")."""
    selectors = [f"{MANAGED_BY_LABEL}!={MANAGED_BY}"]
    if settings.shard:
        selectors.append(f"{MANAGED_BY_LABEL}={MANAGED_BY},{SHARD_LABEL}!={settings.shard}")
    return selectors


def exact_namespaces(settings: Settings) -> list[str | None] | None:
    """The namespaces watched ([None]: all of them); None if globs name them."""
    namespaces = settings.namespaces
    if not namespaces:
        return [None]
    return [*namespaces] if all(is_exact(ns) for ns in namespaces) else None


def audited_namespaces(settings: Settings, databases: Iterable[Key]) -> list[str | None]:
    """The namespaces listed at start and by the audits: those watched; with globs, those of
    the ``databases`` seen (only Kopf's scanning finds the namespaces that match)."""
    exact = exact_namespaces(settings)
    if exact is not None:
        return exact
    return [*sorted({key[0] for key in databases})]
