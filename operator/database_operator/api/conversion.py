"""Conversion between databases.example.com/v1 (stored) and v1beta1 (served): the mapping the
CRD's conversion webhook (webhooks/conversion.py) applies, and that docs/api.md describes.

Pure functions. Lossless both ways: v1beta1 -> v1 -> v1beta1 maps field for field, and a v1 spec
field that v1beta1 cannot express rides through v1beta1 in the annotation ``V1_FIELDS`` (JSON),
so v1 -> v1beta1 -> v1 gives back the same object. Metadata and status are carried unchanged.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from database_operator.api.models import GROUP
from database_operator.api.models import VERSION as V1_VERSION
from database_operator.api.v1beta1 import VERSION as V1BETA1_VERSION
from database_operator.manifest import Manifest

V1 = f"{GROUP}/{V1_VERSION}"
V1BETA1 = f"{GROUP}/{V1BETA1_VERSION}"
#: The v1 spec fields a v1beta1 object cannot express, kept while it is read or written as
#: v1beta1: a JSON object of camelCase spec fields.
V1_FIELDS = f"{GROUP}/v1-fields"
#: v1beta1 spec fields that v1 has under the same name.
SHARED = (
    "version",
    "image",
    "replicas",
    "port",
    "resources",
    "credentialsSecretRef",
    "serviceType",
    "paused",
    "deletionPolicy",
)
#: Renamed: v1beta1 name -> v1 name.
RENAMED = {"type": "engine"}
#: v1beta1's flat storage fields -> the keys of v1's spec.storage.
STORAGE = {"storageSize": "size", "storageClass": "storageClassName"}


class ConversionError(ValueError):
    """An object that cannot be converted; the message says which field and why."""


def to_v1beta1(obj: Manifest) -> Manifest:
    """A v1 Database as v1beta1."""
    spec = copy.deepcopy(obj.get("spec") or {})
    converted: dict[str, Any] = {}
    for old, new in RENAMED.items():
        if new in spec:
            converted[old] = spec.pop(new)
    storage = spec.pop("storage", None)
    if isinstance(storage, dict):
        for flat, nested in STORAGE.items():
            if nested in storage:
                converted[flat] = storage.pop(nested)
        if storage:  # a storage field v1beta1 has no flat name for
            spec["storage"] = storage
    for key in SHARED:
        if key in spec:
            converted[key] = spec.pop(key)
    result = _with_spec(obj, V1BETA1, converted)
    annotations = result["metadata"].setdefault("annotations", {})
    if spec:
        annotations[V1_FIELDS] = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    else:
        annotations.pop(V1_FIELDS, None)
    if not annotations:
        del result["metadata"]["annotations"]
    return result


def to_v1(obj: Manifest) -> Manifest:
    """A v1beta1 Database as v1 (the fields kept in the annotation back in the spec)."""
    spec = copy.deepcopy(obj.get("spec") or {})
    result = _with_spec(obj, V1, {})
    metadata = result["metadata"]
    annotations = dict(metadata.pop("annotations", None) or {})
    kept = _kept_fields(annotations.pop(V1_FIELDS, None))
    if annotations:
        metadata["annotations"] = annotations
    converted: dict[str, Any] = dict(kept)
    for old, new in RENAMED.items():
        if old in spec:
            converted[new] = spec.pop(old)
    storage = dict(converted.pop("storage", None) or {})
    for flat, nested in STORAGE.items():
        if flat in spec:
            storage[nested] = spec.pop(flat)
    if storage:  # even without a size (invalid): conversion never drops a field
        converted["storage"] = storage
    for key in SHARED:
        if key in spec:
            converted[key] = spec.pop(key)
    converted.update(spec)  # nothing else is in v1beta1's schema; carried if ever there
    result["spec"] = converted
    return result


def _with_spec(obj: Manifest, api_version: str, spec: dict[str, Any]) -> Manifest:
    result = {key: copy.deepcopy(value) for key, value in obj.items() if key != "spec"}
    result["apiVersion"] = api_version
    result.setdefault("metadata", {})
    if "spec" in obj:
        result["spec"] = spec
    return result


def _kept_fields(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        kept = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConversionError(
            f"metadata.annotations[{V1_FIELDS}] is not JSON ({error}): it holds the v1 fields "
            "of this Database that v1beta1 cannot express; restore it or remove it"
        ) from error
    if not isinstance(kept, dict):
        raise ConversionError(
            f"metadata.annotations[{V1_FIELDS}] must be a JSON object of v1 spec fields"
        )
    clashing = sorted(set(kept) & ({*SHARED, *RENAMED.values()}))
    if clashing:
        raise ConversionError(
            f"metadata.annotations[{V1_FIELDS}] may not set {', '.join(clashing)}: v1beta1 "
            "has fields for them"
        )
    return kept


def convert(obj: Manifest, desired: str) -> Manifest:
    """``obj`` as ``desired`` (an apiVersion)."""
    current = obj.get("apiVersion")
    if current == desired:
        return obj
    # The API server converts before it validates (a v1beta1 request for the v1 webhooks), so a
    # malformed spec reaches us: a Failure that names it, never an HTTP 500.
    if not isinstance(obj.get("spec", {}), dict):
        raise ConversionError(f"spec must be an object, not {type(obj['spec']).__name__}")
    if current == V1 and desired == V1BETA1:
        return to_v1beta1(obj)
    if current == V1BETA1 and desired == V1:
        return to_v1(obj)
    raise ConversionError(f"cannot convert a Database from {current} to {desired}")
