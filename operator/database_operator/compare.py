"""Pure comparison of desired and observed children: does a child need writing, and how to take
back the lists that another field manager changed.

Compare-then-apply keeps the steady state free of writes: an apply that changes nothing is still
a PATCH request. A child needs writing when some field we set has another value in the cluster
(drift, or a spec change), or when our owner references on it differ. Fields we do not set —
defaults filled in by the API server, annotations other tools add — never count.

The comparison must end where the API server's own normalisation ends, or a child differs
forever and every resync writes it: quantities compare by value, rounded up to millis as the
API server stores a resource quantity, and an empty map, list or string we send is the same as
a field the server left out (Go's ``omitempty``). Where a child still differs after it was
written, ``difference`` names the first field that does, for the status to say.

The patches that follow from a comparison are made here too: the JSON-patch operations that take
lists back (guarded by ``version_test``), and the merge patch from one status to the next.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from database_operator.manifest import Manifest

#: A path into an object: map keys and list indexes.
Path = tuple[str | int, ...]


#: The API server rounds every resource quantity (requests, limits, a claim's size) up to this
#: scale when it stores it (core/v1 defaults, SetDefaults_ResourceList): cpu 0.1m is kept as 1m.
MILLI = Decimal("0.001")


def _same_quantity(observed: Any, desired: Any) -> bool:
    """'1Gi' and '1024Mi' are the same quantity; the API server rewrites some to canonical form,
    and stores '0.1m' as '1m' (rounded up to millis)."""
    try:
        have, want = parse_quantity(observed), parse_quantity(desired)
        return bool(have == want or have == want.quantize(MILLI, rounding=ROUND_CEILING))
    except (ValueError, TypeError, InvalidOperation):
        return False


def is_empty(value: Any) -> bool:
    """What Go's ``omitempty`` leaves out: an empty string, list or map (maps of such, too).

    Not ``0`` or ``false``: those are pointers in the API types we use, sent and kept.
    """
    if isinstance(value, dict):
        return all(is_empty(item) for item in value.values())
    return value in ("", [])


def covers(observed: Any, desired: Any) -> bool:  # noqa: PLR0911 (one return per case)
    """True when every field in ``desired`` has the same value in ``observed``.

    Maps are compared key by key (extra observed keys are fine; a desired empty value matches a
    missing key); lists element by element and of equal length (we own every list we set:
    containers, ports, env, volumes); scalars by value, with numbers and quantity strings
    compared as quantities.
    """
    if isinstance(desired, dict):
        if observed is None and is_empty(desired):
            return True
        return isinstance(observed, dict) and all(
            covers(observed[key], value) if key in observed else is_empty(value)
            for key, value in desired.items()
        )
    if isinstance(desired, list):
        if observed is None:
            return not desired
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


def difference(observed: Any, desired: Any, path: Path = ()) -> tuple[Path, Any, Any] | None:
    """The first field of ``desired`` that ``observed`` does not cover (see ``covers``): its
    path, the observed value and ours; None when it covers them all."""
    if covers(observed, desired):
        return None
    if isinstance(desired, dict) and isinstance(observed, dict):
        for key, value in desired.items():
            found = difference(observed.get(key), value, (*path, key))
            if found is not None:
                return found
    if isinstance(desired, list) and isinstance(observed, list) and len(observed) == len(desired):
        for index, (have, want) in enumerate(zip(observed, desired, strict=True)):
            found = difference(have, want, (*path, index))
            if found is not None:
                return found
    return path, observed, desired


def dotted(path: Path) -> str:
    """``spec.template.spec.containers[0].resources``: a path as people write it."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def owner_refs_to(obj: Manifest, uid: str) -> list[Manifest]:
    """The owner references of ``obj`` that point at the object with ``uid``."""
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return [ref for ref in refs if ref.get("uid") == uid]


def needs_write(observed: Manifest | None, desired: Manifest, owner_uid: str) -> bool:
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


# --- taking lists back from other field managers ------------------------------------------------


def _element_index(items: list[Any], key: str) -> int | None:
    """The index of the list element that a managedFields step (``k:{..}``, ``v:..``, ``i:..``)
    names."""
    kind, _, text = key.partition(":")
    if kind == "i":
        index = int(text)
        return index if index < len(items) else None
    wanted = json.loads(text)
    for index, item in enumerate(items):
        if kind == "v" and item == wanted:
            return index
        if (
            kind == "k"
            and isinstance(item, dict)
            and all(item.get(field) == value for field, value in wanted.items())
        ):
            return index
    return None


