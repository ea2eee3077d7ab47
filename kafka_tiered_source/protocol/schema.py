"""Declaration types for Kafka messages, and the classes generated from them.

A message is declared once, as data (:class:`Message` holding :class:`Field` s), the way Kafka's
own ``common/message/*.json`` files and franz-go's kmsg do it.  At import the declarations turn
into plain Python classes (:func:`build_message_class`): snake_case attributes, defaults,
``__eq__``, a ``__repr__`` that hides sensitive fields.  There is no per-version class; the
codec looks at the field's version ranges.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Type, TypeVar, cast

PRIMITIVES = frozenset({
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool",
    "string", "bytes", "records", "uuid",
})
_INTS = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})
ZERO_UUID = bytes(16)


@dataclass(frozen=True)
class VersionRange:
    """``"3+"``, ``"0-4"``, ``"7"`` or ``"none"`` from the JSON definitions; ``hi`` None = open."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | None) -> "VersionRange | None":
        if text is None or text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


# where an underscore goes: between a run of capitals and the capital that starts the next word
# (``HTTPServer``), and between a lower-case letter or digit and a capital (``topicId``).  One
# pass with a plain replacement: the two template substitutions it replaces cost a third of
# the messages' import
_WORD_BREAK = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])")


def snake_case(name: str) -> str:
    return _WORD_BREAK.sub("_", name).lower()


_NO_DEFAULT = object()


class Field:
    """One field of a struct.

    ``type`` is a primitive name, ``[]elem`` for arrays, or a struct type name (then ``fields``
    holds the nested declaration).  ``versions`` / ``nullable`` / ``tagged`` are version-range
    strings; ``tag`` the tag number when the field is tagged.  ``sensitive`` fields (SASL auth
    bytes, presigned URLs) never show in reprs.
    """

    __slots__ = ("name", "attr", "type", "versions", "nullable", "tag", "tagged", "fields",
                 "sensitive", "_default", "struct_class", "elem_type", "is_array", "never_compact",
                 "_spec", "_compare")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str | None = None,
                 default: Any = _NO_DEFAULT, tag: int | None = None, tagged: str | None = None,
                 fields: list["Field"] | None = None, sensitive: bool = False,
                 never_compact: bool = False):
        self.name = name
        self.attr = snake_case(name)
        self.type = type
        self.is_array = type.startswith("[]")
        self.elem_type = type[2:] if self.is_array else type
        self.versions = VersionRange.parse(versions)
        self.nullable = VersionRange.parse(nullable)
        self.tag = tag
        self.tagged = VersionRange.parse(tagged)
        if (tag is None) != (self.tagged is None):
            raise ValueError(f"field {name}: tag and tagged versions go together")
        self.fields = fields
        if self.elem_type not in PRIMITIVES and fields is None:
            raise ValueError(f"field {name}: struct type {self.elem_type} needs fields")
        self.sensitive = sensitive
        # The request header's ClientId stays a classic string even in header v2 (Kafka's
        # "flexibleVersions": "none" on that one field).
        self.never_compact = never_compact
        self._default = default
        self.struct_class: Type[Struct] | None = None   # set when classes are built (``type`` is a parameter here)
        # (factory, constant), once struct_class is known
        self._spec: tuple[Callable[[], Any] | None, Any] | None = None
        self._compare = _NO_DEFAULT

    def in_version(self, v: int) -> bool:
        return self.versions is not None and v in self.versions

    def is_tagged(self, v: int) -> bool:
        return self.tagged is not None and v in self.tagged

    def is_nullable(self, v: int) -> bool:
        return self.nullable is not None and v in self.nullable

    def default(self):
        """A fresh default value (lists and structs are new objects every time)."""
        factory, const = self.default_spec()
        return factory() if factory is not None else const

    def default_spec(self) -> tuple[Callable[[], Any] | None, Any]:
        """``(factory, constant)``: a default that is immutable is shared (``factory`` None);
        lists and structs are made new by ``factory()`` for every object.  The codec and
        ``Struct.__init__`` set thousands of defaults per response, so this is worked out once."""
        spec = self._spec
        if spec is None:
            spec = self._spec = self._work_out_default()
        return spec

    def _work_out_default(self) -> tuple[Callable[[], Any] | None, Any]:
        d = self._default
        if self.is_array:
            return (None, None) if d is None else (list, None)
        if d is not _NO_DEFAULT:
            return None, d
        t = self.type
        if t in _INTS:
            return None, 0
        if t == "float64":
            return None, 0.0
        if t == "bool":
            return None, False
        if t == "string":
            return None, ""
        if t == "bytes":
            return None, b""
        if t == "records":
            return None, None
        if t == "uuid":
            return None, ZERO_UUID
        if self.struct_class is None:
            raise ValueError(f"field {self.name}: struct class not built yet")
        return self.struct_class, None

    def is_default(self, value) -> bool:
        d = self._default
        if self.is_array:
            return value is None if d is None else (value is not None and len(value) == 0)
        compare = self._compare
        if compare is _NO_DEFAULT:
            compare = self._compare = self.default()   # compared with, never handed out
        return value == compare

    def __repr__(self):
        return f"Field({self.name!r}, {self.type!r}, {str(self.versions)!r})"


