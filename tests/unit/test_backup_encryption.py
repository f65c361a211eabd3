"""The backups' client-side encryption (backups/encryption.py): what is stored, what decrypts,
and what is refused."""

from __future__ import annotations

import base64
import hashlib
import io
import os
from pathlib import Path

import pytest

from database_operator.backups import encryption
from database_operator.backups.encryption import EncryptionError

KEY = os.urandom(32)
HEADER = len(encryption.MAGIC) + encryption.IV_BYTES


def sealed(plain: bytes, key: bytes = KEY, read: int = -1) -> tuple[bytes, encryption.Encrypting]:
    """``plain`` encrypted, read in pieces of ``read`` bytes (as an upload reads its parts)."""
    stream = encryption.Encrypting(io.BytesIO(plain), key, len(plain))
    out = b""
    while piece := stream.read(read):
        out += piece
    return out, stream


@pytest.mark.parametrize(
    "size", [0, 1, encryption.CHUNK - 1, encryption.CHUNK, 2 * encryption.CHUNK + 7]
)
@pytest.mark.parametrize("read", [-1, 8192, 5 * 1024 * 1024])
def test_what_is_stored_decrypts_to_the_dump(tmp_path: Path, size: int, read: int) -> None:
    plain = os.urandom(size)
    stored, stream = sealed(plain, read=read)
    assert len(stored) == size + HEADER + encryption.TAG_BYTES
    assert (stream.size, stream.sha256) == (len(stored), hashlib.sha256(stored).hexdigest())
    assert stored.startswith(encryption.MAGIC)
    (tmp_path / "stored").write_bytes(stored)
    encryption.decrypt(tmp_path / "stored", tmp_path / "dump", KEY)
    assert (tmp_path / "dump").read_bytes() == plain
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump", "stored"]


def test_each_backup_has_its_own_iv() -> None:
    first, _ = sealed(b"the same dump")
    second, _ = sealed(b"the same dump")
    assert first[len(encryption.MAGIC) : HEADER] != second[len(encryption.MAGIC) : HEADER]
    assert first != second


@pytest.mark.parametrize("where", ["iv", "ciphertext", "tag"])
def test_a_changed_byte_or_another_key_decrypts_nothing(tmp_path: Path, where: str) -> None:
    stored = bytearray(sealed(b"x" * 100_000)[0])
    index = {"iv": len(encryption.MAGIC) + 1, "ciphertext": HEADER + 5, "tag": len(stored) - 1}
    stored[index[where]] ^= 0x80
    (tmp_path / "stored").write_bytes(stored)
    with pytest.raises(EncryptionError, match="authentication tag does not verify"):
        encryption.decrypt(tmp_path / "stored", tmp_path / "dump", KEY)
    (tmp_path / "whole").write_bytes(sealed(b"x" * 100)[0])
    with pytest.raises(EncryptionError, match="authentication tag does not verify"):
        encryption.decrypt(tmp_path / "whole", tmp_path / "dump", os.urandom(32))
    assert not (tmp_path / "dump").exists()
    assert not list(tmp_path.glob("*.decrypting"))


def test_what_is_not_an_encrypted_backup_is_said_so(tmp_path: Path) -> None:
    (tmp_path / "short").write_bytes(b"DBOP")
    (tmp_path / "plain").write_bytes(b"PGDMP" + b"\0" * 100)
    with pytest.raises(EncryptionError, match="too short"):
        encryption.decrypt(tmp_path / "short", tmp_path / "dump", KEY)
    with pytest.raises(EncryptionError, match="not an encrypted backup"):
        encryption.decrypt(tmp_path / "plain", tmp_path / "dump", KEY)


def test_a_key_is_32_bytes_of_base64_and_its_error_never_shows_it() -> None:
    text = base64.b64encode(KEY) + b"\n"
    assert encryption.load_key(text, "the Secret k") == KEY
    for bad in (base64.b64encode(os.urandom(16)), b"not base64 at all!", b""):
        with pytest.raises(EncryptionError) as raised:
            encryption.load_key(bad, "the Secret k (key key)")
        assert "the Secret k (key key) does not hold a key" in str(raised.value)
        assert bad.decode(errors="replace") not in str(raised.value) or not bad


def test_a_keys_id_tells_keys_apart_and_says_nothing_of_the_key() -> None:
    assert encryption.key_id(KEY) == encryption.key_id(bytes(KEY))
    assert encryption.key_id(KEY) != encryption.key_id(os.urandom(32))
    assert len(encryption.key_id(KEY)) == 16
    assert encryption.key_id(KEY) not in (KEY.hex(), hashlib.sha256(KEY).hexdigest()[:16])


def test_a_dump_larger_than_one_gcm_stream_is_refused_before_anything_is_read() -> None:
    with pytest.raises(EncryptionError, match="more than one AES-GCM stream"):
        encryption.Encrypting(io.BytesIO(b""), KEY, encryption.MAX_PLAINTEXT + 1)