def _owned_paths(fields: dict[str, Any], obj: Any, path: Path) -> Iterator[Path]:
    """The paths of ``obj`` that a managedFields ``fieldsV1`` tree owns (leaves and elements)."""
    for key, sub in fields.items():
        if key == ".":
            yield path
        elif key.startswith("f:"):
            name = key[2:]
            child = obj.get(name) if isinstance(obj, dict) else None
            yield (*path, name)
            yield from _owned_paths(sub, child, (*path, name))
        elif isinstance(obj, list):
            index = _element_index(obj, key)
            if index is not None:
                yield (*path, index)
                yield from _owned_paths(sub, obj[index], (*path, index))


def owned_by_others(observed: Manifest, manager: str) -> set[Path]:
    """Paths of ``observed`` that field managers other than ``manager`` own."""
    owned: set[Path] = set()
    for entry in observed.get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") == manager or not isinstance(entry.get("fieldsV1"), dict):
            continue
        owned.update(_owned_paths(entry["fieldsV1"], observed, ()))
    return owned


def _matching(observed: list[Any], desired: Any, index: int) -> Any:
    """The observed element that a desired list element stands for: the one with its ``name``,
    else the one at its position."""
    if isinstance(desired, dict) and "name" in desired:
        return next(
            (o for o in observed if isinstance(o, dict) and o.get("name") == desired["name"]), None
        )
    return observed[index] if index < len(observed) else None


def overlay(observed: Any, desired: Any, foreign: set[Path], path: Path = ()) -> Any:
    """``desired`` laid over ``observed``: our values win, lists hold exactly our elements, and
    each element keeps the fields nobody else set (what the API server defaulted or allocated,
    e.g. a Service's nodePort) but drops those another field manager set."""
    if isinstance(desired, dict) and isinstance(observed, dict):
        kept = {k: v for k, v in observed.items() if k not in desired and (*path, k) not in foreign}
        return kept | {
            k: overlay(observed.get(k), v, foreign, (*path, k)) for k, v in desired.items()
        }
    if isinstance(desired, list) and isinstance(observed, list):
        result = []
        for index, item in enumerate(desired):
            match = _matching(observed, item, index)
            where = observed.index(match) if match is not None else len(observed) + index
            result.append(overlay(match, item, foreign, (*path, where)))
        return result
    return desired


def json_pointer(path: Path) -> str:
    """``path`` as a JSON Pointer (RFC 6901): each step escaped, ``/`` before each."""
    return "".join("/" + str(step).replace("~", "~0").replace("/", "~1") for step in path)


def version_test(obj: Manifest) -> Manifest:
    """A JSON-patch test of the resourceVersion: the patch applies to what we looked at, or not
    at all (StaleReadError, retried)."""
    return {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": obj["metadata"]["resourceVersion"],
    }


def list_takebacks(observed: Manifest, desired: Manifest, manager: str) -> list[Manifest]:
    """JSON-patch operations that replace each list we set whose observed value does not match,
    with our elements laid over the observed ones (see ``overlay``).

    Server-side apply cannot remove list elements another manager owns: an element someone
    re-keyed (a Service port edited from 5432 to 9999) stays beside ours, and the apply is
    refused as a duplicate or keeps differing on every resync. Replacing the list takes it back.
    Lists under a map the cluster lacks are left to the apply.
    """
    foreign = owned_by_others(observed, manager)
    operations: list[Manifest] = []

    def walk(obs: Any, des: Any, path: Path) -> None:
        for key, value in des.items():
            if key not in obs:
                continue
            if isinstance(value, list) and not covers(obs[key], value):
                replacement = overlay(obs[key], value, foreign, (*path, key))
                operations.append(
                    {"op": "replace", "path": json_pointer((*path, key)), "value": replacement}
                )
            elif isinstance(value, dict) and isinstance(obs[key], dict):
                walk(obs[key], value, (*path, key))

    walk(observed, {k: v for k, v in desired.items() if k != "metadata"}, ())
    return operations


def merge_patch_of(old: Manifest, new: Manifest) -> Manifest:
    """The merge patch that turns the status ``old`` into ``new`` (empty: they are equal).
    Fields that disappeared are sent as null, so they are removed."""
    if old == new:
        return {}
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    patch.update(new)
    return patch
