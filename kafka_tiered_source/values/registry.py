"""A schema registry client: Confluent's REST API, the subset a reader needs.

One client per process and configuration (:func:`registry_client`), on the driver and on every
executor alike, and it fetches each schema id once (``GET /schemas/ids/{id}``), then keeps it:
threads that want the same id while it is being fetched wait for that one request.  Protobuf
schemas are asked for as ``format=serialized`` (base64 of a FileDescriptorProto), as
confluent-kafka's ProtobufDeserializer asks, and their references are fetched the same way.

Requests are retried as confluent-kafka's client retries them: on a failed connection and on
408, 429, 500, 502, 503 and 504, ``schema.registry.max.retries`` times, after waits of
``schema.registry.retries.wait.ms`` doubling up to ``schema.registry.retries.max.wait.ms``, with
full jitter; several URLs are tried in turn.  A registry still unreachable then raises
:class:`SchemaRegistryUnavailableError`; a 404 :class:`SchemaNotFoundError`; any other refusal
:class:`SchemaRegistryError` with the registry's status, error code and message.  URLs in messages
lose their user info; credentials never appear.
"""
from __future__ import annotations

import base64
import json
import random
import threading
import time
import http.client
import urllib.parse
from typing import Any

from ..dataclass import dataclass
from ..errors import (ConfigError, SchemaError, SchemaNotFoundError, SchemaRegistryError,
                      SchemaRegistryUnavailableError)
from ..options.typed_values import ValuesConfig
from ..redact import redact_url

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
USER_AGENT = "kafka-tiered/values"
RETRIABLE = frozenset({408, 429, 500, 502, 503, 504})
TYPES = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}


@dataclass(frozen=True)
class Reference:
    name: str          # how the referencing schema names it (Protobuf: the import path)
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: ``text`` (for Protobuf, base64 of the FileDescriptorProto),
    ``kind`` (``avro``, ``protobuf`` or ``json``), its references, and, when it was found through
    a subject, that subject and version."""
    id: int | None
    kind: str
    text: str
    references: tuple[Reference, ...] = ()
    subject: str | None = None
    version: int | None = None

    @classmethod
    def of(cls, answer: dict, schema_id: int | None = None) -> "RegisteredSchema":
        kind = TYPES.get(str(answer.get("schemaType") or "AVRO").upper())
        if kind is None:
            raise SchemaError(f"the registry answered schema type {answer.get('schemaType')!r} "
                              f"(AVRO, PROTOBUF or JSON expected)", schema_id=schema_id)
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in answer.get("references") or ())
        sid = answer.get("id", schema_id)
        return cls(None if sid is None else int(sid), kind, str(answer["schema"]), refs,
                   answer.get("subject"), answer.get("version"))


class _Pending:
    """One fetch of an id under way: the threads that want it wait on it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: RegisteredSchema | None = None
        self.error: BaseException | None = None


