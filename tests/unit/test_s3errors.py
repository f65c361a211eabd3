"""What each failure the S3 client raises means for the backup agent: the truth table of
s3errors.classify, with the client's own exception classes, wrapped as boto3 wraps them.

The agent's run against a real store (tests/integration/test_agent_store.py) shows the common
ones for real; this table covers those a test store cannot be made to answer on demand (a 503
SlowDown, an expired token, a redirect to another region, a certificate signed by an unknown
CA)."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest
from boto3.exceptions import RetriesExceededError, S3UploadFailedError
from botocore import exceptions as botocore_errors
from botocore.exceptions import ClientError
from botocore.retries.standard import ThrottledRetryableChecker, TransientRetryableChecker
from s3transfer.exceptions import S3DownloadFailedError

from database_operator.api import backup
from database_operator.backups.s3errors import Cause, Destination, Failure, classify

ENDPOINT = "http://store.example:8333"


def answered(code: str, status: int, message: str = "") -> ClientError:
    """What botocore raises for the store's error response."""
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "PutObject")  # type: ignore[arg-type]


def raised_while_handling(wrap: Callable[[], BaseException], inner: BaseException) -> BaseException:
    """``wrap()`` raised inside ``except`` of ``inner``, as boto3's upload_file raises
    S3UploadFailedError for a ClientError (boto3/s3/transfer.py): chained implicitly."""
    try:
        try:
            raise inner
        except BaseException:
            raise wrap() from None
    except BaseException as outer:
        return outer


def upload_failed(inner: ClientError) -> BaseException:
    return raised_while_handling(lambda: S3UploadFailedError(f"Failed to upload: {inner}"), inner)


READ_TIMEOUT = botocore_errors.ReadTimeoutError(endpoint_url=ENDPOINT, error="read timed out")


def retries_exceeded(last: BaseException) -> RetriesExceededError:
    """boto3's download_file gives up: ``last`` is the network error of its last attempt
    (boto3's stubs type it as a boto3 error; s3transfer passes socket and botocore errors)."""
    return RetriesExceededError(last)  # type: ignore[arg-type]


TABLE = [
    # The keys: the store does not know the access key, or the secret key signs wrongly.
    (answered("SignatureDoesNotMatch", 403), Cause.CREDENTIALS),
    (answered("InvalidAccessKeyId", 403), Cause.CREDENTIALS),
    (answered("ExpiredToken", 400), Cause.CREDENTIALS),
    (botocore_errors.NoCredentialsError(), Cause.CREDENTIALS),
    (
        botocore_errors.PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"),
        Cause.CREDENTIALS,
    ),
    # Refused: the keys' rights (or a HEAD's bare 403, which cannot say which).
    (answered("AccessDenied", 403), Cause.DENIED),
    (answered("403", 403, "Forbidden"), Cause.DENIED),
    (answered("NoSuchBucket", 404), Cause.NO_BUCKET),
    (answered("NoSuchKey", 404), Cause.NO_OBJECT),
    (answered("404", 404, "Not Found"), Cause.NO_OBJECT),
    # Settings: the bucket is elsewhere, the region wrong, the store lacks the operation.
    (answered("PermanentRedirect", 301), Cause.SETTINGS),
    (answered("AuthorizationHeaderMalformed", 400), Cause.SETTINGS),
    (answered("NotImplemented", 501), Cause.SETTINGS),
    (answered("RequestTimeTooSkewed", 403), Cause.SETTINGS),
    (botocore_errors.ParamValidationError(report='Invalid bucket name "a_b"'), Cause.SETTINGS),
    (botocore_errors.InvalidRegionError(region_name="bad region!"), Cause.SETTINGS),
    (ValueError("Invalid endpoint: http://a_b:8333"), Cause.SETTINGS),
    (
        botocore_errors.SSLError(
            endpoint_url=ENDPOINT,
            error=ssl.SSLCertVerificationError(
                "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
            ),
        ),
        Cause.TLS,
    ),
    # AWS_CA_BUNDLE names no file (the CA Secret has no ca.crt): botocore says so with the
    # FileNotFoundError as the context of its SSLError.
    (
        raised_while_handling(
            lambda: botocore_errors.SSLError(endpoint_url=ENDPOINT, error=OSError("No such file")),
            FileNotFoundError(2, "No such file or directory"),
        ),
        Cause.TLS,
    ),
    # Any other 4xx: the same request is refused again.
    (answered("InvalidArgument", 400), Cause.REFUSED),
    (answered("EntityTooLarge", 400), Cause.REFUSED),
    # A store failing, busy or throttling.
    (answered("SlowDown", 503), Cause.UNAVAILABLE),
    (answered("InternalError", 500), Cause.UNAVAILABLE),
    (answered("ServiceUnavailable", 503), Cause.UNAVAILABLE),
    (answered("", 502), Cause.UNAVAILABLE),
    (answered("TooManyRequests", 429), Cause.UNAVAILABLE),
    (answered("RequestTimeout", 400), Cause.UNAVAILABLE),
    (answered("OperationAborted", 409), Cause.UNAVAILABLE),
    # The network: nobody listening, no name, a timeout, a connection or a body cut short.
    (botocore_errors.EndpointConnectionError(endpoint_url=ENDPOINT), Cause.UNAVAILABLE),
    (botocore_errors.ConnectTimeoutError(endpoint_url=ENDPOINT), Cause.UNAVAILABLE),
    (READ_TIMEOUT, Cause.UNAVAILABLE),
    (botocore_errors.ConnectionClosedError(endpoint_url=ENDPOINT), Cause.UNAVAILABLE),
    (botocore_errors.ResponseStreamingError(error="connection reset"), Cause.UNAVAILABLE),
    (botocore_errors.IncompleteReadError(actual_bytes=10, expected_bytes=20), Cause.UNAVAILABLE),
    (
        botocore_errors.SSLError(
            endpoint_url=ENDPOINT, error=ssl.SSLEOFError("EOF occurred in violation of protocol")
        ),
        Cause.UNAVAILABLE,
    ),
    (ConnectionResetError(104, "Connection reset by peer"), Cause.UNAVAILABLE),
    (TimeoutError("timed out"), Cause.UNAVAILABLE),
    # What boto3 wraps is classified by what it carries.
    (upload_failed(answered("SignatureDoesNotMatch", 403)), Cause.CREDENTIALS),
    (upload_failed(answered("AccessDenied", 403)), Cause.DENIED),
    (upload_failed(answered("NoSuchBucket", 404)), Cause.NO_BUCKET),
    (upload_failed(answered("SlowDown", 503)), Cause.UNAVAILABLE),
    (retries_exceeded(READ_TIMEOUT), Cause.UNAVAILABLE),
    # The object changed while it was read (a 412 underneath): read it again.
    (
        raised_while_handling(
            lambda: S3DownloadFailedError("did not match expected ETag"),
            answered("PreconditionFailed", 412),
        ),
        Cause.UNAVAILABLE,
    ),
]


