"""One place decides what an API error means: retry it, or report the object as refused."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from database_operator.kube.errors import (
    ApiError,
    Failure,
    NotLeadingError,
    StaleReadError,
    UnreachableError,
    api_error,
    classify,
    stale_read,
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


@pytest.mark.parametrize(
    ("status", "message", "failure"),
    [
        (403, RBAC, Failure.FORBIDDEN),
        (403, TERMINATING, Failure.NAMESPACE_TERMINATING),
        (403, WEBHOOK, Failure.REFUSED),
        (403, QUOTA, Failure.REFUSED),
        (400, "bad request", Failure.REFUSED),
        (422, "spec.ports[0].port: Invalid value", Failure.REFUSED),
        (409, "the object has been modified", Failure.STALE),
        (409, 'secrets "db-credentials" already exists', Failure.STALE),
        (404, "not found", Failure.NOT_FOUND),
        (410, "too old resource version: 42 (97)", Failure.EXPIRED),
        (401, "Unauthorized", Failure.TRANSIENT),
        (429, "too many requests", Failure.TRANSIENT),
        (500, "etcdserver: request timed out", Failure.TRANSIENT),
        (504, "timeout", Failure.TRANSIENT),
        (405, "method not allowed", Failure.OTHER),
        (501, "not implemented", Failure.OTHER),
    ],
)
def test_each_answer_has_one_reading(status: int, message: str, failure: Failure) -> None:
    assert classify(status, message) is failure
    error = ApiError(status, "Reason", message, "GET", "/api/v1/namespaces/shop/secrets/db")
    assert error.failure is failure
    # Each property says one reading, and exactly one of them holds at most.
    readings = {
        Failure.FORBIDDEN: error.forbidden,
        Failure.NAMESPACE_TERMINATING: error.namespace_terminating,
        Failure.REFUSED: error.refused,
        Failure.STALE: error.stale,
        Failure.NOT_FOUND: error.not_found,
        Failure.EXPIRED: error.expired,
    }
    assert {reading for reading, holds in readings.items() if holds} == (
        {failure} if failure in readings else set()
    )


def test_a_watch_too_old_to_resume_is_expired_and_listed_afresh_not_retried() -> None:
    gone = ApiError(410, "Expired", "too old resource version", "WATCH", "/api/v1/services")
    assert (gone.expired, gone.retryable, gone.refused, gone.not_found) == (
        True,
        False,
        False,
        False,
    )


def test_a_create_refused_by_a_namespace_being_deleted_is_neither_retried_nor_refused() -> None:
    error = ApiError(403, "Forbidden", TERMINATING, "POST", "/apis/batch/v1/namespaces/shop/jobs")
    assert error.namespace_terminating
    assert (error.forbidden, error.refused, error.retryable) == (False, False, False)
    # A 403 that merely mentions termination elsewhere is admission's refusal, not this.
    other = ApiError(403, "Forbidden", "namespace prod is being terminated", "POST", "/")
    assert (other.namespace_terminating, other.refused) == (False, True)


def test_not_found_is_no_other_reading() -> None:
    error = ApiError(404, "NotFound", 'databases "db" not found', "GET", "/apis/x/v1/databases/db")
    assert error.not_found
    assert not (error.stale or error.expired or error.retryable or error.refused)


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
    assert error.failure is Failure.STALE


def test_a_failed_test_of_a_json_patch_is_read_as_a_stale_read() -> None:
    path = "/api/v1/namespaces/a/secrets/b"
    message = "testing value /metadata/resourceVersion failed: test failed"
    failed = ApiError(422, "Invalid", message, "PATCH", path)
    stale = stale_read(failed)
    assert isinstance(stale, StaleReadError) and stale.stale and not stale.refused
    assert (stale.status, stale.message, stale.path) == (422, failed.message, path)
    # Any other 422 is a refusal of what was sent; any other failure stays as it is.
    assert stale_read(ApiError(422, "Invalid", "spec: Invalid value", "PATCH", path)) is None
    assert stale_read(ApiError(409, "Conflict", "modified", "PATCH", path)) is None


def test_no_answer_is_unreachable_whatever_its_status() -> None:
    error = UnreachableError(0, "ConnectionRefused", "refused", "GET", "/api/v1")
    assert error.failure is Failure.UNREACHABLE
    assert (error.retryable, error.not_found, error.expired) == (True, False, False)


def test_not_leading_is_no_api_error() -> None:
    """A write left unsent by a replica that does not lead: no API call failed."""
    error = NotLeadingError("PATCH", "/api/v1/namespaces/a/secrets/b")
    assert not isinstance(error, ApiError)
    assert (
        str(error) == "PATCH /api/v1/namespaces/a/secrets/b: not sent: this replica does not lead"
    )
