"""Opening encrypted Aiven segments: the read side of the plugin's envelope encryption.

Checked against the plugin's source (see docs/aiven-encryption.md for the paths):

* the manifest's ``encryption`` holds ``dataKey`` = ``{keyPairId}:{base64 of the RSA-wrapped
  AES key}`` (``EncryptedDataKey``; exactly one colon) and ``aad`` = 32 random bytes, base64;
* the data key is wrapped with ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` on BouncyCastle:
  RSAES-OAEP with SHA3-512 for the label hash *and* MGF1, empty label;
* every chunk of the ``.log`` object (after zstd, when compression is on) and every index of the
  ``.indexes`` object is ``IV (12 bytes) || AES-256-GCM ciphertext || tag (16 bytes)``, a fresh
  random IV per chunk, the manifest's ``aad`` as additional authenticated data;
* the chunk index counts *transformed* sizes: each encrypted chunk is 28 bytes longer than
  what was encrypted (``fixed`` without compression: ``originalChunkSize + 28``).

``cryptography`` does the AES-GCM.  It refuses OAEP with SHA3 hashes, so the RSA step is done
here on the key's own numbers: the private operation with CRT and blinding, then EME-OAEP
decoding (RFC 8017 7.1.2) with one error for every way it can fail.  A data key is unwrapped
once per fetcher and kept (by its wrapped form) for the segments that share it.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import os
import secrets
import threading
from collections import OrderedDict

from ..errors import ConfigError, SegmentDecryptionError, SegmentFormatError
from ..options.encryption import OPTION, KeyPairSource, parse_key_pairs

IV_SIZE = 12          # SegmentEncryptionMetadataV1.IV_SIZE
TAG_SIZE = 16         # AesEncryptionProvider.GCM_TAG_LENGTH (128 bits)
OVERHEAD = IV_SIZE + TAG_SIZE
AES_KEY_SIZES = (16, 24, 32)   # the plugin writes 32 (AES-256)
INSTALL_HINT = "pip install kafka-tiered-source[encryption]"
_HASH = hashlib.sha3_512
_HLEN = _HASH().digest_size
_LHASH = _HASH(b"").digest()     # PSource.PSpecified.DEFAULT: the empty label
DATA_KEY_CACHE = 256


def _aesgcm():
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ConfigError(f"reading encrypted Aiven segments needs the cryptography package; install "
                          f"it with: {INSTALL_HINT}", option=OPTION) from None
    return AESGCM


def parse_data_key(text: str, location: str | None = None) -> tuple[str, bytes]:
    """``(keyPairId, wrapped key)`` of a manifest's ``dataKey``, as EncryptedDataKey.parse."""
    key_id, colon, rest = text.partition(":")
    if not colon or ":" in rest or not key_id.strip():
        raise SegmentDecryptionError("manifest encryption.dataKey is not {keyPairId}:{base64}",
                                     kind="malformed", location=location)
    try:
        wrapped = base64.b64decode(rest + "=" * (-len(rest) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SegmentDecryptionError(f"manifest encryption.dataKey of key pair {key_id!r} is not base64",
                                     kind="malformed", key_id=key_id, location=location) from None
    if not wrapped:
        raise SegmentDecryptionError(f"manifest encryption.dataKey of key pair {key_id!r} is empty",
                                     kind="malformed", key_id=key_id, location=location)
    return key_id, wrapped


def _mgf1(seed: bytes, length: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += _HASH(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:length])


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def oaep_sha3_512_encrypt(n: int, e: int, message: bytes) -> bytes:
    """RSAES-OAEP encryption (RFC 8017 7.1.1) with SHA3-512 and MGF1-SHA3-512, empty label:
    what BouncyCastle's ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` does, the inverse of
    :meth:`RsaPrivateKey.decrypt_oaep` (the embedded broker wraps data keys with it)."""
    k = (n.bit_length() + 7) // 8
    if len(message) > k - 2 * _HLEN - 2:
        raise ValueError(f"message of {len(message)} bytes is too long for a {k * 8}-bit key")
    db = _LHASH + b"\0" * (k - len(message) - 2 * _HLEN - 2) + b"\1" + message
    seed = os.urandom(_HLEN)
    masked_db = _xor(db, _mgf1(seed, k - _HLEN - 1))
    masked_seed = _xor(seed, _mgf1(masked_db, _HLEN))
    em = b"\0" + masked_seed + masked_db
    return pow(int.from_bytes(em, "big"), e, n).to_bytes(k, "big")


class RsaPrivateKey:
    """An RSA private key's numbers, for RSAES-OAEP(SHA3-512, MGF1-SHA3-512) decryption."""

    def __init__(self, private_key):
        nums = private_key.private_numbers()
        pub = nums.public_numbers
        self.n, self.e = pub.n, pub.e
        self._p, self._q = nums.p, nums.q
        self._dp, self._dq, self._qinv = nums.dmp1, nums.dmq1, nums.iqmp
        self.size = (self.n.bit_length() + 7) // 8

    def __repr__(self) -> str:
        return f"RsaPrivateKey({self.n.bit_length()} bits)"

    def _private_op(self, c: int) -> int:
        # Blinded (a fresh r per call) so the time taken does not follow the ciphertext; CRT.
        while True:
            r = secrets.randbelow(self.n - 2) + 2
            if math.gcd(r, self.n) == 1:
                break
        cb = c * pow(r, self.e, self.n) % self.n
        m1 = pow(cb % self._p, self._dp, self._p)
        m2 = pow(cb % self._q, self._dq, self._q)
        h = self._qinv * (m1 - m2) % self._p
        return (m2 + h * self._q) * pow(r, -1, self.n) % self.n

    def decrypt_oaep(self, ciphertext: bytes) -> bytes | None:
        """The message, or None when the ciphertext does not decrypt under this key (one
        answer for every failure, checked without early exits on secret-dependent bytes)."""
        k = self.size
        if len(ciphertext) != k or k < 2 * _HLEN + 2:
            return None
        c = int.from_bytes(ciphertext, "big")
        if c >= self.n:
            return None
        em = self._private_op(c).to_bytes(k, "big")
        masked_seed, masked_db = em[1:1 + _HLEN], em[1 + _HLEN:]
        seed = _xor(masked_seed, _mgf1(masked_db, _HLEN))
        db = _xor(masked_db, _mgf1(seed, k - _HLEN - 1))
        good = hmac.compare_digest(db[:_HLEN], _LHASH) & (em[0] == 0)
        # the first 0x01 after the zero padding, found without branching on where it is
        index, looking, bad_pad = 0, 1, 0
        for i in range(_HLEN, len(db)):
            byte = db[i]
            is_one, is_zero = int(byte == 1), int(byte == 0)
            index |= i * (looking & is_one)
            bad_pad |= looking & (1 - is_one) & (1 - is_zero)
            looking &= is_zero
        if not good or looking or bad_pad:
            return None
        return db[index + 1:]


def _load_private_key(source: KeyPairSource) -> RsaPrivateKey:
    where = f"key pair {source.key_id!r} ({source.describe()})"
    if source.kind == "file":
        try:
            with open(source.where, "rb") as fh:
                pem = fh.read()
        except OSError as exc:
            raise SegmentDecryptionError(f"cannot read the private key file of {where}: "
                                         f"{exc.strerror or exc}", kind="key-unreadable",
                                         key_id=source.key_id) from None
    else:
        value = os.environ.get(source.where)
        if not value:
            raise SegmentDecryptionError(
                f"environment variable {source.where} of {where} is not set on this host (on "
                f"executors set it with spark.executorEnv.{source.where})", kind="key-unreadable",
                key_id=source.key_id)
        pem = value.encode()
    try:
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        raise ConfigError(f"reading encrypted Aiven segments needs the cryptography package; install "
                          f"it with: {INSTALL_HINT}", option=OPTION) from None
    try:
        key = load_pem_private_key(pem, password=None)
    except TypeError:   # a password-protected PEM
        raise SegmentDecryptionError(f"the private key of {where} is password-protected; the plugin "
                                     "reads unencrypted PKCS#8 PEM and so does this reader",
                                     kind="key-unreadable", key_id=source.key_id) from None
    except (ValueError, Exception) as exc:   # never echo what the PEM held
        raise SegmentDecryptionError(f"the private key of {where} is not a PEM private key "
                                     f"({type(exc).__name__})", kind="key-unreadable",
                                     key_id=source.key_id) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise SegmentDecryptionError(f"the private key of {where} is not an RSA key",
                                     kind="key-unreadable", key_id=source.key_id)
    return RsaPrivateKey(key)


class ChunkCipher:
    """Opens the chunks and indexes of the segments that share one data key and AAD."""

    __slots__ = ("_aes", "_aad", "key_id")

    def __init__(self, aes, aad: bytes, key_id: str):
        self._aes, self._aad, self.key_id = aes, aad, key_id

    def __repr__(self) -> str:
        return f"ChunkCipher(key_id={self.key_id!r})"

    def open(self, data, what: str, *, location: str | None = None, backend: str | None = None) -> bytes:
        """The plaintext of one encrypted chunk (``IV || ciphertext || tag``); ``what`` names
        it in errors (``chunk 3 at transformed byte position 1234``)."""
        if len(data) < OVERHEAD:
            raise SegmentDecryptionError(
                f"{what}: truncated: {len(data)} bytes, less than the {OVERHEAD} of an IV and a GCM "
                f"tag", kind="truncated", key_id=self.key_id, location=location, backend=backend)
        mv = memoryview(data)
        try:
            return self._aes.decrypt(bytes(mv[:IV_SIZE]), mv[IV_SIZE:], self._aad)
        except Exception as exc:   # cryptography's InvalidTag: altered bytes, or not this key/AAD
            if type(exc).__name__ != "InvalidTag":
                raise
            raise SegmentDecryptionError(
                f"{what}: AES-GCM authentication failed (the chunk was altered, or it was not "
                f"encrypted with this segment's data key and AAD); nothing of it is returned",
                kind="tampered", key_id=self.key_id, location=location, backend=backend) from None


    def open_chunk(self, data, chunk, compression: bool, location: str | None = None,
                   backend: str | None = None) -> bytes:
        """One chunk of the ``.log`` object (a :class:`~.aiven.Chunk`): decrypted, then
        zstd-decompressed when the segment is compressed too; exactly its original size."""
        from .aiven import decompress_chunk
        where = f"chunk {chunk.id} at transformed byte position {chunk.transformed_position}"
        plain = self.open(data, where, location=location, backend=backend)
        if compression:
            return decompress_chunk(plain, chunk, location, size=len(plain))
        if len(plain) != chunk.original_size:
            raise SegmentFormatError(f"{where} decrypts to {len(plain)} bytes, the chunk index says "
                                     f"{chunk.original_size}", location=location, backend=backend)
        return plain


def open_index(cipher: ChunkCipher, data: bytes, index: str, entry, location: str | None,
               backend: str | None) -> bytes:
    """One index of an encrypted segment's ``.indexes`` object (``entry``: its manifest
    :class:`~.aiven.SegmentIndex`).  The plugin writes each index as one encrypted chunk, and
    an empty index as nothing at all."""
    what = f"index {index} at byte position {entry.position} of the .indexes object"
    if len(data) != entry.size:
        raise SegmentDecryptionError(f"{what}: truncated: the object holds {len(data)} of its "
                                     f"{entry.size} bytes", kind="truncated", key_id=cipher.key_id,
                                     location=location, backend=backend)
    return cipher.open(data, what, location=location, backend=backend) if data else b""


def truncated(cipher: ChunkCipher, chunks, end: int, message: str, location, backend) -> SegmentDecryptionError:
    """The error for an object that ends (at ``end``) inside ``chunks``: names the chunk cut."""
    cut = next((ch for ch in chunks if ch.transformed_position + ch.transformed_size > end), chunks[-1])
    return SegmentDecryptionError(f"chunk {cut.id} is truncated: {message}; nothing of it is returned",
                                  kind="truncated", key_id=cipher.key_id, location=location, backend=backend)


class KeyRing:
    """The private keys of ``remote.storage.aiven.encryption.key.pairs``, loaded when first
    needed, and the data keys they opened."""

    def __init__(self, sources: tuple[KeyPairSource, ...] = ()):
        self._sources = {s.key_id: s for s in sources}
        self._keys: dict[str, RsaPrivateKey] = {}
        self._ciphers: OrderedDict[str, ChunkCipher] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config) -> "KeyRing":
        raw = config.option(OPTION)
        if raw in (None, ""):
            return cls()
        return cls(parse_key_pairs(f"option {OPTION}", OPTION, raw))

    def __repr__(self) -> str:
        return f"KeyRing(key_ids={list(self._sources)!r})"

    def _private_key(self, key_id: str, location) -> RsaPrivateKey:
        with self._lock:
            key = self._keys.get(key_id)
        if key is not None:
            return key
        source = self._sources.get(key_id)
        if source is None:
            if not self._sources:
                raise SegmentDecryptionError(
                    f"segment is encrypted with key pair {key_id!r}; give its private key with "
                    f"{OPTION}={key_id}=file:PATH (or env:NAME)", kind="no-keys", key_id=key_id,
                    location=location)
            raise SegmentDecryptionError(
                f"segment is encrypted with key pair {key_id!r}, which {OPTION} does not name "
                f"(it names {', '.join(repr(k) for k in self._sources)}); add {key_id}=file:PATH "
                f"(or env:NAME) for it", kind="unknown-key-pair", key_id=key_id, location=location)
        try:
            key = _load_private_key(source)
        except SegmentDecryptionError as exc:
            exc.location = location
            raise
        with self._lock:
            self._keys[key_id] = key
        return key

    def cipher(self, encryption, location: str | None = None) -> ChunkCipher:
        """The :class:`ChunkCipher` of a manifest's ``encryption``
        (:class:`~.aiven.EncryptionMetadata`)."""
        text = encryption.data_key
        with self._lock:
            found = self._ciphers.get(text)
            if found is not None and found._aad == encryption.aad:
                self._ciphers.move_to_end(text)
                return found
        aes_cls = _aesgcm()
        key_id, wrapped = parse_data_key(text, location)
        key = self._private_key(key_id, location)
        data_key = key.decrypt_oaep(wrapped)
        if data_key is None:
            raise SegmentDecryptionError(
                f"the private key given for key pair {key_id!r} ({self._sources[key_id].describe()}) "
                f"does not open this segment's data key: it is not that key pair's private key",
                kind="wrong-key", key_id=key_id, location=location)
        if len(data_key) not in AES_KEY_SIZES:
            raise SegmentDecryptionError(
                f"the data key of key pair {key_id!r} is {len(data_key)} bytes, not an AES key",
                kind="malformed", key_id=key_id, location=location)
        cipher = ChunkCipher(aes_cls(data_key), bytes(encryption.aad), key_id)
        with self._lock:
            self._ciphers[text] = cipher
            while len(self._ciphers) > DATA_KEY_CACHE:
                self._ciphers.popitem(last=False)
        return cipher
