"""Declaration types for Kafka messages: :class:`Message`, :class:`Field`, :class:`VersionRange`.

A message is declared once, as data (:class:`Message` holding :class:`Field` s), the way Kafka's
own ``common/message/*.json`` files and franz-go's kmsg do it.  :mod:`.structs` turns the
declarations into classes; :mod:`.bodies` encodes and decodes them, looking at each field's
version ranges (there is no per-version class).
"""
from __future__ import annotations

import re
from typing import Any, Callable

from ..dataclass import dataclass

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
        self.struct_class: Any = None   # the generated class (structs.py), set when classes are built
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
