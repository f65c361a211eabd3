"""The Database API: pydantic models of spec and status, and the CRD generated from them."""

from database_operator.api.models import (
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    Condition,
    ConditionStatus,
    CredentialsSecretRef,
    Database,
    DatabaseSpec,
    DatabaseStatus,
    DeletionPolicy,
    Phase,
    ResourceRequirements,
    ServiceType,
    Storage,
)

__all__ = [
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "Condition",
    "ConditionStatus",
    "CredentialsSecretRef",
    "Database",
    "DatabaseSpec",
    "DatabaseStatus",
    "DeletionPolicy",
    "Phase",
    "ResourceRequirements",
    "ServiceType",
    "Storage",
]
