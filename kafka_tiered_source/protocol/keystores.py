"""Truststores and keystores as Kafka's ``ssl.*`` options give them: JKS, PKCS12 and PEM (a file,
or inline text as KIP-651 adds), read into certificates and one private key held in memory.

The rules are Kafka's ``DefaultSslEngineFactory``'s (createKeystore / createTruststore): a
keystore file needs its password, a PEM store takes no store password (only ``ssl.key.password``),
an inline key needs its chain and excludes a location, a truststore password alone is refused.
Like Java's keystore compatibility mode, JKS and PKCS12 files are told apart by their content
whatever the declared type; with no type given a PEM file is read as PEM too.

JKS is read here (a documented format: entries, then a SHA-1 over the store password, the
words "Mighty Aphrodite" and the data; keys protected by Sun's SHA-1 key stream).  PKCS12 goes
through ``cryptography`` (the ``tls`` extra).  JCEKS and other JVM-only types are refused by
name with the ``keytool`` command that converts them.  Every error names the option that was
wrong; none contains a password or key material."""
from __future__ import annotations

import hashlib
import hmac
import logging
import struct
from collections.abc import Sequence

from ..dataclass import dataclass, field
from ..errors import ConfigError
from .certificates import (CertificateInfo, DerError, certificate_info, encrypted_pkcs8,
                           is_private_key_info, pem_blocks, to_pem)

log = logging.getLogger(__name__)

JKS_MAGIC = 0xFEEDFEED
JCEKS_MAGIC = 0xCECECECE
SUN_KEY_PROTECTOR = "1.3.6.1.4.1.42.2.17.1.1"      # sun.security.provider.KeyProtector
_KEY_LABELS = ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")
TYPES = ("JKS", "PKCS12", "PEM")
CONVERT = ("convert it with: keytool -importkeystore -srckeystore FILE -srcstoretype {t} "
           "-destkeystore FILE.p12 -deststoretype PKCS12, then give the .p12 file")


@dataclass(frozen=True)
class StoreOptions:
    """One truststore's or keystore's settings, as the option names say them.  ``names`` maps
    the role (type, location, password, key.password, certificates, key, chain) to the option
    name errors should show (``ssl.keystore.location``, or the broker's own spelling)."""

    type: str | None = None
    location: str | None = None
    password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    inline_certificates: str | None = None     # ssl.truststore.certificates / keystore chain
    inline_key: str | None = field(default=None, repr=False)
    names: dict = field(default_factory=dict)

    def name(self, role: str) -> str:
        return self.names[role]


@dataclass(frozen=True, repr=False)
class KeyEntry:
    """A private key (PEM; encrypted PEM keys keep their password for OpenSSL to apply) and the
    certificate chain that goes with it, leaf first."""

    alias: str
    key_pem: str
    key_password: str | None
    chain: tuple[CertificateInfo, ...]
    source: str                      # the option the key came from, for errors

    def __repr__(self) -> str:
        return f"KeyEntry({self.alias!r}, {self.chain[0].subject if self.chain else '-'})"


# --- reading --------------------------------------------------------------------------------

