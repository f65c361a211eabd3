"""Client-side encryption of backups (a destination's ``encryption.keySecretRef``): the agent
encrypts a dump as it uploads it and decrypts it after the download is verified, so the store
(and whoever reads the bucket or the claim) only ever holds ciphertext.

AES-256-GCM (the maintained ``cryptography`` package), one stream per backup: a fresh random
96-bit IV per backup, so a key never meets an IV twice. The stored object is ``MAGIC``, the IV,
the ciphertext and GCM's 128-bit tag; the checksums the agent records are of those bytes (what a
store can corrupt). A tag that does not verify (another key, a change to one byte) refuses the
backup: nothing decrypted is handed on. GCM authenticates up to 64 GiB per IV: larger dumps are
refused before anything is stored.

The key is 32 random bytes, base64 in the Secret (``openssl rand -base64 32``); its id, the
first 16 hex digits of a SHA-256 of it under a label of ours, goes in the backup's metadata, so
a restore with another key says which key the backup needs, and no one learns the key from it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

ALGORITHM = "AES-256-GCM"
MAGIC = b"DBOPAES1"
IV_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32
#: GCM's bound for one key and IV (2^39 - 256 bits of plaintext), with room to spare.
MAX_PLAINTEXT = 64 * 2**30 - 2**20
CHUNK = 1024 * 1024


class EncryptionError(Exception):
    """A key that is not one, or a backup that does not decrypt with it."""


def load_key(text: bytes, where: str) -> bytes:
    """The 32-byte key in ``text`` (base64, as ``openssl rand -base64 32`` writes it); the
    error names ``where`` it came from and never the value."""
    try:
        key = base64.b64decode(b"".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise EncryptionError(
            f"{where} does not hold a key: it must be {KEY_BYTES} random bytes, base64 "
            "(openssl rand -base64 32)"
        )
    return key


def key_id(key: bytes) -> str:
    """What the metadata says of the key: enough to tell two keys apart, nothing of the key."""
    return hashlib.sha256(b"database-operator backup key\0" + key).hexdigest()[:16]


class Encrypting:
    """A readable, non-seekable stream of ``source`` encrypted: what an upload reads once, in
    order. ``sha256`` and ``size`` are of the bytes it gave, once it is read to the end."""

    def __init__(self, source: BinaryIO, key: bytes, plaintext_size: int) -> None:
        if plaintext_size > MAX_PLAINTEXT:
            raise EncryptionError(
                f"the dump is {plaintext_size} bytes: more than one AES-GCM stream may hold"
            )
        iv = os.urandom(IV_BYTES)
        self._source = source
        self._cipher = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
        self._pending = MAGIC + iv
        self._done = False
        self._digest = hashlib.sha256()
        self.size = 0

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, size: int = -1) -> bytes:
        want = CHUNK if size is None or size < 0 else size
        while len(self._pending) < want and not self._done:
            chunk = self._source.read(CHUNK)
            if chunk:
                self._pending += self._cipher.update(chunk)
            else:
                self._pending += self._cipher.finalize() + self._cipher.tag
                self._done = True
        if size is None or size < 0:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:size], self._pending[size:]
        self._digest.update(out)
        self.size += len(out)
        return out


def is_encrypted(path: Path) -> bool:
    with path.open("rb") as stored:
        return stored.read(len(MAGIC)) == MAGIC


def decrypt(stored: Path, into: Path, key: bytes) -> None:
    """Decrypt ``stored`` into ``into``, which exists only if the tag verifies."""
    size = stored.stat().st_size
    header = len(MAGIC) + IV_BYTES
    if size < header + TAG_BYTES:
        raise EncryptionError(f"{stored.name} is too short to be an encrypted backup")
    partial = into.with_name(into.name + ".decrypting")
    with stored.open("rb") as source:
        if source.read(len(MAGIC)) != MAGIC:
            raise EncryptionError(f"{stored.name} is not an encrypted backup")
        iv = source.read(IV_BYTES)
        source.seek(size - TAG_BYTES)
        tag = source.read(TAG_BYTES)
        source.seek(header)
        cipher = Cipher(algorithms.AES(key), modes.GCM(iv, tag)).decryptor()
        left = size - header - TAG_BYTES
        try:
            with partial.open("wb") as out:
                while left:
                    chunk = source.read(min(CHUNK, left))
                    left -= len(chunk)
                    out.write(cipher.update(chunk))
                cipher.finalize()
        except InvalidTag:
            partial.unlink(missing_ok=True)
            raise EncryptionError(
                "it does not decrypt: its authentication tag does not verify with this key "
                "(another key, or a changed byte)"
            ) from None
    partial.replace(into)
