"""What a failed API call means, decided once: ``classify`` reads the API server's answer, and
every caller asks an ``ApiError`` its ``failure`` (or one of the properties read from it) instead
of comparing statuses and wording of its own.

The client's exceptions never leave the kube package: ``api_error`` turns them into ``ApiError``
(an answer) or ``UnreachableError`` (none).
"""

from __future__ import annotations

import contextlib
import enum
import json
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

#: HTTP statuses worth retrying besides a conflict: a token being rotated, throttling, and the
#: server's own trouble.
TRANSIENT = {401, 429, 500, 502, 503, 504}
#: HTTP statuses that refuse the content of a write (invalid or malformed).
INVALID = {400, 422}
#: How kube-apiserver's authorizer words a 403 (RBAC). Every other 403 is a refusal by
#: admission: a webhook or ValidatingAdmissionPolicy, a ResourceQuota, a terminating namespace.
RBAC_DENIAL = " cannot "
#: How kube-apiserver's NamespaceLifecycle admission words a create refused in a namespace
#: being deleted ("unable to create new content in namespace X because it is being terminated").
NAMESPACE_TERMINATING = "because it is being terminated"
#: How kube-apiserver words a JSON patch whose ``test`` operation failed (a 422).
TEST_FAILED = "test failed"


class Failure(enum.Enum):
    """What a failed call means to its caller: one reading of each answer."""

    #: No answer: the API server could not be reached.
    UNREACHABLE = "unreachable"
    #: RBAC does not allow the call (a 403 of the authorizer): the operator's installation,
    #: fixed by an administrator, so retried (RBAC may be applied after the operator).
    FORBIDDEN = "forbidden"
    #: A create refused because its namespace is being deleted (a 403 of admission): expected
    #: while a namespace goes (its Databases go with it), neither the object's fault nor ours.
    NAMESPACE_TERMINATING = "namespace terminating"
    #: The content of a write refused (422 invalid, 400 malformed, 403 denied by admission):
    #: about the object we sent, reported on the Database.
    REFUSED = "refused"
    #: The object is not as the write assumed (409): changed since it was read, a precondition
    #: (its uid) failed, or a create found it there already; or a guarded patch's ``test``
    #: failed. Read afresh and go again.
    STALE = "stale"
    #: No such object, or no such resource (404).
    NOT_FOUND = "not found"
    #: The resourceVersion a watch was to go on from is too old (410 Gone): list afresh.
    EXPIRED = "expired"
    #: Throttling, the server's own trouble, a token being rotated: try again soon.
    TRANSIENT = "transient"
    #: Any other answer.
    OTHER = "other"


#: The failures worth trying again soon.
RETRIED = {Failure.UNREACHABLE, Failure.FORBIDDEN, Failure.STALE, Failure.TRANSIENT}


#: What an answer of each status means; a 403 means one of three things (see ``classify``).
_BY_STATUS = {
    **dict.fromkeys(INVALID, Failure.REFUSED),
    409: Failure.STALE,
    404: Failure.NOT_FOUND,
    410: Failure.EXPIRED,
    **dict.fromkeys(TRANSIENT, Failure.TRANSIENT),
}


def classify(status: int, message: str) -> Failure:
    """What the API server's answer (its HTTP status and the message of its Status) means."""
    if status != 403:
        return _BY_STATUS.get(status, Failure.OTHER)
    # RBAC is asked before admission: a call it denies never reaches NamespaceLifecycle.
    if RBAC_DENIAL in message:
        return Failure.FORBIDDEN
    if NAMESPACE_TERMINATING in message:
        return Failure.NAMESPACE_TERMINATING
    return Failure.REFUSED


@dataclass
class ApiError(Exception):
    """A failed API call, with what a caller needs to decide: retry or report (``failure``)."""

    status: int  # the answer's HTTP status (UnreachableError: 0, there was no answer)
    reason: str
    message: str
    verb: str
    path: str

    def __str__(self) -> str:
        return f"{self.verb} {self.path}: {self.status} {self.reason}: {self.message}"

    @property
    def failure(self) -> Failure:
        return classify(self.status, self.message)

    @property
    def forbidden(self) -> bool:
        """RBAC does not allow the call."""
        return self.failure is Failure.FORBIDDEN

    @property
    def namespace_terminating(self) -> bool:
        """A create refused because its namespace is being deleted."""
        return self.failure is Failure.NAMESPACE_TERMINATING

    @property
    def refused(self) -> bool:
        """The server refused the content of a write: reported on the Database, tried again at
        the next resync."""
        return self.failure is Failure.REFUSED

    @property
    def retryable(self) -> bool:
        """Worth trying again soon: a conflict, throttling, a server error, no answer, or a
        permission an administrator may grant."""
        return self.failure in RETRIED

    @property
    def stale(self) -> bool:
        """Refused because the object is not as it was read: read it afresh and go again."""
        return self.failure is Failure.STALE

    @property
    def not_found(self) -> bool:
        """No such object (or resource)."""
        return self.failure is Failure.NOT_FOUND

    @property
    def expired(self) -> bool:
        """A watch's resourceVersion too old to go on from: list afresh."""
        return self.failure is Failure.EXPIRED


class UnreachableError(ApiError):
    """No answer: the API server could not be reached (connection refused or reset, a timeout).
    An ApiError, so that whoever handles a failed call handles this one too; there is no HTTP
    status (``status`` is 0, the code the api_errors metric counts it under)."""

    @property
    def failure(self) -> Failure:
        return Failure.UNREACHABLE


class StaleReadError(ApiError):
    """A guarded write refused because what it was built from changed since it was read: a
    JSON patch whose ``test`` failed (the server's 422, no refusal of what we sent). Read
    afresh and go again."""

    @property
    def failure(self) -> Failure:
        return Failure.STALE


class NotLeadingError(Exception):
    """A write refused before it was sent: this replica does not surely hold the Lease. No API
    call failed; whoever leads does the work."""

    def __init__(self, verb: str, path: str) -> None:
        super().__init__(f"{verb} {path}: not sent: this replica does not lead")
        self.verb = verb
        self.path = path


def api_error(error: Exception, verb: str, path: str) -> ApiError:
    """The client's exception ``error`` of the call ``verb path``: an answer, or none."""
    if isinstance(error, ApiException):
        message = str(error.reason)
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(error.body or "{}").get("message", message)
        return ApiError(int(error.status or 0), str(error.reason), message, verb, path)
    return UnreachableError(0, type(error).__name__, str(error), verb, path)


def stale_read(error: ApiError) -> StaleReadError | None:
    """A guarded JSON patch's failure read as what it is: its ``test`` failed (the server's 422),
    the object changed since it was read (None: some other failure)."""
    if error.status == 422 and TEST_FAILED in error.message:
        return StaleReadError(error.status, error.reason, error.message, error.verb, error.path)
    return None
