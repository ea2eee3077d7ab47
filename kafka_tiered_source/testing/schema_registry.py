"""A Schema Registry REST server for tests, examples and ``kafka-tiered broker``: the subset of
Confluent's API that confluent-kafka's ``SchemaRegistryClient`` and its Avro, Protobuf and JSON
Schema serializers and deserializers use, answering as Confluent's registry does (its
``SchemaRegistryResource``/``SubjectVersionsResource`` paths, bodies, status and error codes).

- ``POST /subjects/{s}/versions`` registers (one id per distinct schema, shared by subjects; the
  same schema again under a subject answers its id; a new version is checked against the
  subject's compatibility level first: 409 when incompatible); ``POST /subjects/{s}`` looks one
  up; ``GET /schemas/ids/{id}`` (``format=serialized`` for Protobuf), ``/schemas/ids/{id}/versions``,
  ``/schemas/types``, ``/subjects``, ``/subjects/{s}/versions[/{v}|latest]``;
  ``POST /compatibility/subjects/{s}/versions[/{v}]``; ``GET``/``PUT /config[/{s}]``;
  ``DELETE /subjects/{s}[/versions/{v}]`` (soft).
- Compatibility (``BACKWARD`` by default, ``NONE``, ``FORWARD``, ``FULL`` and the ``_TRANSITIVE``
  forms): Avro by schema resolution (``values/avro.py``), Protobuf by field number (a number kept
  with a type of another wire encoding breaks it), JSON Schema by property (a property whose type
  changes other than integer -> number, or a new required property without a default, breaks
  backward compatibility).
- Protobuf schemas are kept as registered: base64 FileDescriptorProtos, as confluent-kafka's
  ProtobufSerializer sends them (Confluent's registry would also accept ``.proto`` text, which this
  one refuses: it has no ``.proto`` parser) and as ``format=serialized`` asks for them back.
- Optional basic auth (``users``), bearer tokens (``tokens``) and TLS (``ssl_context``);
  ``stop()`` and ``start()`` make an outage; ``requests`` counts what was asked, by method and path.
"""
from __future__ import annotations

import base64
import json
import os
import re
import ssl
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _not_found(what: str, code: int) -> RegistryError:
    return RegistryError(404, code, what)