def _read_file(path: str, option: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{option}: cannot read {path!r}: {exc.strerror or exc} (files named by "
                          f"path must exist on every machine that connects, executors included)",
                          option=option) from None


def _kind(data: bytes) -> str:
    if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == JKS_MAGIC:
        return "JKS"
    if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == JCEKS_MAGIC:
        return "JCEKS"
    if data[:1] == b"\x30":
        return "PKCS12"
    if b"-----BEGIN " in data[:65536]:
        return "PEM"
    return "unknown"


def _declared(opts: StoreOptions) -> str | None:
    if opts.type is None or not opts.type.strip():
        return None
    t = opts.type.strip().upper()
    if t not in TYPES:
        hint = CONVERT.format(t=t) if t in ("JCEKS", "BCFKS", "DKS") else "use JKS, PKCS12 or PEM"
        raise ConfigError(f"{opts.name('type')}={opts.type!r} is not a store type kafka-tiered reads; {hint}",
                          option=opts.name("type"))
    return t


def _format_of(data: bytes, opts: StoreOptions, declared: str | None) -> str:
    kind = _kind(data)
    loc = opts.name("location")
    if kind == "JCEKS":
        raise ConfigError(f"{loc}: {opts.location!r} is a JCEKS store, which kafka-tiered does not read; "
                          + CONVERT.format(t="JCEKS"), option=loc)
    if kind == "unknown":
        raise ConfigError(f"{loc}: {opts.location!r} is neither a JKS or PKCS12 store nor PEM text",
                          option=loc)
    if declared == "PEM" and kind != "PEM":
        raise ConfigError(f"{opts.name('type')} is PEM but {opts.location!r} is a {kind} store "
                          f"(set {opts.name('type')}={kind})", option=opts.name("type"))
    if declared in ("JKS", "PKCS12") and kind == "PEM":
        raise ConfigError(f"{opts.name('type')} is {declared} but {opts.location!r} holds PEM text "
                          f"(set {opts.name('type')}=PEM)", option=opts.name("type"))
    return kind


def _certs(ders, option: str) -> list[CertificateInfo]:
    out = []
    for der in ders:
        try:
            out.append(certificate_info(der))
        except DerError as exc:
            raise ConfigError(f"{option}: a certificate cannot be read: {exc}", option=option) from None
    return out


def _pem_certs(text: str, option: str) -> list[CertificateInfo]:
    try:
        blocks = pem_blocks(text)
    except DerError as exc:
        raise ConfigError(f"{option}: {exc}", option=option) from None
    certs = _certs([der for label, der in blocks if label in ("CERTIFICATE", "TRUSTED CERTIFICATE")], option)
    if not certs:
        raise ConfigError(f"{option}: no PEM CERTIFICATE block found (at least one is needed)", option=option)
    return certs


# --- JKS ------------------------------------------------------------------------------------

class _Cursor:
    def __init__(self, data: bytes, option: str):
        self.data, self.pos, self.option = data, 0, option

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data) - 20:
            raise ConfigError(f"{self.option}: the JKS store is truncated at byte {self.pos}", option=self.option)
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def utf(self) -> str:
        return self.take(self.u16()).decode("utf-8", "replace")

    def cert(self, version: int) -> bytes:
        kind = self.utf() if version == 2 else "X.509"
        if kind != "X.509":
            raise ConfigError(f"{self.option}: the JKS store holds a {kind} certificate; only X.509 is read",
                              option=self.option)
        return self.take(self.i32())


def _java_password(password: str) -> bytes:
    return password.encode("utf-16-be")     # Java chars, big-endian, as the JKS digests take them


def _jks_entries(data: bytes, opts: StoreOptions) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes, list[bytes]]]]:
    """``(trusted [(alias, der)], keys [(alias, protected key, chain ders)])``; checks the
    store's integrity digest when a password is given (as Java does; without one it cannot)."""
    loc = opts.name("location")
    if opts.password is not None:
        digest = hashlib.sha1(_java_password(opts.password) + b"Mighty Aphrodite" + data[:-20]).digest()
        if not hmac.compare_digest(digest, data[-20:]):
            raise ConfigError(f"{opts.name('password')} is wrong for {loc} {opts.location!r} (the JKS "
                              f"integrity check failed)", option=opts.name("password"))
    cur = _Cursor(data, loc)
    cur.take(4)
    version = cur.i32()
    if version not in (1, 2):
        raise ConfigError(f"{loc}: JKS version {version} is not known", option=loc)
    trusted, keys = [], []
    for _ in range(cur.i32()):
        tag = cur.i32()
        alias = cur.utf()
        cur.take(8)                                     # creation date
        if tag == 1:
            protected = cur.take(cur.i32())
            chain = [cur.cert(version) for _ in range(cur.i32())]
            keys.append((alias, protected, chain))
        elif tag == 2:
            trusted.append((alias, cur.cert(version)))
        else:
            raise ConfigError(f"{loc}: entry {alias!r} of the JKS store has type {tag} (a secret key?); "
                              f"only private keys and trusted certificates are read", option=loc)
    return trusted, keys