class StructType(type):
    """The class of the generated classes.  Their fields and nested struct classes are data (a
    :class:`Message`'s declaration), set when the classes are built, so a type checker cannot
    list them: it sees every field as ``Any`` (:meth:`Struct.__getattr__`) and every nested
    struct class (``FetchRequest.FetchTopic``) as a :class:`Struct` class (below)."""

    if TYPE_CHECKING:
        def __getattr__(cls, name: str) -> type[Struct]: ...


class Struct(metaclass=StructType):
    """Base of every generated class.  ``unknown_tags`` maps tag -> raw bytes for tagged fields
    this code does not know (kept so they re-encode unchanged)."""

    __slots__ = ("unknown_tags",)
    # the fields in declaration order, which the codec, random_values and the broker walk
    FIELDS: tuple[Field, ...] = ()
    _attrs: frozenset[str] = frozenset()
    _defaults: tuple[tuple[str, Callable[[], Any] | None, Any], ...]
    unknown_tags: dict[int, bytes] | None

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, **kwargs):
        specs = type(self).__dict__.get("_defaults")
        if specs is None:
            specs = type(self)._defaults = tuple((f.attr, *f.default_spec()) for f in self.FIELDS)
        if kwargs:
            for attr, factory, const in specs:
                if attr in kwargs:
                    object.__setattr__(self, attr, kwargs.pop(attr))
                else:
                    object.__setattr__(self, attr, factory() if factory is not None else const)
        else:
            for attr, factory, const in specs:
                object.__setattr__(self, attr, factory() if factory is not None else const)
        self.unknown_tags = kwargs.pop("unknown_tags", None) or None
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(kwargs)}; "
                            f"fields are {[f.attr for f in self.FIELDS]}")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        if (self.unknown_tags or {}) != (other.unknown_tags or {}):
            return False
        return all(_eq(getattr(self, f.attr), getattr(other, f.attr)) for f in self.FIELDS)

    __hash__ = None    # type: ignore[assignment]  # mutable, compared by value: unhashable, as a dataclass with eq

    def __repr__(self):
        parts = []
        for f in self.FIELDS:
            v = getattr(self, f.attr)
            if f.sensitive and v is not None:
                parts.append(f"{f.attr}='***'")
            elif isinstance(v, (bytes, bytearray, memoryview)) and len(v) > 32:
                parts.append(f"{f.attr}=<{len(v)} bytes>")
            else:
                parts.append(f"{f.attr}={v!r}" if not isinstance(v, memoryview) else f"{f.attr}={bytes(v)!r}")
        if self.unknown_tags:
            parts.append(f"unknown_tags={sorted(self.unknown_tags)}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self) -> dict:
        """Plain nested dict/list form (memoryviews become bytes); handy in tests and logs."""
        out = {}
        for f in self.FIELDS:
            out[f.attr] = _plain(getattr(self, f.attr))
        return out

    def copy(self):
        """A deep copy (lists and nested structs are new; bytes, strings and record views are
        shared, they are never mutated by the codec)."""
        return _copy(self)


def _copy(v):
    if isinstance(v, Struct):
        new = type(v).__new__(type(v))
        for f in v.FIELDS:
            setattr(new, f.attr, _copy(getattr(v, f.attr)))
        new.unknown_tags = dict(v.unknown_tags) if v.unknown_tags else None
        return new
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


def _plain(v):
    if isinstance(v, Struct):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def _eq(a, b) -> bool:
    # memoryview (decoded records) compares by content with bytes
    if isinstance(a, memoryview) or isinstance(b, memoryview):
        if a is None or b is None:
            return a is b
        return bytes(a) == bytes(b)
    return a == b


class MessageStruct(Struct):
    """Base of generated request/response classes; class attributes describe the API."""

    __slots__ = ()
    API_KEY: int = -1
    NAME: str = ""
    KIND: str = ""               # "request" | "response"
    VALID_VERSIONS: VersionRange
    FLEXIBLE_VERSIONS: VersionRange | None

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_VERSIONS is not None and version in cls.FLEXIBLE_VERSIONS

    @classmethod
    def min_version(cls) -> int:
        return cls.VALID_VERSIONS.lo

    @classmethod
    def max_version(cls) -> int:
        hi = cls.VALID_VERSIONS.hi
        if hi is None:     # Kafka's JSON gives every message a closed validVersions range
            raise ValueError(f"{cls.NAME}: validVersions {cls.VALID_VERSIONS} has no upper bound")
        return hi

    def encode(self, version: int) -> bytes:
        from .codec import encode_body
        return encode_body(self, version)

    @classmethod
    def decode(cls, data, version: int, *, keep_unknown_tags: bool = True):
        from .codec import decode_body
        return decode_body(cls, data, version, keep_unknown_tags=keep_unknown_tags)


class Message:
    """A message declaration: Kafka's JSON, as Python data."""

    __slots__ = ("name", "api_key", "kind", "valid", "flexible", "fields")

    def __init__(self, name: str, api_key: int, kind: str, *, valid: str, flexible: str, fields: list):
        self.name = name
        self.api_key = api_key
        self.kind = kind
        self.valid = valid
        self.flexible = flexible
        self.fields = fields

    def __repr__(self):
        return f"Message({self.name!r}, api_key={self.api_key}, valid={self.valid!r}, flexible={self.flexible!r})"


S = TypeVar("S", bound=Struct)


def _build_struct(name: str, fields: list[Field], base: type[S], namespace: dict[str, Any],
                  owner_dict: dict[str, type[Struct]]) -> type[S]:
    seen = set()
    for f in fields:
        if f.attr in seen:
            raise ValueError(f"{name}: duplicate field {f.attr}")
        seen.add(f.attr)
        if f.fields is not None:
            f.struct_class = _build_struct(f.elem_type, f.fields, Struct, {}, owner_dict)
    attrs = dict(namespace)
    attrs["__slots__"] = tuple(f.attr for f in fields)
    attrs["FIELDS"] = tuple(fields)
    attrs["_attrs"] = frozenset(f.attr for f in fields)
    # a class made by its metaclass is typed as that metaclass; it is a subclass of ``base``
    cls = cast("type[S]", StructType(name, (base,), attrs))
    if base is Struct:
        # Nested struct classes hang off the message class (FetchRequest.FetchTopic), as kmsg does.
        other = owner_dict.get(name)
        if other is not None and [f.attr for f in other.FIELDS] != [f.attr for f in fields]:
            raise ValueError(f"struct name {name} declared twice with different fields")
        owner_dict.setdefault(name, cls)
    return cls


def build_message_class(decl: Message, module: str | None = None) -> type[MessageStruct]:
    nested: dict[str, type[Struct]] = {}
    ns = {
        "API_KEY": decl.api_key, "NAME": decl.name, "KIND": decl.kind,
        "VALID_VERSIONS": VersionRange.parse(decl.valid),
        "FLEXIBLE_VERSIONS": VersionRange.parse(decl.flexible),
        "DECLARATION": decl,
    }
    if module:
        ns["__module__"] = module
    cls = _build_struct(decl.name, decl.fields, MessageStruct, ns, nested)
    for k, v in nested.items():
        if module:
            v.__module__ = module
            v.__qualname__ = f"{decl.name}.{k}"
        setattr(cls, k, v)
    return cls