class RegistryClient:
    """Talks to one registry (one or more URLs) with one configuration; keeps every schema it
    fetched by id (and by subject and version), for the life of the process."""

    def __init__(self, config: ValuesConfig, sasl: tuple[str, str] | None = None):
        self.urls = config.registry_urls
        if not self.urls:
            raise ConfigError("no schema.registry.url", option="schema.registry.url")
        self.shown = ",".join(str(redact_url(u)) for u in self.urls)
        self.max_retries = config.max_retries
        self.wait_ms = config.retries_wait_ms
        self.max_wait_ms = config.retries_max_wait_ms
        self.timeout = config.request_timeout_ms / 1000
        self._headers = _auth_headers(config, sasl)
        self._tls = _client_tls(config) if any(u.lower().startswith("https:") for u in self.urls) else None
        self._lock = threading.Lock()
        self._by_id: dict[tuple[int, str], RegisteredSchema | _Pending] = {}
        self._by_version: dict[tuple[str, int, str], RegisteredSchema] = {}
        self.requests = 0                  # HTTP requests sent (each retry counts)

    # -- what readers ask ----------------------------------------------------------------------
    def schema(self, schema_id: int, kind: str | None = None) -> RegisteredSchema:
        """The schema of ``schema_id``, fetched once per process (``kind`` ``protobuf`` asks for
        the serialized form).  Raises :class:`SchemaNotFoundError` for an id the registry does
        not have."""
        fmt = "serialized" if kind == "protobuf" else ""
        key = (schema_id, fmt)
        with self._lock:
            got = self._by_id.get(key)
            if got is None:
                pending = _Pending()
                self._by_id[key] = pending
                mine = True
            else:
                mine = False
        if isinstance(got, RegisteredSchema):
            return got
        if not mine:
            assert isinstance(got, _Pending)
            got.done.wait()
            if got.error is not None:
                raise got.error
            assert got.value is not None
            return got.value
        try:
            query = {"format": fmt} if fmt else {}
            value = RegisteredSchema.of(self.get(f"/schemas/ids/{schema_id}", query), schema_id)
            value = RegisteredSchema(schema_id, value.kind, value.text, value.references)
        except BaseException as exc:
            pending.error = exc
            with self._lock:
                # a failure is not kept: the next record with this id asks again
                self._by_id.pop(key, None)
            pending.done.set()
            raise
        pending.value = value
        with self._lock:
            self._by_id[key] = value
        pending.done.set()
        return value

    def version(self, subject: str, version: int | None, kind: str | None = None) -> RegisteredSchema:
        """Version ``version`` of ``subject`` (None: the latest, asked every time; a numbered
        version is kept)."""
        fmt = "serialized" if kind == "protobuf" else ""
        if version is not None:
            with self._lock:
                kept = self._by_version.get((subject, version, fmt))
            if kept is not None:
                return kept
        quoted = urllib.parse.quote(subject, safe="")
        answer = self.get(f"/subjects/{quoted}/versions/{'latest' if version is None else version}",
                          {"format": fmt} if fmt else {})
        value = RegisteredSchema.of(answer)
        with self._lock:
            self._by_version[(subject, int(answer.get("version", version or 0)), fmt)] = value
        return value

    def references(self, schema: RegisteredSchema) -> dict[str, RegisteredSchema]:
        """Every schema ``schema`` references, directly or not, by the name it is referenced by."""
        out: dict[str, RegisteredSchema] = {}
        todo = list(schema.references)
        while todo:
            ref = todo.pop()
            if ref.name in out:
                continue
            got = self.version(ref.subject, ref.version, schema.kind)
            out[ref.name] = got
            todo.extend(got.references)
        return out

    # -- HTTP ----------------------------------------------------------------------------------
    def get(self, path: str, query: dict | None = None) -> dict:
        last: str = ""
        for base in self.urls:
            shown = redact_url(base)
            for attempt in range(self.max_retries + 1):
                if attempt:
                    time.sleep(random.random() * min(self.wait_ms * 2.0 ** (attempt - 1), self.max_wait_ms) / 1000)
                status, body, reason = self._send(base, path, query)
                if status is not None and 200 <= status < 300:
                    try:
                        return json.loads(body)
                    except ValueError:
                        raise SchemaRegistryError(f"GET {path}: the answer is not JSON", status=status,
                                                  url=shown) from None
                if status is not None and status not in RETRIABLE:
                    raise _refusal(path, status, body, shown)
                last = reason if status is None else f"HTTP {status} {_message(body)}"
        raise SchemaRegistryUnavailableError(
            f"GET {path} failed after {self.max_retries + 1} attempt(s) per URL: {last}", url=self.shown)

    def _send(self, base: str, path: str, query: dict | None) -> tuple[int | None, bytes, str]:
        """(status, body, reason): status None when no answer came."""
        parts = urllib.parse.urlsplit(base)
        self.requests += 1
        conn: http.client.HTTPConnection
        if parts.scheme.lower() == "https":
            if self._tls is None:       # every URL was http when the client was made
                return None, b"", f"no TLS settings for {redact_url(base)}"
            conn = self._tls.https_connection(parts.hostname or "", parts.port, timeout=self.timeout)
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        target = urllib.parse.urlunsplit(("", "", parts.path.rstrip("/") + path,
                                          urllib.parse.urlencode(query or {}), ""))
        try:
            conn.request("GET", target, headers={"Accept": ACCEPT, "User-Agent": USER_AGENT, **self._headers})
            answer = conn.getresponse()
            return answer.status, answer.read(), ""
        except (OSError, http.client.HTTPException) as exc:
            return None, b"", f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()


def _message(body: bytes) -> str:
    try:
        answer = json.loads(body)
        return f"error_code {answer.get('error_code')}: {answer.get('message')}"
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace")


