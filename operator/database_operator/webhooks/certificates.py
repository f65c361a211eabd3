"""The webhooks' own certificate authority and serving certificate, for clusters without
cert-manager: a CA (10 years) and a serving certificate it signs (1 year) for the webhook
Service's DNS names or a loopback address. The API server trusts the CA through the caBundle of
the webhook configurations and of the CRD's conversion stanza.

Pure functions over PEM bytes; where they are kept (a Secret, memory) is the server's business.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = datetime.timedelta(days=3650)
SERVING_LIFETIME = datetime.timedelta(days=365)
#: A serving certificate this close to its end is renewed (cert-manager's default: a third).
RENEW_BEFORE = datetime.timedelta(days=30)
#: Backdated, so that a node whose clock is a little behind accepts a certificate made now.
CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM."""

    cert: bytes
    key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "database-operator"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def new_ca(now: datetime.datetime) -> KeyPair:
    """A self-signed CA that signs only the webhook's serving certificates."""
    key = _key()
    name = _name("database-operator webhook CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def new_serving(ca: KeyPair, hosts: list[str], now: datetime.datetime) -> KeyPair:
    """A TLS server certificate for ``hosts`` (DNS names or IP addresses), signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the webhook CA key must be an EC key")
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + SERVING_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def serving_is_current(
    ca: KeyPair, serving: KeyPair, hosts: list[str], now: datetime.datetime
) -> bool:
    """Whether ``serving`` was signed by ``ca``, names every host, and is not due for renewal."""
    try:
        cert = x509.load_pem_x509_certificate(serving.cert)
        ca_cert = x509.load_pem_x509_certificate(ca.cert)
        cert.verify_directly_issued_by(ca_cert)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    named = {str(n.value) for n in names}
    return set(hosts) <= named and cert.not_valid_after_utc - RENEW_BEFORE > now


def ca_is_current(ca: KeyPair, now: datetime.datetime) -> bool:
    """Whether the CA can still sign a serving certificate of a full lifetime."""
    try:
        cert = x509.load_pem_x509_certificate(ca.cert)
        serialization.load_pem_private_key(ca.key, password=None)
    except (ValueError, TypeError):
        return False
    return cert.not_valid_after_utc - SERVING_LIFETIME > now
