"""One encoder/decoder for every declared message body, requests and responses alike.

For each (struct class, version) the declaration is compiled once into a plan: the ordered
regular fields with their reader/writer closures and a tag -> field map.  Classic versions use
int16/int32 length prefixes; flexible versions use compact (uvarint) lengths and end every
struct with a tagged-field section.  Tagged fields are written only when they differ from their
default (Kafka's rule), in ascending tag order.  Unknown tags are kept in ``unknown_tags`` (tag
-> bytes) and written back, or dropped with ``keep_unknown_tags=False``.

``records`` fields decode to a memoryview into the frame (no copy); keep the frame alive while
you use them.
"""
from __future__ import annotations

import struct as _struct
import threading

from ..errors import ProtocolError, UnsupportedVersionError
from . import primitives as P
from .schema import Field

__all__ = ["encode_body", "decode_body", "plan_of", "check_version", "as_view"]




_INT_CODECS = {
    "int8": (P.read_int8, P.write_int8),
    "int16": (P.read_int16, P.write_int16),
    "uint16": (P.read_uint16, P.write_uint16),
    "int32": (P.read_int32, P.write_int32),
    "uint32": (P.read_uint32, P.write_uint32),
    "int64": (P.read_int64, P.write_int64),
    "float64": (P.read_float64, P.write_float64),
    "bool": (P.read_bool, P.write_bool),
    "uuid": (P.read_uuid, P.write_uuid),
}




def _elem_codec(f: Field, etype: str, v: int, flex: bool, nullable: bool, keep: bool):
    """(reader, writer) for one value of type ``etype`` (no array wrapper)."""
    compact = flex and not f.never_compact
    if etype in _INT_CODECS:
        return _INT_CODECS[etype]
    if etype in ("string", "bytes", "records"):
        kind = "string" if etype == "string" else "bytes"
        reader = {"string": P.read_string, "bytes": P.read_bytes,
                  "records": P.read_bytes_view}[etype]
        writer = P.write_string if etype == "string" else P.write_bytes

        def rd(buf, pos):
            val, pos = reader(buf, pos, compact)
            if val is None and not nullable:
                raise ProtocolError(f"null {kind} for non-nullable {f.name} (version {v})")
            return val, pos

        def wr(out, val):
            if val is None and not nullable:
                raise ProtocolError(f"{f.name} is null but not nullable in version {v}")
            writer(out, val, compact)
        return rd, wr
    # nested struct
    if f.struct_class is None:
        raise ProtocolError(f"{f.name}: struct type {etype} has no class (its message was not built)")
    plan = plan_of(f.struct_class, v, flex, keep)
    if not nullable:
        def write_required(out, val):
            if val is None:
                raise ProtocolError(f"{f.name} is null but not nullable in version {v}")
            plan.write(out, val)
        return plan.read, write_required

    # Nullable structs carry an int8 presence marker (-1 null, 1 present), as Kafka does.
    def read_nullable(buf, pos):
        marker, pos = P.read_int8(buf, pos)
        if marker < 0:
            return None, pos
        return plan.read(buf, pos)

    def write_nullable(out, val):
        if val is None:
            out.append(0xFF)
        else:
            out.append(1)
            plan.write(out, val)
    return read_nullable, write_nullable


def _field_codec(f: Field, v: int, flex: bool, keep: bool):
    nullable = f.is_nullable(v)
    if not f.is_array:
        return _elem_codec(f, f.type, v, flex, nullable, keep)
    erd, ewr = _elem_codec(f, f.elem_type, v, flex, False, keep)
    compact = flex

    def rd(buf, pos):
        n, pos = P.read_array_length(buf, pos, compact)
        if n < 0:
            if not nullable:
                raise ProtocolError(f"null array for non-nullable {f.name} (version {v})")
            return None, pos
        items: list = []
        append = items.append
        for _ in range(n):
            item, pos = erd(buf, pos)
            append(item)
        return items, pos

    def wr(out, val):
        if val is None:
            if not nullable:
                raise ProtocolError(f"{f.name} is null but not nullable in version {v}")
            P.write_array_length(out, None, compact)
            return
        P.write_array_length(out, len(val), compact)
        for item in val:
            ewr(out, item)
    return rd, wr


