"""What a failure of the S3 client means for the backup agent: one a retry may cure, or one it
cannot — classified here, once, for every call the agent makes to a bucket.

The agent's exit status is the Job's decision (jobs.py): a failure a retry cannot cure makes
the Job fail at once (podFailurePolicy), any other runs a new pod, up to the Job's backoff
limit. A wrong key retried as if the network had failed costs three pods, three full dumps and
about fifty seconds before anyone is told, and then in the wrong words; a network failure taken
for good loses a backup that the next pod would have taken. So:

- for good (exit 3): the store does not accept the credentials, denies the request, has no such
  bucket or object, or the settings are wrong (an endpoint botocore cannot use, a region, TLS
  that cannot work) — and any other 4xx: the same request is refused the same way;
- worth a retry (exit 1): no connection, a timeout, a connection cut mid-transfer, a 5xx (but
  501, not implemented), a throttled request (SlowDown, 429, 503), and anything this module
  does not know.

What the client raises is not always what happened: boto3's upload_file raises
``S3UploadFailedError`` for any ``ClientError`` of the transfer (raised while handling it, so
the ``ClientError`` is its ``__context__``), download_file raises boto3's
``RetriesExceededError`` with the network error in ``last_exception``. Both are unwrapped here
to the failure they carry. Everything else arrives as botocore raised it (a ``ClientError``
with the store's code and status, or a ``BotoCoreError``).

The words name what to fix — the Secret and its keys, the bucket, the endpoint — and never a
secret value (the client never puts one in an error: only the store's code and message).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from boto3.exceptions import RetriesExceededError, S3UploadFailedError
from botocore import exceptions as botocore_errors
from s3transfer.exceptions import RetriesExceededError as TransferRetriesExceededError
from s3transfer.exceptions import S3DownloadFailedError

#: The variables (and the credentials Secret's keys) boto3 reads the credentials from.
ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"


class Cause(enum.Enum):
    """What went wrong, named by what would put it right."""

    #: The store does not know the access key, or the signature (the secret key) is wrong.
    CREDENTIALS = "credentials"
    #: The store refused the request (AccessDenied, or a bare 403): the keys, or their rights.
    DENIED = "denied"
    NO_BUCKET = "no bucket"
    NO_OBJECT = "no object"
    #: The destination's endpoint, region or bucket cannot work as they are.
    SETTINGS = "settings"
    #: TLS to the endpoint cannot work: an untrusted certificate, no TLS there at all, or no
    #: CA bundle where AWS_CA_BUNDLE says.
    TLS = "tls"
    #: Another 4xx: this request is refused, and would be again.
    REFUSED = "refused"
    #: The network, a timeout, a cut transfer, a 5xx, throttling, or an error not known here.
    UNAVAILABLE = "unavailable"

    @property
    def permanent(self) -> bool:
        """A retry fails the same way: the Job should fail at once."""
        return self is not Cause.UNAVAILABLE


@dataclass(frozen=True)
class Failure:
    """A classified failure: its cause, and the store's or the client's own words."""

    cause: Cause
    detail: str

    @property
    def permanent(self) -> bool:
        return self.cause.permanent


# The store's error codes (S3's, which S3-compatible stores answer too), by cause.
_CREDENTIALS_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "InvalidSecurity",
        "MissingSecurityHeader",
        "AuthorizationQueryParametersError",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
    }
)
_DENIED_CODES = frozenset(
    {"AccessDenied", "AllAccessDisabled", "AccountProblem", "Forbidden", "403"}
)
_NO_BUCKET_CODES = frozenset({"NoSuchBucket"})
#: "404"/"NotFound": a HEAD's answer has no body to name the error.
_NO_OBJECT_CODES = frozenset({"NoSuchKey", "NoSuchVersion", "NotFound", "404"})
_SETTINGS_CODES = frozenset(
    {
        # The bucket is in another region, or served by another endpoint.
        "PermanentRedirect",
        "301",
        "AuthorizationHeaderMalformed",
        "IllegalLocationConstraintException",
        "InvalidBucketName",
        "InvalidURI",
        # The store does not implement what the agent asks of it.
        "NotImplemented",
        "MethodNotAllowed",
        # The node's clock and the store's are more than 15 minutes apart.
        "RequestTimeTooSkewed",
    }
)
#: Codes a retry may cure even where the status is a 4xx: botocore's own retryable codes
#: (botocore.retries.standard, pinned by a test) and S3's for a request that was cut or
#: conflicted with another.
_TRANSIENT_CODES = frozenset(
    {
        # botocore's transient codes
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        # botocore's throttling codes
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "EC2ThrottledException",
        # S3's: a store failing or busy, a body cut or damaged on the way, a conflicting write
        "InternalError",
        "ServiceUnavailable",
        "IncompleteBody",
        "BadDigest",
        "XAmzContentSHA256Mismatch",
        "OperationAborted",
    }
)
#: Statuses a retry may cure: a timeout, throttling, a store failing or restarting (not 501).
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: What ssl says when TLS to the endpoint cannot work, whatever the retry.
_TLS_SETTINGS = ("CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER", "Hostname mismatch")

_SETTINGS_ERRORS = (
    # Raised before a request is sent: a bucket name, a region, an endpoint botocore cannot use.
    botocore_errors.ParamValidationError,
    botocore_errors.ValidationError,
    botocore_errors.BaseEndpointResolverError,
    botocore_errors.InvalidDNSNameError,
    botocore_errors.InvalidHostLabelError,
    botocore_errors.InvalidS3AddressingStyleError,
    botocore_errors.UnsupportedS3ConfigurationError,
    botocore_errors.InvalidConfigError,
    botocore_errors.InvalidRetryConfigurationError,
    # boto3.client(endpoint_url=...) says "Invalid endpoint: ..." with a plain ValueError.
    ValueError,
)
_CREDENTIALS_ERRORS = (
    botocore_errors.NoCredentialsError,
    botocore_errors.PartialCredentialsError,
    botocore_errors.CredentialRetrievalError,
)


def classify(error: BaseException) -> Failure:
    """What ``error``, raised by boto3 or botocore for a call to a bucket, means."""
    for one in _unwrapped(error):
        if isinstance(one, botocore_errors.ClientError):
            return _from_response(one)
        if isinstance(one, _CREDENTIALS_ERRORS):
            return Failure(Cause.CREDENTIALS, str(one))
        if isinstance(one, botocore_errors.SSLError):
            return Failure(Cause.TLS if _tls_cannot_work(one) else Cause.UNAVAILABLE, str(one))
        if isinstance(one, _SETTINGS_ERRORS):
            return Failure(Cause.SETTINGS, str(one).replace("\n", " "))
        if isinstance(one, S3DownloadFailedError):
            # The object changed while it was read (its ETag): read again, it is whole.
            return Failure(Cause.UNAVAILABLE, str(one))
    # A connection refused, reset or timed out (botocore's ConnectionError, HTTPClientError,
    # ReadTimeoutError...), a body shorter than announced, and anything not known above.
    return Failure(Cause.UNAVAILABLE, _words(error))


def _unwrapped(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what each boto3 or s3transfer wrapper of it carries, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        if isinstance(current, RetriesExceededError | TransferRetriesExceededError):
            # (boto3's stubs do not know the attribute its __init__ sets)
            last = getattr(current, "last_exception", None)
            current = last if isinstance(last, BaseException) else None
        elif isinstance(current, S3UploadFailedError):
            # Raised inside boto3's `except ClientError`: the ClientError is its context.
            current = current.__cause__ or current.__context__
        else:
            return


def _tls_cannot_work(error: botocore_errors.SSLError) -> bool:
    """Whether TLS fails whatever the retry: an untrusted certificate, an endpoint without TLS,
    or no CA bundle where AWS_CA_BUNDLE says (a Secret without the key): not a handshake cut
    short."""
    if any(words in str(error) for words in _TLS_SETTINGS):
        return True
    inner = error.__context__
    while inner is not None:
        if isinstance(inner, FileNotFoundError):
            return True
        inner = inner.__context__
    return False


def _from_response(error: botocore_errors.ClientError) -> Failure:
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    message = str(error.response.get("Error", {}).get("Message", ""))
    named = f"{code} ({status})" if code and status and code != str(status) else code or status
    detail = f"{named}: {message}" if message else str(named)
    for codes, cause in (
        (_TRANSIENT_CODES, Cause.UNAVAILABLE),
        (_CREDENTIALS_CODES, Cause.CREDENTIALS),
        (_NO_BUCKET_CODES, Cause.NO_BUCKET),
        (_NO_OBJECT_CODES, Cause.NO_OBJECT),
        (_SETTINGS_CODES, Cause.SETTINGS),
        (_DENIED_CODES, Cause.DENIED),
    ):
        if code in codes:
            return Failure(cause, detail)
    if status in _TRANSIENT_STATUSES or not 400 <= status < 500:
        return Failure(Cause.UNAVAILABLE, detail)
    if status == 403:
        return Failure(Cause.DENIED, detail)
    if status == 404:
        return Failure(Cause.NO_OBJECT, detail)
    return Failure(Cause.REFUSED, detail)


def _words(error: BaseException) -> str:
    """What the innermost error boto3 wraps says (a wrapper's own words say little)."""
    *_, inner = _unwrapped(error)
    return str(inner) or type(inner).__name__


@dataclass(frozen=True)
class Destination:
    """The bucket and the settings the words name: what a person can check and change."""

    bucket: str
    endpoint: str | None
    region: str
    #: The credentials Secret's name (the Job says it), if known.
    secret: str | None = None
    #: S3's server-side encryption of what is stored (AES256, aws:kms), and the KMS key's id.
    encryption: str | None = None
    kms_key_id: str | None = None

    @property
    def put_args(self) -> dict[str, str]:
        """The arguments of each upload that ask for the server-side encryption."""
        found = {"ServerSideEncryption": self.encryption} if self.encryption else {}
        return found | ({"SSEKMSKeyId": self.kms_key_id} if self.kms_key_id else {})

    @property
    def keys(self) -> str:
        where = f"the Secret {self.secret}" if self.secret else "the credentials Secret"
        return f"{ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} in {where} (s3.credentialsSecretRef)"

    @property
    def store(self) -> str:
        return self.endpoint or f"AWS S3 ({self.region})"

    def explain(self, failure: Failure, doing: str) -> str:
        """The message for people: ``doing`` (e.g. "uploading K to"), what happened, and, for
        a failure a retry cannot cure, what to change."""
        where = f"{doing} s3://{self.bucket}"
        detail = failure.detail
        match failure.cause:
            case Cause.CREDENTIALS:
                why = f"the store does not accept the credentials ({detail}): check {self.keys}"
            case Cause.DENIED:
                why = (
                    f"access denied ({detail}): check {self.keys}, and that they may read, "
                    f"write and delete objects in the bucket {self.bucket}"
                )
            case Cause.NO_BUCKET:
                why = (
                    f"the bucket {self.bucket} does not exist at {self.store} ({detail}): "
                    "create it, or correct the destination's s3.bucket"
                )
            case Cause.NO_OBJECT:
                why = f"the object does not exist ({detail})"
            case Cause.SETTINGS:
                why = (
                    f"the destination's settings cannot work ({detail}): check s3.endpoint "
                    f"({self.endpoint or 'none: AWS S3'}), s3.region ({self.region}) and "
                    f"s3.bucket ({self.bucket})"
                )
            case Cause.TLS:
                why = (
                    f"TLS to {self.store} cannot work ({detail}): a store whose certificate a "
                    "private CA signed needs s3.caBundleSecretRef (a Secret with the key ca.crt); "
                    "one without TLS, an http:// s3.endpoint"
                )
            case Cause.REFUSED:
                why = f"the store refused the request ({detail})"
            case Cause.UNAVAILABLE:
                why = f"{detail} (the store is unreachable, busy or failing: worth a retry)"
        return f"{where}: {why}"
