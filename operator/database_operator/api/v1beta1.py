"""The older API version, ``databases.example.com/v1beta1``: served, never stored.

Its spec is v1's before storage became an object and the engine got its name: a flat
``storageSize``/``storageClass`` and ``type`` for the engine. Everything else means what it
means in v1; what v1 added (placement, parameters, annotations, deletionProtection…) it cannot
express, and conversion (api/conversion.py) keeps those fields in an annotation. Status is
v1's. Deprecated: kubectl warns on every request through it.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.fields import FieldInfo

from database_operator.api.common import GROUP, NAME_PATTERN, _Model, cel
from database_operator.api.common import VERSION as V1_VERSION
from database_operator.api.models import (
    CredentialsSecretRef,
    DatabaseSpec,
    DeletionPolicy,
    Quantity,
    ResourceRequirements,
    ServiceType,
)
from database_operator.engines import ENGINES, Engine

VERSION = "v1beta1"
DEPRECATION_WARNING = (
    f"{GROUP}/{VERSION} Database is deprecated; use {GROUP}/{V1_VERSION} "
    f"(docs/api.md: moving from {VERSION})"
)

#: The v1beta1 spec fields that v1 has under the same name and meaning.
SHARED_FIELDS = (
    "version",
    "image",
    "replicas",
    "port",
    "resources",
    "credentials_secret_ref",
    "service_type",
    "paused",
    "deletion_policy",
)


def _as_in_v1(name: str) -> Any:
    """v1's field ``name`` (type, default, bounds, description), for a v1beta1 field of the
    same meaning."""
    field: FieldInfo = copy.deepcopy(DatabaseSpec.model_fields[name])
    return field


class DatabaseSpecV1beta1(_Model):
    """The desired state of a Database (v1beta1)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                *[
                    cel(
                        f"!has(self.type) || self.type != '{engine}' || "
                        "!has(self.replicas) || self.replicas <= 1",
                        f"replicas must be 0 or 1 for {engine}: the operator does not set up "
                        f"{engine} replication (yet)",
                        ".replicas",
                    )
                    for engine, facts in ENGINES.items()
                    if not facts.replication
                ],
                cel(
                    "!has(self.storageClass) || has(self.storageSize)",
                    "storageClass needs storageSize",
                    ".storageClass",
                ),
                cel(
                    "!has(oldSelf.storageSize) || has(self.storageSize)",
                    "storageSize cannot be removed once set",
                    ".storageSize",
                ),
                cel(
                    "!has(oldSelf.storageSize) || !has(self.storageSize) || "
                    "quantity(string(self.storageSize))"
                    ".compareTo(quantity(string(oldSelf.storageSize))) >= 0",
                    "storageSize may grow but never shrink",
                    ".storageSize",
                ),
                cel(
                    "!has(oldSelf.storageClass) || (has(self.storageClass)"
                    " && self.storageClass == oldSelf.storageClass)",
                    "storageClass is immutable once set",
                    ".storageClass",
                ),
            ]
        }
    )

    type: Engine = Field(
        default=Engine.POSTGRES,
        description="Database engine (v1: spec.engine). Immutable.",
        json_schema_extra={
            "x-kubernetes-validations": [cel("self == oldSelf", "type is immutable")]
        },
    )
    version: str | None = _as_in_v1("version")
    image: str | None = _as_in_v1("image")
    replicas: int = _as_in_v1("replicas")
    port: int | None = _as_in_v1("port")
    storage_size: Quantity | None = Field(
        default=None,
        description="Size of the persistent volume (v1: spec.storage.size); empty for "
        "ephemeral data. May grow, never shrink.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "isQuantity(string(self))"
                    " && quantity(string(self)).isGreaterThan(quantity('0'))",
                    "storageSize must be a quantity above zero, such as 10Gi",
                )
            ]
        },
    )
    storage_class: str | None = Field(
        default=None,
        max_length=253,
        pattern=NAME_PATTERN,
        description="StorageClass of the volume (v1: spec.storage.storageClassName); empty "
        "uses the cluster default. Immutable once set.",
    )
    resources: ResourceRequirements | None = _as_in_v1("resources")
    credentials_secret_ref: CredentialsSecretRef | None = _as_in_v1("credentials_secret_ref")
    service_type: ServiceType = _as_in_v1("service_type")
    paused: bool = _as_in_v1("paused")
    deletion_policy: DeletionPolicy = _as_in_v1("deletion_policy")