def _jks_key(protected: bytes, password: str, alias: str, opts: StoreOptions, shown: str, option: str) -> bytes:
    """Undo Sun's KeyProtector: salt(20) | data XOR SHA-1 stream | SHA-1(password | plain)."""
    try:
        oid, blob = encrypted_pkcs8(protected)
    except DerError as exc:
        raise ConfigError(f"{opts.name('location')}: the key {alias!r} cannot be read: {exc}",
                          option=opts.name("location")) from None
    if oid != SUN_KEY_PROTECTOR or len(blob) < 40:
        raise ConfigError(f"{opts.name('location')}: the key {alias!r} is protected with {oid}, not the "
                          f"JKS key protector", option=opts.name("location"))
    pw = _java_password(password)
    salt, enc, check = blob[:20], blob[20:-20], blob[-20:]
    stream = bytearray()
    digest = salt
    while len(stream) < len(enc):
        digest = hashlib.sha1(pw + digest).digest()
        stream += digest
    plain = bytes(a ^ b for a, b in zip(enc, stream[:len(enc)], strict=True))
    if not hmac.compare_digest(hashlib.sha1(pw + plain).digest(), check) or not is_private_key_info(plain):
        raise ConfigError(f"{shown} is wrong for the key {alias!r} in {opts.name('location')} "
                          f"{opts.location!r}", option=option)
    return plain


# --- PKCS12 ---------------------------------------------------------------------------------

def _pkcs12(data: bytes, opts: StoreOptions, passwords: Sequence[tuple[str | None, str]]):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(f"{opts.name('location')}: reading the PKCS12 store {opts.location!r} needs the "
                          f"'cryptography' package: pip install 'kafka-tiered-source[tls]' (or give PEM, "
                          f"which needs nothing)", option=opts.name("location")) from None
    last = passwords[-1][1]
    for password, _ in passwords:
        try:
            return pkcs12.load_pkcs12(data, None if password is None else password.encode("utf-8"))
        except ValueError:
            continue
    if all(p is None for p, _ in passwords):
        raise ConfigError(f"{opts.location!r} ({opts.name('location')}) cannot be read without a password: "
                          f"set {last}", option=last)
    raise ConfigError(f"{last} is wrong for {opts.name('location')} {opts.location!r} (or the file is not "
                      f"a PKCS12 store)", option=last)


def _p12_key_pem(key) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode("ascii")


def _p12_der(cert) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding
    return cert.certificate.public_bytes(Encoding.DER)


def _chain(leaf: CertificateInfo, pool: list[CertificateInfo]) -> tuple[CertificateInfo, ...]:
    """The leaf and the issuers found in ``pool``, in order (a PKCS12 file lists its certificates
    unordered; the key's own chain is what its localKeyId ties, which cryptography resolves for
    the leaf only)."""
    chain = [leaf]
    while chain[-1].issuer != chain[-1].subject:
        nxt = next((c for c in pool if c.subject == chain[-1].issuer and c not in chain), None)
        if nxt is None:
            break
        chain.append(nxt)
    return tuple(chain)


# --- the two stores -------------------------------------------------------------------------

