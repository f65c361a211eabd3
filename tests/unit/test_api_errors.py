"""One place decides what an API error means: retry it, or report the object as refused."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from database_operator.kube import (
    ApiError,
    NotLeadingError,
    StaleReadError,
    UnreachableError,
    api_error,
)

RBAC = (
    'secrets "db-credentials" is forbidden: User "system:serviceaccount:ops:database-operator" '
    'cannot get resource "secrets" in API group "" in the namespace "shop"'
)
WEBHOOK = 'admission webhook "policy.example.com" denied the request: images must be signed'
POLICY = (
    'deployments.apps "db" is forbidden: ValidatingAdmissionPolicy "no-latest" with binding '
    '"no-latest" denied request: image tag latest'
)
QUOTA = 'services "db" is forbidden: exceeded quota: compute, requested: services=1'
TERMINATING = "unable to create new content in namespace shop because it is being terminated"


@pytest.mark.parametrize(
    ("status", "message", "retryable", "refused"),
    [
        (401, "Unauthorized", True, False),
        (403, RBAC, True, False),  # RBAC: an administrator grants it; keep trying
        (403, WEBHOOK, False, True),  # admission: about what we sent
        (403, POLICY, False, True),
        (403, QUOTA, False, True),
        (403, TERMINATING, False, False),  # the namespace goes, and its Databases with it
        (400, "bad request", False, True),
        (422, "spec.ports[0].port: Invalid value", False, True),
        (404, "not found", False, False),
        (409, "the object has been modified", True, False),
        (429, "too many requests", True, False),
        (500, "etcdserver: request timed out", True, False),
        (503, "unavailable", True, False),
    ],
)
def test_each_answer_is_either_retried_or_refused(
    status: int, message: str, retryable: bool, refused: bool
) -> None:
    error = ApiError(status, "Reason", message, "PATCH", "/api/v1/namespaces/shop/services/db")
    assert (error.retryable, error.refused) == (retryable, refused)
    assert error.forbidden == (status == 403 and message == RBAC)
    assert error.namespace_terminating == (message == TERMINATING)


def test_a_server_that_does_not_answer_is_unreachable_and_retried() -> None:
    error = api_error(MaxRetryError(None, "/api", "refused"), "GET", "/api/v1")  # type: ignore[arg-type]
    assert isinstance(error, UnreachableError)
    assert (error.retryable, error.refused, error.stale) == (True, False, False)
    answered = api_error(ApiException(status=409, reason="Conflict"), "PUT", "/api/v1")
    assert type(answered) is ApiError
    assert answered.stale


def test_a_guarded_patch_whose_test_failed_is_a_stale_read_not_a_refusal() -> None:
    """The server's 422 for a failed ``test``: the object changed since it was read."""
    error = StaleReadError(422, "Invalid", "test failed", "PATCH", "/api/v1/namespaces/a/secrets/b")
    assert (error.retryable, error.refused, error.stale) == (True, False, True)


def test_not_leading_is_no_api_error() -> None:
    """A write left unsent by a replica that does not lead: no API call failed."""
    error = NotLeadingError("PATCH", "/api/v1/namespaces/a/secrets/b")
    assert not isinstance(error, ApiError)
    assert (
        str(error) == "PATCH /api/v1/namespaces/a/secrets/b: not sent: this replica does not lead"
    )
