"""TLS contexts from Kafka's ``ssl.*`` options, for the client (and the embedded broker's listener),
and what a failed handshake means in those options' words.

:func:`client_tls` is the one way to a client's TLS: from parsed settings
(:class:`~kafka_tiered_source.options.tls.TlsSettings`) to the context and the host-name rule
of ``ssl.endpoint.identification.algorithm`` (HTTPS by OpenSSL, LDAP by Java's rule in
:mod:`.hostnames`, empty: none, with one warning).  Brokers, the OAuth token endpoint and any
other HTTPS client of the library use it.

Stores are read by :mod:`.keystores` into memory.  Python's ``ssl`` loads a key and its chain only
from a file, so the key is handed over through an anonymous in-memory file (``memfd`` on Linux;
elsewhere a private temporary file removed at once): nothing a store holds is written to disk.
A client's context is built once per process and configuration (as Kafka builds one
SslEngineFactory per client) and rebuilt when a store file changes, so every task of an executor
shares it.  Errors name the option; none contains a password or key material."""
from __future__ import annotations

import http.client
import logging
import os
import ssl
import tempfile
import threading
from contextlib import contextmanager

from ..errors import ConfigError
from ..options.client import ClientConfig
from ..options.tls import ENDPOINT_IDENTIFICATION, TlsSettings
from .hostnames import check_ldap
from .keystores import KeyEntry, StoreOptions, read_keystore, read_truststore

log = logging.getLogger(__name__)

CLIENT_TRUST_NAMES = {"type": "ssl.truststore.type", "location": "ssl.truststore.location",
                      "password": "ssl.truststore.password", "certificates": "ssl.truststore.certificates"}
CLIENT_KEY_NAMES = {"type": "ssl.keystore.type", "location": "ssl.keystore.location",
                    "password": "ssl.keystore.password", "key.password": "ssl.key.password",
                    "certificates": "ssl.keystore.certificate.chain", "key": "ssl.keystore.key"}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_cache: dict = {}
_cache_lock = threading.Lock()
_warned: set = set()            # settings whose "no host-name check" warning was given


def _get(secret):
    return None if secret is None else secret.get()


def client_stores(settings: TlsSettings | ClientConfig) -> tuple[StoreOptions, StoreOptions]:
    """The truststore's and the keystore's options, named as ``settings`` names them."""
    if isinstance(settings, ClientConfig):
        settings = settings.tls
    trust = StoreOptions(type=settings.truststore_type, location=settings.truststore_location,
                         password=_get(settings.truststore_password),
                         inline_certificates=settings.truststore_certificates,
                         names={role: settings.name(key) for role, key in CLIENT_TRUST_NAMES.items()})
    key = StoreOptions(type=settings.keystore_type, location=settings.keystore_location,
                       password=_get(settings.keystore_password), key_password=_get(settings.key_password),
                       inline_certificates=settings.keystore_certificate_chain,
                       inline_key=_get(settings.keystore_key),
                       names={role: settings.name(key) for role, key in CLIENT_KEY_NAMES.items()})
    return trust, key


def _stat(path: str | None):
    if not path:
        return None
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return "missing"


class ClientTls:
    """A TLS client's context and host-name rule, from one :class:`TlsSettings`: what every
    TLS connection the library opens goes through (brokers, the OAuth token endpoint, any
    HTTPS client built on this module).

    ``https`` is OpenSSL's check during the handshake; ``ldap``/``ldaps`` are Java's LDAP rule
    (:mod:`.hostnames`), checked after OpenSSL has verified the chain; ``""`` checks no name
    (the chain is still verified).  Use :meth:`wrap` for a socket and :meth:`https_connection`
    for ``http.client``; ``context`` alone does not apply the LDAP rule."""

    def __init__(self, context: ssl.SSLContext, settings: TlsSettings):
        self.context = context
        self.settings = settings

    def __repr__(self) -> str:
        return f"ClientTls({self.settings.peer}, {ENDPOINT_IDENTIFICATION}={self.identification!r})"

    @property
    def identification(self) -> str:
        return self.settings.endpoint_identification

    def wrap(self, sock, host: str) -> ssl.SSLSocket:
        """``sock`` after the TLS handshake with ``host`` and the host-name rule.  Raises
        :class:`ssl.SSLError` (a name that does not match: :class:`ssl.SSLCertVerificationError`,
        ``verify_code`` 62); the TLS socket is closed then."""
        tls_sock = self.context.wrap_socket(sock, server_hostname=host)
        try:
            self.check(tls_sock, host)
        except BaseException:
            tls_sock.close()
            raise
        return tls_sock

    def check(self, tls_sock: ssl.SSLSocket, host: str) -> None:
        """The host-name rule on a socket whose handshake is done (OpenSSL applied ``https``)."""
        if self.identification in ("ldap", "ldaps"):
            check_ldap(host, tls_sock.getpeercert() or {}, public_ca=self.settings.system_trust)

    def https_connection(self, host: str, port: int | None = None, *,
                         timeout: float | None = None) -> http.client.HTTPSConnection:
        """An ``http.client`` connection to ``host`` that applies this TLS and host-name rule."""
        return _CheckedHTTPSConnection(self, host, port, timeout=timeout)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, tls: ClientTls, host: str, port: int | None, *, timeout: float | None):
        super().__init__(host, port, timeout=timeout, context=tls.context)
        self._client_tls = tls

    def connect(self) -> None:
        super().connect()
        try:
            self._client_tls.check(self.sock, getattr(self, "_tunnel_host", None) or self.host)
        except BaseException:
            self.close()
            raise


