"""The classes generated from message declarations: :class:`Struct`, :class:`MessageStruct`.

On first use (:class:`MessageClasses`) :func:`build_message_class` turns a :class:`~.schema.Message` into a plain Python class:
snake_case attributes, defaults, ``__eq__``, a ``__repr__`` that hides sensitive fields, nested
struct classes as attributes (``FetchRequest.FetchTopic``, as kmsg does).  A message's
``encode``/``decode`` are :mod:`.bodies`'.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar, cast

from .bodies import decode_body, encode_body
from .schema import Field, Message, VersionRange


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
        return encode_body(self, version)

    @classmethod
    def decode(cls, data, version: int, *, keep_unknown_tags: bool = True):
        return decode_body(cls, data, version, keep_unknown_tags=keep_unknown_tags)


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


class MessageClasses(Mapping):
    """name -> the generated class of each of ``declarations``, built on first look-up (a process
    pays for the messages it speaks, not for all of them)."""

    def __init__(self, declarations: list[Message], module: str):
        self._decls = {d.name: d for d in declarations}
        self._module = module
        self._built: dict[str, type[MessageStruct]] = {}

    def __getitem__(self, name: str) -> type[MessageStruct]:
        cls = self._built.get(name)
        if cls is None:
            cls = self._built[name] = build_message_class(self._decls[name], self._module)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._decls)

    def __len__(self) -> int:
        return len(self._decls)

    def built(self) -> list[str]:
        """The names of the classes built so far."""
        return list(self._built)

    def by_api_key(self, kind: str) -> Mapping[int, Any]:
        """api key -> the ``kind`` ("request" or "response") class, built when looked up."""
        return _ByApiKey(self, {d.api_key: d.name for d in self._decls.values() if d.kind == kind})


class _ByApiKey(Mapping):
    def __init__(self, classes: MessageClasses, names: dict[int, str]):
        self._classes, self._names = classes, names

    def __getitem__(self, api_key: int) -> Any:
        return self._classes[self._names[api_key]]

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