def read_truststore(opts: StoreOptions) -> tuple[CertificateInfo, ...] | None:
    """The certificates to trust (None: no truststore option given, use the defaults).  As
    Java's TrustManagerFactory does, a key entry's own certificate counts as trusted too.
    Expired certificates are left out with a warning; a store left with none is refused."""
    declared = _declared(opts)
    cert_opt = opts.name("certificates")
    if opts.inline_certificates is not None:
        if declared != "PEM":
            raise ConfigError(f"{cert_opt} takes PEM text, so {opts.name('type')} must be PEM "
                              f"(it is {opts.type or 'unset, i.e. JKS'})", option=opts.name("type"))
        if opts.location is not None:
            raise ConfigError(f"give {opts.name('location')} or {cert_opt}, not both", option=cert_opt)
        if opts.password is not None:
            raise ConfigError(f"{opts.name('password')} cannot be given for a PEM truststore",
                              option=opts.name("password"))
        return _usable(_pem_certs(opts.inline_certificates, cert_opt), cert_opt)
    if opts.location is None:
        if opts.password is not None:
            raise ConfigError(f"{opts.name('password')} is given but {opts.name('location')} is not",
                              option=opts.name("password"))
        return None
    loc = opts.name("location")
    data = _read_file(opts.location, loc)
    kind = _format_of(data, opts, declared)
    if kind == "PEM":
        if opts.password is not None:
            raise ConfigError(f"{opts.name('password')} cannot be given for a PEM truststore",
                              option=opts.name("password"))
        return _usable(_pem_certs(data.decode("utf-8", "replace"), loc), loc)
    if kind == "JKS":
        trusted, keys = _jks_entries(data, opts)
        ders = [d for _, d in trusted] + [chain[0] for _, _, chain in keys if chain]
    else:
        p12 = _pkcs12(data, opts, [(opts.password, opts.name("password"))])
        ders = ([_p12_der(p12.cert)] if p12.cert is not None else []) + [_p12_der(c) for c in p12.additional_certs]
    if not ders:
        raise ConfigError(f"{loc}: {opts.location!r} holds no certificate to trust", option=loc)
    return _usable(_certs(ders, loc), loc)


def _usable(certs: list[CertificateInfo], option: str) -> tuple[CertificateInfo, ...]:
    live = [c for c in certs if not c.expired() and not c.not_yet_valid()]
    for c in certs:
        if c not in live:
            log.warning("%s: the certificate %s is not valid now (valid %s to %s); it is not trusted",
                        option, c.subject, c.not_before.isoformat(), c.not_after.isoformat())
    if not live:
        c = certs[0]
        raise ConfigError(f"{option}: every certificate is expired or not yet valid ({c.subject} is valid "
                          f"{c.not_before:%Y-%m-%d} to {c.not_after:%Y-%m-%d}); nothing is left to trust",
                          option=option)
    return tuple(live)