def client_tls(settings: TlsSettings) -> ClientTls:
    """THE way to a TLS client: the SSLContext and host-name rule of ``settings`` (Kafka's
    ``ssl.*`` as parsed into :class:`~kafka_tiered_source.options.tls.TlsSettings`).  Built once
    per process and settings (as Kafka builds one SslEngineFactory per client) and again when a
    store file changes; a wrong password or a missing file is a :class:`ConfigError` naming the
    option.  An empty ``ssl.endpoint.identification.algorithm`` is warned about once."""
    files = (settings.cafile, settings.certfile, settings.keyfile, settings.truststore_location,
             settings.keystore_location)
    key = (settings, tuple(_stat(f) for f in files))
    with _cache_lock:
        tls = _cache.get(key)
        if tls is None:
            tls = ClientTls(_build_client_context(settings), settings)
            if len(_cache) > 32:
                _cache.clear()
            _cache[key] = tls
        if settings.endpoint_identification == "" and settings not in _warned:
            _warned.add(settings)
            log.warning("%s is empty: the host name of %s is not checked against its certificate, so any "
                        "certificate a trusted CA signed, for any host, is accepted", settings.name(ENDPOINT_IDENTIFICATION),
                        settings.peer)
        return tls


def client_context(cfg: ClientConfig) -> ssl.SSLContext:
    """The SSLContext of connections to the brokers of ``cfg`` (:func:`client_tls`'s; with
    ``ssl.endpoint.identification.algorithm=LDAP`` it checks no name itself: use
    :meth:`ClientTls.wrap`)."""
    return client_tls(cfg.tls).context


