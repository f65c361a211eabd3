"""The webhooks' own CA and serving certificate: what they name, how long they last, when the
serving one is renewed, and a real TLS handshake on loopback that trusts only that CA."""

from __future__ import annotations

import datetime
import socket
import ssl
import tempfile
import threading
from pathlib import Path

import pytest
from cryptography import x509

from database_operator.webhooks.certificates import (
    CA_LIFETIME,
    CLOCK_SKEW,
    RENEW_BEFORE,
    SERVING_LIFETIME,
    KeyPair,
    ca_is_current,
    new_ca,
    new_serving,
    serving_is_current,
)

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
SERVICE = ["database-operator-webhook.ops.svc", "database-operator-webhook.ops.svc.cluster.local"]


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return new_ca(NOW)


def test_the_ca_is_a_ca_for_ten_years_backdated_for_clock_skew(ca: KeyPair) -> None:
    cert = x509.load_pem_x509_certificate(ca.cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.not_valid_before_utc == NOW - CLOCK_SKEW
    assert cert.not_valid_after_utc == NOW + CA_LIFETIME
    assert ca_is_current(ca, NOW)
    # Too close to its end to sign a serving certificate of a full year: a new CA is due.
    assert not ca_is_current(ca, NOW + CA_LIFETIME - SERVING_LIFETIME)
    assert not ca_is_current(KeyPair(b"", b""), NOW)


def test_the_serving_certificate_names_the_service_and_lasts_a_year(ca: KeyPair) -> None:
    serving = new_serving(ca, SERVICE, NOW)
    cert = x509.load_pem_x509_certificate(serving.cert)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == SERVICE
    assert cert.not_valid_after_utc == NOW + SERVING_LIFETIME
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert))


def test_loopback_gets_an_ip_address_name(ca: KeyPair) -> None:
    cert = x509.load_pem_x509_certificate(new_serving(ca, ["127.0.0.1"], NOW).cert)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_the_serving_certificate_is_renewed_before_it_ends_or_when_it_is_not_ours(
    ca: KeyPair,
) -> None:
    serving = new_serving(ca, SERVICE, NOW)
    assert serving_is_current(ca, serving, SERVICE, NOW)
    end = NOW + SERVING_LIFETIME
    assert serving_is_current(ca, serving, SERVICE, end - RENEW_BEFORE - datetime.timedelta(1))
    assert not serving_is_current(ca, serving, SERVICE, end - RENEW_BEFORE)
    # Another Service name, another CA, or garbage: renew.
    assert not serving_is_current(ca, serving, ["other.ops.svc"], NOW)
    assert not serving_is_current(new_ca(NOW), serving, SERVICE, NOW)
    assert not serving_is_current(ca, KeyPair(b"junk", b"junk"), SERVICE, NOW)


def test_a_serving_certificate_never_outlives_its_ca(ca: KeyPair) -> None:
    late = NOW + CA_LIFETIME - datetime.timedelta(days=100)
    cert = x509.load_pem_x509_certificate(new_serving(ca, SERVICE, late).cert)
    assert cert.not_valid_after_utc == NOW + CA_LIFETIME


def handshake(server_pair: KeyPair, trusted: KeyPair, hostname: str) -> str:
    """Serve ``server_pair`` on loopback; connect trusting only ``trusted`` and checking
    ``hostname``. Returns the negotiated TLS version."""
    folder = Path(tempfile.mkdtemp())
    (folder / "tls.crt").write_bytes(server_pair.cert)
    (folder / "tls.key").write_bytes(server_pair.key)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        try:
            with server_context.wrap_socket(connection, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_context = ssl.create_default_context(cadata=trusted.cert.decode())
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_context.wrap_socket(raw, server_hostname=hostname) as tls,
        ):
            version = str(tls.version())
            tls.sendall(b"x")
            return version
    finally:
        thread.join(timeout=5)
        listener.close()


def test_a_client_that_trusts_the_ca_completes_the_handshake(ca: KeyPair) -> None:
    serving = new_serving(ca, SERVICE, datetime.datetime.now(datetime.UTC))
    assert handshake(serving, ca, SERVICE[0]).startswith("TLSv1.")


def test_a_client_trusting_another_ca_or_name_refuses_it(ca: KeyPair) -> None:
    serving = new_serving(ca, SERVICE, datetime.datetime.now(datetime.UTC))
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        handshake(serving, new_ca(datetime.datetime.now(datetime.UTC)), SERVICE[0])
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(serving, ca, "other.ops.svc")
