"""Pure comparison of desired and observed children: does a child need writing?

Compare-then-apply keeps the steady state free of writes: an apply that changes nothing is still
a PATCH request. A child needs writing when some field we set has another value in the cluster
(drift, or a spec change), or when our owner references on it differ. Fields we do not set —
defaults filled in by the API server, annotations other tools add — never count.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from kubernetes.utils.quantity import parse_quantity


def _same_quantity(observed: Any, desired: Any) -> bool:
    """'1Gi' and '1024Mi' are the same quantity; the API server rewrites some to canonical form."""
    try:
        return bool(parse_quantity(observed) == parse_quantity(desired))
    except (ValueError, TypeError, InvalidOperation):
        return False


def covers(observed: Any, desired: Any) -> bool:  # noqa: PLR0911 (one return per case)
    """True when every field in ``desired`` has the same value in ``observed``.

    Maps are compared key by key (extra observed keys are fine); lists element by element and of
    equal length (we own every list we set: containers, ports, env, volumes); scalars by value,
    with numbers and quantity strings compared as quantities.
    """
    if isinstance(desired, dict):
        return isinstance(observed, dict) and all(
            key in observed and covers(observed[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(observed, list)
            and len(observed) == len(desired)
            and all(covers(o, d) for o, d in zip(observed, desired, strict=True))
        )
    if isinstance(desired, bool) or isinstance(observed, bool):
        return type(observed) is type(desired) and observed == desired
    if observed == desired:
        return True
    if isinstance(desired, (str, int)) and isinstance(observed, (str, int)):
        return _same_quantity(observed, desired)
    if isinstance(desired, (Decimal, float)):
        return _same_quantity(observed, desired)
    return False


def owner_refs_to(obj: dict[str, Any], uid: str) -> list[dict[str, Any]]:
    """The owner references of ``obj`` that point at the object with ``uid``."""
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return [ref for ref in refs if ref.get("uid") == uid]


def needs_write(observed: dict[str, Any] | None, desired: dict[str, Any], owner_uid: str) -> bool:
    """Whether ``desired`` must be written over what the cluster has.

    Owner references are the one list we share: others may add theirs, so only ours count, and
    exactly (one we dropped, deletionPolicy Delete -> Retain, must go).
    """
    if observed is None:
        return True
    meta = {k: v for k, v in desired.get("metadata", {}).items() if k != "ownerReferences"}
    if not covers(observed, {**desired, "metadata": meta}):
        return True
    ours, wanted = owner_refs_to(observed, owner_uid), owner_refs_to(desired, owner_uid)
    return not (len(ours) == len(wanted) and covers(ours, wanted))