@pytest.mark.parametrize(
    ("error", "cause"),
    TABLE,
    ids=[f"{type(error).__name__}-{str(error)[:60]}" for error, _ in TABLE],
)
def test_every_failure_the_client_raises_has_one_meaning(
    error: BaseException, cause: Cause
) -> None:
    assert classify(error).cause is cause


def test_only_an_unavailable_store_is_worth_a_retry() -> None:
    assert [cause for cause in Cause if not cause.permanent] == [Cause.UNAVAILABLE]


@pytest.mark.parametrize(
    "code",
    sorted(
        # botocore's own lists (class attributes its stubs do not declare)
        set(vars(TransientRetryableChecker)["_TRANSIENT_ERROR_CODES"])
        | set(vars(ThrottledRetryableChecker)["_THROTTLED_ERROR_CODES"])
    ),
)
def test_what_botocore_itself_retries_is_worth_a_retry_whatever_the_status(code: str) -> None:
    """botocore's standard retry mode retries these codes: a new pod may meet them too, and
    then should try again (a new botocore that adds codes shows up here)."""
    assert classify(answered(code, 400)).cause is Cause.UNAVAILABLE


def test_a_wrapped_failure_keeps_the_words_of_the_store() -> None:
    failure = classify(upload_failed(answered("SignatureDoesNotMatch", 403, "Check your key")))
    assert failure == Failure(Cause.CREDENTIALS, "SignatureDoesNotMatch (403): Check your key")


def test_a_network_failure_keeps_the_words_of_what_boto3_wrapped() -> None:
    failure = classify(retries_exceeded(READ_TIMEOUT))
    assert failure.detail == f'Read timeout on endpoint URL: "{ENDPOINT}"'


DESTINATION = Destination(bucket="backups", endpoint=ENDPOINT, region="eu-west-1", secret="s3")


@pytest.mark.parametrize(
    ("cause", "words"),
    [
        (Cause.CREDENTIALS, "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the Secret s3"),
        (Cause.DENIED, "may read, write and delete objects in the bucket backups"),
        (Cause.NO_BUCKET, f"the bucket backups does not exist at {ENDPOINT}"),
        (Cause.SETTINGS, f"check s3.endpoint ({ENDPOINT}), s3.region (eu-west-1)"),
        (Cause.TLS, "needs s3.caBundleSecretRef"),
        (Cause.UNAVAILABLE, "worth a retry"),
    ],
)
def test_the_words_say_what_to_change(cause: Cause, words: str) -> None:
    message = DESTINATION.explain(Failure(cause, "the detail"), "uploading k to")
    assert message.startswith("uploading k to s3://backups: ")
    assert words in message
    assert "(the detail)" in message or "the detail (" in message


def test_the_key_names_are_the_apis() -> None:
    from database_operator.backups import s3errors

    assert (s3errors.ACCESS_KEY_ID, s3errors.SECRET_ACCESS_KEY) == (
        backup.ACCESS_KEY_ID,
        backup.SECRET_ACCESS_KEY,
    )