def _build_client_context(settings: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # OpenSSL checks https itself during the handshake; the LDAP rule is checked after it
    ctx.check_hostname = settings.endpoint_identification == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    set_protocols(ctx, settings.enabled_protocols, settings.name("ssl.enabled.protocols"))
    trust_opts, key_opts = client_stores(settings)
    if settings.cafile:
        try:
            ctx.load_verify_locations(cafile=settings.cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ssl.cafile {settings.cafile!r} cannot be used: {_reason(exc)}",
                              option="ssl.cafile") from None
    else:
        trusted = read_truststore(trust_opts)
        if trusted is None:
            ctx.load_default_certs()       # as the JVM's default truststore serves Kafka's client
        else:
            trust(ctx, trusted, trust_opts)
    if settings.certfile:
        asked = _Asked(_get(settings.key_password))
        try:
            ctx.load_cert_chain(settings.certfile, settings.keyfile, password=asked)
        except (OSError, ssl.SSLError) as exc:
            password_opt = settings.name("ssl.key.password")
            raise ConfigError(_chain_error(exc, asked, "ssl.certfile", settings.keyfile or "ssl.certfile",
                                           password_opt),
                              option=_chain_option(exc, asked, "ssl.certfile", password_opt)) from None
    else:
        entry = read_keystore(key_opts)
        if entry is not None:
            present(ctx, entry, key_opts)
    return ctx


def server_context(keystore: StoreOptions, truststore: StoreOptions | None, client_auth: str = "none",
                   protocols: tuple = ()) -> ssl.SSLContext:
    """A listener's context, as Kafka's SslFactory builds a broker's: the keystore's key, and
    ``client_auth`` (``ssl.client.auth``: none, requested, required) checking client
    certificates against the truststore."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    set_protocols(ctx, protocols, "ssl.enabled.protocols")
    entry = read_keystore(keystore)
    if entry is None:
        raise ConfigError(f"a TLS listener needs {keystore.name('location')} (or {keystore.name('key')})",
                          option=keystore.name("location"))
    present(ctx, entry, keystore)
    if client_auth not in ("none", "requested", "required"):
        raise ConfigError(f"ssl.client.auth must be none, requested or required, got {client_auth!r}",
                          option="ssl.client.auth")
    if client_auth != "none":
        trusted = read_truststore(truststore) if truststore is not None else None
        if trusted is None or truststore is None:
            raise ConfigError("ssl.client.auth needs a truststore (ssl.truststore.*) to check client "
                              "certificates against", option="ssl.client.auth")
        trust(ctx, trusted, truststore)
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def set_protocols(ctx: ssl.SSLContext, protocols: tuple, option: str) -> None:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if protocols:
        versions = sorted(_VERSIONS[p] for p in protocols)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def trust(ctx: ssl.SSLContext, certs, opts: StoreOptions) -> None:
    try:
        ctx.load_verify_locations(cadata="".join(c.pem for c in certs))
    except ssl.SSLError as exc:
        option = opts.name("certificates") if opts.inline_certificates is not None else opts.name("location")
        raise ConfigError(f"{option}: the certificates cannot be used: {_reason(exc)}", option=option) from None


def present(ctx: ssl.SSLContext, entry: KeyEntry, opts: StoreOptions) -> None:
    """Load ``entry``'s key and chain into ``ctx`` without writing them to disk."""
    text = entry.key_pem + "".join(c.pem for c in entry.chain)
    key_opt = opts.name("key") if opts.inline_key is not None else entry.source
    asked = _Asked(entry.key_password)
    try:
        with _memory_file(text.encode("ascii")) as path:
            ctx.load_cert_chain(path, password=asked)
    except (OSError, ssl.SSLError) as exc:
        where = f"{key_opt} {opts.location!r}" if opts.inline_key is None and opts.location else key_opt
        raise ConfigError(_chain_error(exc, asked, entry.source, where, opts.name("key.password")),
                          option=_chain_option(exc, asked, entry.source, opts.name("key.password"))) from None


class _Asked:
    """The key password for OpenSSL, noting whether it was asked for: an encrypted key that
    still fails to load after that was given the wrong password (OpenSSL only says "PEM lib")."""

    def __init__(self, password: str | None):
        self.password, self.asked = password, False

    def __call__(self) -> str:
        self.asked = True
        return self.password or ""


@contextmanager
def _memory_file(data: bytes):
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kafka-tiered-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    d = tempfile.mkdtemp(prefix="kafka-tiered-tls-")      # 0700
    path = os.path.join(d, "chain.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        try:
            os.unlink(path)
        finally:
            os.rmdir(d)


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)


def _wrong_password(exc: BaseException, asked: _Asked) -> bool:
    upper = _reason(exc).upper()
    return "DECRYPT" in upper or (asked.asked and not _mismatch(upper))


def _mismatch(upper: str) -> bool:
    # a key of the certificate's type that differs, or a key of another type (no certificate in its slot)
    return "KEY_VALUES_MISMATCH" in upper or "NO_CERTIFICATE_ASSIGNED" in upper


def _chain_option(exc: BaseException, asked: _Asked, chain_opt: str, password_opt: str) -> str:
    return password_opt if _wrong_password(exc, asked) else chain_opt


def _chain_error(exc: BaseException, asked: _Asked, chain_opt: str, key_opt: str, password_opt: str) -> str:
    reason = _reason(exc)
    if _wrong_password(exc, asked):
        return (f"{password_opt} is wrong for the key in {key_opt}" if asked.password
                else f"the key in {key_opt} is encrypted: set {password_opt}")
    if _mismatch(reason.upper()):
        return f"the private key of {key_opt} does not belong to the first certificate of {chain_opt}"
    return f"{chain_opt}: the key or certificate chain cannot be used: {reason}"


# --- handshake failures ---------------------------------------------------------------------

def describe_failure(exc: ssl.SSLError, cfg: ClientConfig, host: str) -> str:
    """What a TLS failure with a broker means, in the options' words."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        if code == 10:
            return (f"the broker's certificate has expired ({exc.verify_message}); the broker must "
                    f"renew it")
        if code == 9:
            return f"the broker's certificate is not valid yet ({exc.verify_message})"
        if code in (62, 64):
            return (f"the broker's certificate does not name the host {host!r} ({exc.verify_message}); fix the "
                    f"advertised listener, or turn the check off with ssl.endpoint.identification.algorithm= "
                    f"(empty)")
        if code in (2, 18, 19, 20, 21):
            return ("the broker's certificate is not signed by a CA the client trusts: give that CA with "
                    "ssl.truststore.location or ssl.truststore.certificates (or ssl.cafile) "
                    f"({exc.verify_message})")
        return f"the broker's certificate was refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLEOFError):
        return ("the broker closed the connection during the TLS handshake: is this a TLS listener "
                "(security.protocol SSL or SASL_SSL), and does it accept these TLS versions?")
    reason = _reason(exc)
    upper = reason.upper()
    has_key = bool(cfg.ssl_keystore_location or cfg.ssl_keystore_key or cfg.ssl_certfile)
    if "CERTIFICATE_REQUIRED" in upper or ("HANDSHAKE_FAILURE" in upper and not has_key):
        return ("the broker requires a client certificate (ssl.client.auth=required): give one with "
                "ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)")
    if any(a in upper for a in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN",
                                "CERTIFICATE_EXPIRED", "UNSUPPORTED_CERTIFICATE")):
        return (f"the broker refused the client certificate ({reason}): it must be signed by a CA in the "
                f"broker's truststore (ssl.keystore.* names the client certificate)")
    if "PROTOCOL_VERSION" in upper or "UNSUPPORTED_PROTOCOL" in upper or "NO_PROTOCOLS" in upper:
        return f"no TLS version in common with the broker ({reason}); see ssl.enabled.protocols"
    if "WRONG_VERSION_NUMBER" in upper or "RECORD_LAYER" in upper:
        return (f"the broker did not answer in TLS ({reason}): is the listener PLAINTEXT or SASL_PLAINTEXT? "
                f"(security.protocol)")
    return f"TLS failed: {reason}"