class SchemaStore:
    """The registry's state: schemas by id, subjects' versions, compatibility levels."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: dict[int, dict] = {}          # id -> {"schemaType", "schema", "references"}
        self.subjects: dict[str, list[dict]] = {}   # subject -> [{"version", "id", "deleted"}]
        self.config: dict[str, str] = {}            # subject -> level ("" is the global one)
        self.next_id = 1

    def save(self, path: str) -> None:
        with self.lock:
            state = {"schemas": {str(k): v for k, v in self.schemas.items()}, "subjects": self.subjects,
                     "config": self.config, "next_id": self.next_id}
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, path)

    def load(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        self.schemas = {int(k): v for k, v in state["schemas"].items()}
        self.subjects, self.config, self.next_id = state["subjects"], state["config"], int(state["next_id"])

    # -- schemas --------------------------------------------------------------------------------
    @staticmethod
    def normal(body: dict) -> dict:
        kind = str(body.get("schemaType") or "AVRO").upper()
        if kind not in ("AVRO", "PROTOBUF", "JSON"):
            raise RegistryError(422, 42201, f"Invalid schema type {kind}")
        text = body.get("schema")
        if not isinstance(text, str):
            raise RegistryError(422, 42201, "Either the input schema or one of its references is invalid")
        refs = [{"name": str(r["name"]), "subject": str(r["subject"]), "version": int(r["version"])}
                for r in body.get("references") or ()]
        if kind == "AVRO" or kind == "JSON":
            try:
                text = json.dumps(json.loads(text), separators=(",", ":"))
            except ValueError:
                raise RegistryError(422, 42201, f"Invalid schema: not JSON ({kind})") from None
        else:
            try:
                base64.b64decode(text.strip(), validate=True)
            except ValueError:
                raise RegistryError(422, 42201, "Invalid schema: this test registry takes Protobuf schemas as "
                                                "base64 FileDescriptorProtos (confluent-kafka's serialized form)") from None
        return {"schemaType": kind, "schema": text, "references": refs}

    def id_of(self, schema: dict) -> int | None:
        for sid, s in self.schemas.items():
            if s == schema:
                return sid
        return None

    def live(self, subject: str) -> list[dict]:
        return [v for v in self.subjects.get(subject, []) if not v["deleted"]]

    def version(self, subject: str, version: str) -> dict:
        versions = self.live(subject)
        if subject not in self.subjects or not versions:
            raise _not_found(f"Subject '{subject}' not found.", 40401)
        if version in ("latest", "-1"):
            return versions[-1]
        try:
            number = int(version)
        except ValueError:
            raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed "
                                            f"values are between [1, 2^31-1] and the string \"latest\"") from None
        for v in versions:
            if v["version"] == number:
                return v
        raise _not_found(f"Version {number} not found.", 40402)

    def register(self, subject: str, body: dict) -> dict:
        schema = self.normal(body)
        self.check_references(schema)
        with self.lock:
            sid = self.id_of(schema)
            for v in self.live(subject):
                if v["id"] == sid:
                    return {"id": sid}
            problems = self.problems(subject, schema, None)
            if problems:
                raise RegistryError(409, 409, "Schema being registered is incompatible with an earlier schema for "
                                              f"subject \"{subject}\", details: {problems}")
            if sid is None:
                sid = self.next_id
                self.next_id += 1
                self.schemas[sid] = schema
            versions = self.subjects.setdefault(subject, [])
            number = (versions[-1]["version"] + 1) if versions else 1
            versions.append({"version": number, "id": sid, "deleted": False})
            return {"id": sid}

    def check_references(self, schema: dict) -> None:
        for ref in schema["references"]:
            self.version(ref["subject"], str(ref["version"]))

    def lookup(self, subject: str, body: dict) -> dict:
        schema = self.normal(body)
        if subject not in self.subjects:
            raise _not_found(f"Subject '{subject}' not found.", 40401)
        sid = self.id_of(schema)
        for v in self.live(subject):
            if v["id"] == sid:
                return self.answer(subject, v)
        raise _not_found("Schema not found", 40403)

    def answer(self, subject: str, v: dict) -> dict:
        s = self.schemas[v["id"]]
        out = {"subject": subject, "version": v["version"], "id": v["id"], "schema": s["schema"]}
        if s["schemaType"] != "AVRO":
            out["schemaType"] = s["schemaType"]
        if s["references"]:
            out["references"] = s["references"]
        return out

    def by_id(self, sid: int) -> dict:
        s = self.schemas.get(sid)
        if s is None:
            raise _not_found("Schema not found", 40403)
        out: dict[str, Any] = {"schema": s["schema"]}
        if s["schemaType"] != "AVRO":
            out["schemaType"] = s["schemaType"]
        if s["references"]:
            out["references"] = s["references"]
        return out

    # -- compatibility --------------------------------------------------------------------------
    def level(self, subject: str | None) -> str:
        return self.config.get(subject or "", self.config.get("", "BACKWARD"))

    def problems(self, subject: str, schema: dict, against: str | None) -> list[str]:
        level = self.level(subject)
        if level == "NONE":
            return []
        versions = self.live(subject)
        if against is not None:
            versions = [self.version(subject, against)]
        elif not level.endswith("_TRANSITIVE"):
            versions = versions[-1:]
        out: list[str] = []
        for v in versions:
            old = self.schemas[v["id"]]
            if old["schemaType"] != schema["schemaType"]:
                out.append(f"version {v['version']} is {old['schemaType']}, not {schema['schemaType']}")
                continue
            if level.startswith(("BACKWARD", "FULL")):
                out += [f"{m} (reading version {v['version']})" for m in self.compare(old, schema)]
            if level.startswith(("FORWARD", "FULL")):
                out += [f"{m} (read by version {v['version']})" for m in self.compare(schema, old)]
        return out

    def compare(self, writer: dict, reader: dict) -> list[str]:
        """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can)."""
        kind = writer["schemaType"]
        if kind == "AVRO":
            return self._avro(writer, reader)
        if kind == "PROTOBUF":
            return _protobuf_problems(writer["schema"], reader["schema"])
        return _json_problems(json.loads(writer["schema"]), json.loads(reader["schema"]))

    def _avro(self, writer: dict, reader: dict) -> list[str]:
        from ..values.formats import avro_module
        avro = avro_module()

        def parsed(s: dict):
            named: dict = {}
            for ref in s["references"]:
                target = self.schemas[self.version(ref["subject"], str(ref["version"]))["id"]]
                p = avro.parse_schema(target["schema"], named)
                named[p.fullname or ref["name"]] = p
            return avro.parse_schema(s["schema"], named)
        try:
            avro.resolve(parsed(writer), parsed(reader))
        except avro.AvroError as exc:
            return [str(exc)]
        return []


_WIRE = {"int32": "varint", "int64": "varint", "uint32": "varint", "uint64": "varint", "bool": "varint",
         "enum": "varint", "sint32": "zigzag", "sint64": "zigzag", "fixed32": "32", "sfixed32": "32", "float": "32",
         "fixed64": "64", "sfixed64": "64", "double": "64", "string": "bytes", "bytes": "bytes",
         "message": "message", "group": "group"}


def _protobuf_problems(writer_text: str, reader_text: str) -> list[str]:
    from google.protobuf import descriptor_pb2
    w, r = descriptor_pb2.FileDescriptorProto(), descriptor_pb2.FileDescriptorProto()
    w.ParseFromString(base64.b64decode(writer_text))
    r.ParseFromString(base64.b64decode(reader_text))
    names = {v: k[5:].lower() for k, v in descriptor_pb2.FieldDescriptorProto.Type.items()}

    def messages(fd, prefix: str, into: dict) -> dict:
        for m in fd:
            into[prefix + m.name] = m
            messages(m.nested_type, prefix + m.name + ".", into)
        return into
    wm, rm = messages(w.message_type, "", {}), messages(r.message_type, "", {})
    out = []
    for name, rmsg in rm.items():
        wmsg = wm.get(name)
        if wmsg is None:
            continue
        by_number = {f.number: f for f in wmsg.field}
        for f in rmsg.field:
            old = by_number.get(f.number)
            if old is not None and _WIRE[names[old.type]] != _WIRE[names[f.type]]:
                out.append(f"{name}.{f.name}: field {f.number} changed type from {names[old.type]} to "
                           f"{names[f.type]}")
    return out


def _json_problems(writer: Any, reader: Any, path: str = "") -> list[str]:
    if not isinstance(writer, dict) or not isinstance(reader, dict):
        return []
    out = []
    wt, rt = writer.get("type"), reader.get("type")
    if wt is not None and rt is not None and wt != rt:
        wide = set(wt if isinstance(wt, list) else [wt])
        rset = set(rt if isinstance(rt, list) else [rt])
        if not all(t in rset or (t == "integer" and "number" in rset) for t in wide):
            out.append(f"{path or 'the value'}: type {wt} cannot be read as {rt}")
    wp, rp = writer.get("properties") or {}, reader.get("properties") or {}
    for name, sub in rp.items():
        if name in wp:
            out += _json_problems(wp[name], sub, f"{path}{name}.")
        elif name in (reader.get("required") or ()) and "default" not in sub:
            out.append(f"{path}{name}: a required property the writer did not have")
    return out


_PATHS = [
    ("GET", re.compile(r"^/schemas/types$"), "types"),
    ("GET", re.compile(r"^/schemas/ids/(\d+)$"), "by_id"),
    ("GET", re.compile(r"^/schemas/ids/(\d+)/versions$"), "id_versions"),
    ("GET", re.compile(r"^/subjects$"), "subjects"),
    ("GET", re.compile(r"^/subjects/([^/]+)/versions$"), "versions"),
    ("GET", re.compile(r"^/subjects/([^/]+)/versions/([^/]+)$"), "get_version"),
    ("GET", re.compile(r"^/subjects/([^/]+)/versions/([^/]+)/schema$"), "raw_schema"),
    ("POST", re.compile(r"^/subjects/([^/]+)/versions$"), "register"),
    ("POST", re.compile(r"^/subjects/([^/]+)$"), "lookup"),
    ("POST", re.compile(r"^/compatibility/subjects/([^/]+)/versions/([^/]+)$"), "compat"),
    ("POST", re.compile(r"^/compatibility/subjects/([^/]+)/versions$"), "compat_all"),
    ("GET", re.compile(r"^/config$"), "get_config"),
    ("GET", re.compile(r"^/config/([^/]+)$"), "get_config"),
    ("PUT", re.compile(r"^/config$"), "put_config"),
    ("PUT", re.compile(r"^/config/([^/]+)$"), "put_config"),
    ("DELETE", re.compile(r"^/subjects/([^/]+)$"), "delete_subject"),
    ("DELETE", re.compile(r"^/subjects/([^/]+)/versions/([^/]+)$"), "delete_version"),
]


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:   # quiet, as the embedded broker is
        pass

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        registry = self.server.registry
        if not registry.users and not registry.tokens:
            return True
        header = self.headers.get("Authorization", "")
        if header.startswith("Basic ") and registry.users:
            try:
                user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
            except ValueError:
                return False
            return registry.users.get(user) == password
        if header.startswith("Bearer ") and registry.tokens:
            return header[7:] in registry.tokens
        return False

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        registry = self.server.registry
        registry.requests[(method, parts.path)] += 1
        registry.by_agent[(self.headers.get("User-Agent", "").split("/")[0], method, parts.path)] += 1
        if not self._authorized():
            self._reply(401, {"error_code": 401, "message": "Unauthorized"})
            return
        for verb, pattern, name in _PATHS:
            m = pattern.match(parts.path)
            if verb == method and m:
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    self._reply(400, {"error_code": 400, "message": "Unrecognized request body: not JSON"})
                    return
                try:
                    status, answer = getattr(registry, "_" + name)(*[unquote(g) for g in m.groups()],
                                                                   query=query, body=body)
                except RegistryError as exc:
                    self._reply(exc.status, {"error_code": exc.code, "message": exc.message})
                    return
                if method != "GET" and registry.path is not None:
                    registry.store.save(registry.path)
                self._reply(status, answer)
                return
        self._reply(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    registry: "SchemaRegistry"


class SchemaRegistry:
    """The registry server: ``SchemaRegistry().start()``; ``url`` is what clients are given.

    ``users``: ``{user: password}`` for basic auth; ``tokens``: accepted bearer tokens (either
    set: every request must carry one); ``ssl_context``: serve HTTPS with it.  ``stop()`` closes
    the port (an outage: connections are refused) and ``start()`` opens it again on the same port
    with the same schemas."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, users: dict[str, str] | None = None,
                 tokens: set[str] | None = None, ssl_context: ssl.SSLContext | None = None,
                 path: str | None = None):
        self.host = host
        self.port = port
        self.path = path          # where the schemas are kept between runs (None: memory only)
        self.users = dict(users or {})
        self.tokens = set(tokens or ())
        self.ssl_context = ssl_context
        self.store = SchemaStore()
        if path is not None and os.path.exists(path):
            self.store.load(path)
        self.requests: Counter = Counter()
        self.by_agent: Counter = Counter()      # (User-Agent's product, method, path)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    def start(self) -> "SchemaRegistry":
        if self._server is not None:
            return self
        server = _Server((self.host, self.port), _Handler)
        server.registry = self
        if self.ssl_context is not None:
            server.socket = self.ssl_context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=f"schema-registry-{self.port}",
                                        daemon=True, kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    close = stop

    def __enter__(self) -> "SchemaRegistry":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def fetches(self, schema_id: int, agent: str | None = None) -> int:
        """How many times ``GET /schemas/ids/{schema_id}`` was asked (by clients whose User-Agent
        names the product ``agent``, e.g. ``kafka-tiered``)."""
        if agent is None:
            return self.requests[("GET", f"/schemas/ids/{schema_id}")]
        return self.by_agent[(agent, "GET", f"/schemas/ids/{schema_id}")]

    # -- the API, one method per path (status, body) ---------------------------------------------
    def _types(self, query: dict, body: dict) -> tuple[int, Any]:
        return 200, ["JSON", "PROTOBUF", "AVRO"]

    def _by_id(self, sid: str, query: dict, body: dict) -> tuple[int, Any]:
        return 200, self.store.by_id(int(sid))

    def _id_versions(self, sid: str, query: dict, body: dict) -> tuple[int, Any]:
        self.store.by_id(int(sid))
        return 200, [{"subject": s, "version": v["version"]} for s, vs in self.store.subjects.items()
                     for v in vs if v["id"] == int(sid) and not v["deleted"]]

    def _subjects(self, query: dict, body: dict) -> tuple[int, Any]:
        return 200, sorted(s for s in self.store.subjects if self.store.live(s))

    def _versions(self, subject: str, query: dict, body: dict) -> tuple[int, Any]:
        if not self.store.live(subject):
            raise _not_found(f"Subject '{subject}' not found.", 40401)
        return 200, [v["version"] for v in self.store.live(subject)]

    def _get_version(self, subject: str, version: str, query: dict, body: dict) -> tuple[int, Any]:
        return 200, self.store.answer(subject, self.store.version(subject, version))

    def _raw_schema(self, subject: str, version: str, query: dict, body: dict) -> tuple[int, Any]:
        text = self.store.schemas[self.store.version(subject, version)["id"]]["schema"]
        return 200, json.loads(text) if text.startswith(("{", "[", '"')) else text

    def _register(self, subject: str, query: dict, body: dict) -> tuple[int, Any]:
        return 200, self.store.register(subject, body)

    def _lookup(self, subject: str, query: dict, body: dict) -> tuple[int, Any]:
        return 200, self.store.lookup(subject, body)

    def _compat(self, subject: str, version: str, query: dict, body: dict) -> tuple[int, Any]:
        schema = self.store.normal(body)
        problems = self.store.problems(subject, schema, version) if self.store.live(subject) else []
        answer: dict[str, Any] = {"is_compatible": not problems}
        if str(query.get("verbose", "")).lower() == "true":
            answer["messages"] = problems
        return 200, answer

    def _compat_all(self, subject: str, query: dict, body: dict) -> tuple[int, Any]:
        schema = self.store.normal(body)
        problems = self.store.problems(subject, schema, None) if self.store.live(subject) else []
        answer: dict[str, Any] = {"is_compatible": not problems}
        if str(query.get("verbose", "")).lower() == "true":
            answer["messages"] = problems
        return 200, answer

    def _get_config(self, subject: str | None = None, *, query: dict, body: dict) -> tuple[int, Any]:
        if subject is not None and subject not in self.store.config:
            if str(query.get("defaultToGlobal", "")).lower() != "true":
                raise _not_found(f"Subject '{subject}' does not have subject-level compatibility configured", 40408)
        return 200, {"compatibilityLevel": self.store.level(subject)}

    def _put_config(self, subject: str | None = None, *, query: dict, body: dict) -> tuple[int, Any]:
        level = str(body.get("compatibility", "")).upper()
        if level not in LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, "
                                            "full, backward_transitive, forward_transitive, and full_transitive")
        self.store.config[subject or ""] = level
        return 200, {"compatibility": level}

    def _delete_subject(self, subject: str, query: dict, body: dict) -> tuple[int, Any]:
        versions = self.store.live(subject)
        if not versions:
            raise _not_found(f"Subject '{subject}' not found.", 40401)
        for v in versions:
            v["deleted"] = True
        return 200, [v["version"] for v in versions]

    def _delete_version(self, subject: str, version: str, query: dict, body: dict) -> tuple[int, Any]:
        v = self.store.version(subject, version)
        v["deleted"] = True
        return 200, v["version"]