def read_keystore(opts: StoreOptions) -> KeyEntry | None:
    """The private key and chain to present (None: no keystore option given).  Kafka's rules
    for which options go together apply; the key's certificate must be valid now."""
    declared = _declared(opts)
    key_opt, chain_opt, pw_opt, kpw_opt = (opts.name("key"), opts.name("certificates"),
                                           opts.name("password"), opts.name("key.password"))
    loc = opts.name("location")
    if opts.inline_key is not None:
        if declared != "PEM":
            raise ConfigError(f"{key_opt} takes a PEM key, so {opts.name('type')} must be PEM (it is "
                              f"{opts.type or 'unset, i.e. JKS'})", option=opts.name("type"))
        if opts.inline_certificates is None:
            raise ConfigError(f"{key_opt} is given but {chain_opt} is not", option=chain_opt)
        if opts.location is not None:
            raise ConfigError(f"give {loc} or {key_opt}, not both", option=key_opt)
        if opts.password is not None:
            raise ConfigError(f"{pw_opt} cannot be given with a PEM key; only {kpw_opt}", option=pw_opt)
        return _pem_entry(opts.inline_key, opts.inline_certificates, opts, key_opt, chain_opt)
    if opts.inline_certificates is not None:
        raise ConfigError(f"{chain_opt} is given but {key_opt} is not", option=key_opt)
    if opts.location is None:
        if opts.password is not None:
            raise ConfigError(f"{pw_opt} is given but {loc} is not", option=pw_opt)
        return None
    data = _read_file(opts.location, loc)
    kind = _format_of(data, opts, declared)
    if kind == "PEM":
        if opts.password is not None:
            raise ConfigError(f"{pw_opt} cannot be given for a PEM keystore; only {kpw_opt}", option=pw_opt)
        text = data.decode("utf-8", "replace")
        return _pem_entry(text, text, opts, loc, loc)
    if opts.password is None:
        raise ConfigError(f"{loc} is given but {pw_opt} is not (a keystore file needs its password)",
                          option=pw_opt)
    if kind == "JKS":
        _, keys = _jks_entries(data, opts)
        if not keys:
            raise ConfigError(f"{loc}: {opts.location!r} holds no private key entry (only trusted "
                              f"certificates: is it a truststore?)", option=loc)
        if len(keys) > 1:
            raise ConfigError(f"{loc}: {opts.location!r} holds {len(keys)} private keys (aliases "
                              f"{', '.join(a for a, _, _ in keys)}); keep only the one to present",
                              option=loc)
        alias, protected, chain_ders = keys[0]
        if opts.key_password is not None:
            plain = _jks_key(protected, opts.key_password, alias, opts, kpw_opt, kpw_opt)
        else:   # Java's KeyManagerFactory is given the store password then
            plain = _jks_key(protected, opts.password, alias, opts,
                             f"{pw_opt} (the key password, as {kpw_opt} is not set)", pw_opt)
        entry = KeyEntry(alias, to_pem("PRIVATE KEY", plain), None, tuple(_certs(chain_ders, loc)), loc)
    else:
        tries = [(opts.password, pw_opt)]
        if opts.key_password is not None and opts.key_password != opts.password:
            tries.append((opts.key_password, kpw_opt))
        p12 = _pkcs12(data, opts, tries)
        if p12.key is None or p12.cert is None:
            raise ConfigError(f"{loc}: {opts.location!r} holds no private key entry (only trusted "
                              f"certificates: is it a truststore?)", option=loc)
        pool = _certs([_p12_der(c) for c in p12.additional_certs], loc)
        leaf = _certs([_p12_der(p12.cert)], loc)[0]
        alias = (p12.cert.friendly_name or b"").decode("utf-8", "replace") or "1"
        entry = KeyEntry(alias, _p12_key_pem(p12.key), None, _chain(leaf, pool), loc)
    return _valid(entry)


def _pem_entry(key_text: str, chain_text: str, opts: StoreOptions, key_opt: str, chain_opt: str) -> KeyEntry:
    try:
        blocks = [(label, der) for label, der in pem_blocks(key_text) if label in _KEY_LABELS]
    except DerError as exc:
        raise ConfigError(f"{key_opt}: {exc}", option=key_opt) from None
    if len(blocks) != 1:
        raise ConfigError(f"{key_opt}: expected one PEM private key, found {len(blocks)}", option=key_opt)
    label, der = blocks[0]
    encrypted = label == "ENCRYPTED PRIVATE KEY"
    if encrypted and opts.key_password is None:
        raise ConfigError(f"{key_opt} holds an encrypted key: set {opts.name('key.password')}",
                          option=opts.name("key.password"))
    entry = KeyEntry("kafka", to_pem(label, der), opts.key_password if encrypted else None,
                     tuple(_pem_certs(chain_text, chain_opt)), chain_opt)
    return _valid(entry)


def _valid(entry: KeyEntry) -> KeyEntry:
    leaf = entry.chain[0]
    if leaf.expired() or leaf.not_yet_valid():
        state = "expired on" if leaf.expired() else "is not valid before"
        when = leaf.not_after if leaf.expired() else leaf.not_before
        raise ConfigError(f"{entry.source}: the certificate of {entry.alias!r} ({leaf.subject}) {state} "
                          f"{when:%Y-%m-%d %H:%M:%S} UTC; brokers refuse it", option=entry.source)
    return entry
