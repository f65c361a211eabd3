"""What every API model shares: the group, name patterns, CEL rules, the wire shape of a model,
and metav1.Condition. Below models.py and backup.py, which both build on it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

GROUP = "databases.example.com"
VERSION = "v1"
#: A DNS-1123 subdomain: what Kubernetes accepts as an object name.
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: A Database's name becomes its Service's name, a DNS-1035 label: a letter first, then
#: lowercase letters, digits and '-', no dots, a letter or digit last, at most 63 characters.
#: Stricter than a custom resource's own name rule, so the schema checks it at admission.
DATABASE_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DATABASE_NAME_MAX_LENGTH = 63


def cel(
    rule: str, message: str, field_path: str | None = None, message_expression: str | None = None
) -> dict[str, JsonValue]:
    """One ``x-kubernetes-validations`` entry (``message_expression``: a CEL message that can
    name the offending value; ``message`` is the fallback)."""
    entry: dict[str, JsonValue] = {"rule": rule, "message": message}
    if message_expression:
        entry["messageExpression"] = message_expression
    if field_path:
        entry["fieldPath"] = field_path
    return entry


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=False,
        extra="ignore",
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it (camelCase, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Resource(_Model):
    """An object of this API: its metadata as the API server has it, and what it is called."""

    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", "default"))


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(_Model):
    """One aspect of an object's state (metav1.Condition)."""

    type: str = Field(max_length=316, description="Type of the condition, e.g. Ready.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this condition was set for."
    )
    last_transition_time: datetime = Field(
        description="When the status last changed from one value to another."
    )
    reason: str = Field(max_length=1024, description="Machine-readable CamelCase reason.")
    message: str = Field(default="", max_length=32768, description="Human-readable details.")
