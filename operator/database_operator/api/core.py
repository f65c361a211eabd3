"""The core/v1 types a Database passes on to its pods: scheduling (affinity, tolerations, topology
spread) as pydantic models, so the CRD schema checks them at admission and docs/api.md lists
them. Field names and meanings are Kubernetes' own; only what a pod spec takes is modelled.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Core(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class LabelSelectorRequirement(_Core):
    """A label selector requirement: key, operator (In, NotIn, Exists, DoesNotExist), values."""

    key: str = Field(max_length=317, description="The label key.")
    operator: Operator = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[str] | None = Field(default=None, description="Values for In and NotIn.")


class LabelSelector(_Core):
    """A label query over pods (metav1.LabelSelector)."""

    match_labels: dict[str, str] | None = Field(
        default=None, description="Labels that must all be present with these values."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, description="Requirements that must all hold."
    )


class NodeSelectorRequirement(_Core):
    """A node selector requirement: key, operator (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str = Field(max_length=317, description="The node label (or field) key.")
    operator: Operator = Field(description="In, NotIn, Exists, DoesNotExist, Gt or Lt.")
    values: list[str] | None = Field(default=None, description="Values to compare with.")


class NodeSelectorTerm(_Core):
    """Node requirements, ANDed."""

    match_expressions: list[NodeSelectorRequirement] | None = Field(
        default=None, description="Requirements on node labels."
    )
    match_fields: list[NodeSelectorRequirement] | None = Field(
        default=None, description="Requirements on node fields."
    )


class NodeSelector(_Core):
    """Node selector terms, ORed."""

    node_selector_terms: list[NodeSelectorTerm] = Field(description="Terms, any of which fits.")


class PreferredSchedulingTerm(_Core):
    """A node preference with a weight."""

    weight: int = Field(ge=1, le=100, description="Weight, 1 to 100.")
    preference: NodeSelectorTerm = Field(description="The nodes preferred.")


class NodeAffinity(_Core):
    """Which nodes the pods may (required) or should (preferred) run on."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None, description="Nodes the pods must run on."
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        Field(default=None, description="Nodes the pods should run on.")
    )


class PodAffinityTerm(_Core):
    """Pods (labelSelector, in namespaces) whose topology domain (topologyKey) counts."""

    label_selector: LabelSelector | None = Field(default=None, description="The pods.")
    namespace_selector: LabelSelector | None = Field(
        default=None, description="The namespaces of the pods."
    )
    namespaces: list[str] | None = Field(default=None, description="Namespaces of the pods.")
    topology_key: str = Field(
        min_length=1, max_length=317, description="The node label that names a domain."
    )
    match_label_keys: list[str] | None = Field(
        default=None, description="Pod label keys whose values must match the incoming pod's."
    )
    mismatch_label_keys: list[str] | None = Field(
        default=None, description="Pod label keys whose values must differ."
    )


class WeightedPodAffinityTerm(_Core):
    """A pod affinity term with a weight."""

    weight: int = Field(ge=1, le=100, description="Weight, 1 to 100.")
    pod_affinity_term: PodAffinityTerm = Field(description="The term.")


class PodAffinity(_Core):
    """Run near pods that match (required or preferred)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = Field(
        default=None, description="Terms that must hold."
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        Field(default=None, description="Terms that should hold.")
    )


class Affinity(_Core):
    """Scheduling constraints of the database pods (core/v1 Affinity)."""

    node_affinity: NodeAffinity | None = Field(default=None, description="Node affinity.")
    pod_affinity: PodAffinity | None = Field(default=None, description="Run near these pods.")
    pod_anti_affinity: PodAffinity | None = Field(
        default=None, description="Run away from these pods."
    )


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(_Core):
    """A taint the pods tolerate (core/v1 Toleration)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.tolerationSeconds) || "
                    "(has(self.effect) && self.effect == 'NoExecute')",
                    "message": "tolerationSeconds needs effect NoExecute",
                },
                {
                    "rule": "!has(self.operator) || self.operator != 'Exists' || "
                    "!has(self.value) || self.value == ''",
                    "message": "a toleration with operator Exists takes no value",
                },
                {
                    "rule": "(has(self.key) && self.key != '') || "
                    "(has(self.operator) && self.operator == 'Exists')",
                    "message": "a toleration without a key needs operator Exists",
                },
            ]
        }
    )

    key: str | None = Field(default=None, max_length=317, description="The taint key.")
    operator: TolerationOperator | None = Field(default=None, description="Exists or Equal.")
    value: str | None = Field(default=None, max_length=63, description="The taint value.")
    effect: TaintEffect | None = Field(
        default=None, description="NoSchedule, PreferNoSchedule or NoExecute."
    )
    toleration_seconds: int | None = Field(
        default=None, description="How long a NoExecute taint is tolerated."
    )


class UnsatisfiableConstraintAction(StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class NodeInclusionPolicy(StrEnum):
    HONOR = "Honor"
    IGNORE = "Ignore"


class TopologySpreadConstraint(_Core):
    """How the pods spread over topology domains (core/v1 TopologySpreadConstraint)."""

    max_skew: int = Field(ge=1, description="How uneven the spread may be.")
    topology_key: str = Field(
        min_length=1, max_length=317, description="The node label that names a domain."
    )
    when_unsatisfiable: UnsatisfiableConstraintAction = Field(
        description="DoNotSchedule or ScheduleAnyway."
    )
    label_selector: LabelSelector | None = Field(default=None, description="The pods counted.")
    min_domains: int | None = Field(default=None, ge=1, description="Domains at least.")
    node_affinity_policy: NodeInclusionPolicy | None = Field(
        default=None, description="Honor or Ignore the pods' node affinity."
    )
    node_taints_policy: NodeInclusionPolicy | None = Field(
        default=None, description="Honor or Ignore node taints."
    )
    match_label_keys: list[str] | None = Field(
        default=None, description="Pod label keys that split the pods counted."
    )


class IPBlock(_Core):
    """A range of addresses (networking/v1 IPBlock)."""

    model_config = ConfigDict(populate_by_name=True)

    cidr: str = Field(
        min_length=1, max_length=64, description="The range, e.g. 10.0.0.0/16 or 2001:db8::/64."
    )
    except_: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None, alias="except", max_length=32, description="Ranges inside it left out."
    )


class NetworkPolicyPeer(_Core):
    """Who may connect (networking/v1 NetworkPolicyPeer): pods by their labels (in the
    Database's namespace, or in the namespaces namespaceSelector picks), or addresses."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.podSelector) || has(self.namespaceSelector) || "
                    "has(self.ipBlock)",
                    "message": "a peer needs podSelector, namespaceSelector or ipBlock",
                },
                {
                    "rule": "!has(self.ipBlock) || "
                    "!(has(self.podSelector) || has(self.namespaceSelector))",
                    "message": "a peer with ipBlock takes no podSelector or namespaceSelector",
                },
            ]
        }
    )

    pod_selector: LabelSelector | None = Field(
        default=None, description="The pods ({} : every pod of the namespaces meant)."
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="The namespaces of those pods ({}: every namespace); absent: the "
        "Database's own.",
    )
    ip_block: IPBlock | None = Field(default=None, description="Addresses instead of pods.")