class _Plan:
    __slots__ = ("cls", "version", "flex", "keep", "regular", "tagged", "absent", "read", "write")

    def __init__(self, cls, v, flex, keep):
        self.keep = keep
        self.cls = cls
        self.version = v
        self.flex = flex
        self.regular = []
        self.tagged = {}
        self.absent = []

    def build(self):
        cls, v, flex, keep = self.cls, self.version, self.flex, self.keep
        for f in cls.FIELDS:
            if not f.in_version(v):
                self.absent.append(f)
            elif f.is_tagged(v):
                if flex:
                    rd, wr = _field_codec(f, v, True, keep)
                    self.tagged[f.tag] = (f, rd, wr)
                else:
                    self.absent.append(f)
            else:
                rd, wr = _field_codec(f, v, flex, keep)
                self.regular.append((f.attr, rd, wr))
        tagged_sorted = sorted(self.tagged.items())
        regular = tuple(self.regular)
        absent = tuple(self.absent)
        tagged = self.tagged
        name = cls.__name__

        absent_specs = tuple((f.attr, *f.default_spec()) for f in absent)
        tagged_specs = tuple((f.attr, *f.default_spec()) for _, (f, _, _) in tagged_sorted)
        new = cls.__new__
        read_uvarint = P.read_uvarint

        def read(buf, pos):
            obj = new(cls)
            attr = None
            try:
                for attr, rd, _ in regular:
                    val, pos = rd(buf, pos)
                    setattr(obj, attr, val)
                attr = None
                for a, factory, const in absent_specs:
                    setattr(obj, a, factory() if factory is not None else const)
                unknown = None
                if flex:
                    # every tagged field starts at its default; the ones on the wire replace it
                    for a, factory, const in tagged_specs:
                        setattr(obj, a, factory() if factory is not None else const)
                    if buf[pos] == 0:            # the usual case: an empty tagged-field section
                        pos += 1
                    else:
                        # the section read in place (P.read_tagged_fields' rules), each value
                        # from the frame itself: no list and no view per field
                        start = pos
                        count, pos = read_uvarint(buf, pos)
                        last = -1
                        for _ in range(count):
                            tag, pos = read_uvarint(buf, pos)
                            if tag <= last:
                                raise ProtocolError(f"tagged fields out of order (tag {tag} after {last}) in "
                                                    f"section at byte position {start}")
                            last = tag
                            size, pos = read_uvarint(buf, pos)
                            end = pos + size
                            if end > len(buf):
                                raise ProtocolError(f"frame ends at byte {len(buf)}, needed {size} more byte(s) "
                                                    f"at byte position {pos}")
                            entry = tagged.get(tag)
                            if entry is None:
                                if keep:
                                    if unknown is None:
                                        unknown = {}
                                    unknown[tag] = bytes(buf[pos:end])
                                pos = end
                                continue
                            f, rd, _ = entry
                            attr = f.attr
                            val, used = rd(buf, pos)
                            if used != end:
                                raise ProtocolError(f"tagged field {tag} declares {size} bytes, value used {used - pos}")
                            setattr(obj, attr, val)
                            pos = end
                        attr = None
                obj.unknown_tags = unknown
            except ProtocolError as exc:
                raise ProtocolError(f"{name}{'.' + attr if attr else ''}: {exc}") from None
            except (_struct.error, UnicodeDecodeError, ValueError, IndexError) as exc:
                raise ProtocolError(f"{name}{'.' + attr if attr else ''}: {exc} (byte position {pos})") from None
            return obj, pos

        def write(out, obj):
            attr = None
            try:
                for attr, _, wr in regular:
                    wr(out, getattr(obj, attr))
                attr = None
                if flex:
                    items = []
                    for tag, (f, _, wr) in tagged_sorted:
                        val = getattr(obj, f.attr)
                        if f.is_default(val):
                            continue
                        attr = f.attr
                        tmp = bytearray()
                        wr(tmp, val)
                        items.append((tag, tmp))
                    attr = None
                    unknown = obj.unknown_tags
                    if unknown:
                        items.extend((t, d) for t, d in unknown.items() if t not in tagged)
                    P.write_tagged_fields(out, items)
            except ProtocolError as exc:
                raise ProtocolError(f"{name}{'.' + attr if attr else ''}: {exc}") from None
            except AttributeError as exc:
                raise ProtocolError(f"{name}: expected a {name} object, got {type(obj).__name__} ({exc})") from None
            except (_struct.error, TypeError, ValueError, OverflowError) as exc:
                raise ProtocolError(f"{name}{'.' + attr if attr else ''}: bad value: {exc}") from None

        self.read = read
        self.write = write
        return self


_PLANS: dict = {}
# Plans are built lazily on first use, possibly from several client threads at once; a plan is
# published only once fully built.  Re-entrant because building a plan builds its nested ones.
_PLAN_LOCK = threading.RLock()


def plan_of(cls, v: int, flex: bool, keep: bool = True) -> _Plan:
    key = (cls, v, flex, keep)
    p = _PLANS.get(key)
    if p is None:
        with _PLAN_LOCK:
            p = _PLANS.get(key)
            if p is None:
                p = _Plan(cls, v, flex, keep).build()
                _PLANS[key] = p
    return p


def check_version(cls, version: int):
    if not isinstance(version, int) or version not in cls.VALID_VERSIONS:
        raise UnsupportedVersionError(
            f"{cls.NAME} version {version} is not supported (valid {cls.VALID_VERSIONS})")


def encode_body(msg, version: int) -> bytes:
    """The message body alone (no header, no size prefix)."""
    cls = type(msg)
    check_version(cls, version)
    out = bytearray()
    plan_of(cls, version, cls.is_flexible(version)).write(out, msg)
    return bytes(out)


def as_view(data):
    return data if isinstance(data, memoryview) else memoryview(data)


def decode_body(cls, data, version: int, *, keep_unknown_tags: bool = True, pos: int = 0,
                strict: bool = True):
    """Decode a whole body.  With ``strict`` trailing bytes are an error (they usually mean a
    version mismatch); without, they are ignored as Kafka's broker ignores them."""
    check_version(cls, version)
    buf = as_view(data)
    obj, end = plan_of(cls, version, cls.is_flexible(version), keep_unknown_tags).read(buf, pos)
    if strict and end != len(buf):
        raise ProtocolError(f"{cls.NAME} v{version}: {len(buf) - end} unexpected trailing byte(s) "
                            f"at byte position {end}")
    return obj