def _refusal(path: str, status: int, body: bytes, shown: str | None) -> SchemaRegistryError:
    code = None
    try:
        code = json.loads(body).get("error_code")
    except (ValueError, AttributeError):
        pass
    text = f"GET {path}: HTTP {status} {_message(body)}"
    if status == 404:
        return SchemaNotFoundError(text, status=status, error_code=code, url=shown)
    if status in (401, 403):
        text += (" (check basic.auth.user.info / basic.auth.credentials.source, or bearer.auth.token)")
    return SchemaRegistryError(text, status=status, error_code=code, url=shown)


def _auth_headers(config: ValuesConfig, sasl: tuple[str, str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if config.bearer_auth_credentials_source == "STATIC_TOKEN" and config.bearer_auth_token is not None:
        headers["Authorization"] = f"Bearer {config.bearer_auth_token.get()}"
        if config.bearer_auth_logical_cluster:
            headers["target-sr-cluster"] = config.bearer_auth_logical_cluster
        if config.bearer_auth_identity_pool_id:
            headers["Confluent-Identity-Pool-Id"] = config.bearer_auth_identity_pool_id
        return headers
    user_info = None
    source = config.basic_auth_credentials_source
    if source == "USER_INFO" and config.basic_auth_user_info is not None:
        user_info = config.basic_auth_user_info.get()
    elif source == "URL":
        parts = urllib.parse.urlsplit(config.registry_urls[0])
        user_info = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
    elif source == "SASL_INHERIT":
        if sasl is None:
            raise ConfigError("basic.auth.credentials.source is SASL_INHERIT but the Kafka client has no SASL "
                              "user and password (kafka.sasl.jaas.config)", option="basic.auth.credentials.source")
        user_info = f"{sasl[0]}:{sasl[1]}"
    if user_info is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode("utf-8")).decode("ascii")
    return headers


# Our option names for the Kafka client's TLS properties they are handed to.
_TLS_NAMES = {"ssl.cafile": "schema.registry.ssl.ca.location", "ssl.certfile": "schema.registry.ssl.certificate.location",
              "ssl.keyfile": "schema.registry.ssl.key.location", "ssl.key.password": "schema.registry.ssl.key.password",
              "ssl.endpoint.identification.algorithm": "schema.registry.ssl.endpoint.identification.algorithm"}


def _client_tls(config: ValuesConfig) -> Any:
    """The registry's TLS through the library's one TLS helper (protocol/tls.py's
    :func:`client_tls`): the same trust, key and host-name rules (LDAP's included) as the
    brokers' connections, from the registry's options spelt as the Kafka client's."""
    import dataclasses

    from ..options.tls import TlsSettings
    from ..protocol.tls import client_tls
    props: dict[str, Any] = {"ssl.endpoint.identification.algorithm": config.ssl_endpoint_identification_algorithm}
    if config.ssl_key_password is not None:
        props["ssl.key.password"] = config.ssl_key_password.get()
    try:
        settings = dataclasses.replace(TlsSettings.parse(props, peer="the schema registry"),
                                       cafile=config.ssl_ca_location or None,
                                       certfile=config.ssl_certificate_location or None,
                                       keyfile=config.ssl_key_location or None)
        return client_tls(settings)
    except ConfigError as exc:
        text = str(exc)
        for kafka_name, ours in _TLS_NAMES.items():
            text = text.replace(kafka_name, ours)
        raise ConfigError(text, option=_TLS_NAMES.get(exc.option or "", exc.option)) from None


_clients: dict[tuple, RegistryClient] = {}
_clients_lock = threading.Lock()


def registry_client(config: ValuesConfig, sasl: tuple[str, str] | None = None) -> RegistryClient:
    """The process's client for ``config``'s registry and credentials (made once, kept: its
    schemas are this process's cache)."""
    key = (config.registry_urls, config.basic_auth_credentials_source, config.basic_auth_user_info,
           config.bearer_auth_token, config.bearer_auth_logical_cluster, config.bearer_auth_identity_pool_id,
           config.ssl_ca_location, config.ssl_certificate_location, config.ssl_key_location,
           config.ssl_key_password, config.ssl_endpoint_identification_algorithm, config.max_retries,
           config.retries_wait_ms, config.retries_max_wait_ms, config.request_timeout_ms, sasl)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = RegistryClient(config, sasl)
            if len(_clients) > 16:
                _clients.clear()
            _clients[key] = client
        return client
