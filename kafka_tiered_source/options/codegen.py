"""Writes :mod:`.fields` and :mod:`.read_fields` from the option table:
``python -m kafka_tiered_source.options.codegen``.

Each config (``ReadOptions``, ``FetcherConfig``, ``QuotaConfig``, ``ClientConfig``,
``ValuesConfig``) gets a generated ``<Config>Fields`` base: a plain frozen class with
``__slots__``, one attribute per row of the table with that ``field`` (typed by its parser: a
``Literal`` alias for an enumeration, ``| None`` without a default; defaulted to the row's
default, in table order), then the config's fields that are not one option each
(:data:`EXTRAS`), and the methods a frozen dataclass would have (``__init__`` and ``__repr__``
here; comparing, hashing, pickling, ``replace(**changes)`` and refusing assignment with
``dataclasses.FrozenInstanceError`` in their base, :class:`.frozen.Frozen`) and the ``FIELDS`` /
``OPTION_FIELDS`` name tuples.  They
are written out as code, not built by ``@dataclass`` at import: a new process builds ~190
fields' worth of methods otherwise, a measurable part of its cold start (BENCHMARKS.md, issue 36).
The hand-written configs derive from those bases (with ``__slots__ = ()``) and add behaviour.
``ReadOptionsFields`` goes to its own module, :mod:`.read_fields`, since it holds the other
configs.  It also writes the option reference in docs/options.md of a checkout.
tests/test_options_table.py fails while any of these files on disk differs from what this writes.
"""
from __future__ import annotations

import json
import os
import sys

from .table import KAFKA_OPTIONS, OPTIONS, Option, Parser, markdown_table

#: The configs with generated fields, in the order the module lists them.
CONFIGS = ("ReadOptions", "FetcherConfig", "QuotaConfig", "ClientConfig", "ValuesConfig")
HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "fields.py")
READ_PATH = os.path.join(HERE, "read_fields.py")

#: Each config's fields that are not one option each, after the option fields: whether they are
#: keyword-only, then (name, type, default expression or None for a required field).  Defaults
#: are evaluated once, in the generated module: immutable values only.
EXTRAS: dict[str, tuple[bool, tuple[tuple[str, str, str | None], ...]]] = {
    "ReadOptions": (True, (
        ("strategy", "Strategy", None),
        ("bootstrap_servers", "tuple[str, ...]", "()"),
        ("starting_offsets", "OffsetBound", "EarliestOffsets()"),
        ("ending_offsets", "OffsetBound", "LatestOffsets()"),
        ("isolation_level", "IsolationLevel", '"read_uncommitted"'),
        ("client_id", "str", '"kafka-tiered"'),
        ("kafka", "OptionMap", "OptionMap()"),
        ("storage", "FetcherConfig", "FetcherConfig()"),
        ("ignored", "tuple[str, ...]", "()"),                # accepted-but-ignored options, canonical names
        ("cost", "CostModel", "CostModel()"),                 # cost.*
        ("quota", "QuotaConfig", "QuotaConfig()"),            # quota.*
        ("streaming", "bool", "False"),                       # parsed for readStream (the rate limits apply)
        ("values", "ValuesConfig", "ValuesConfig()"))),       # key.format, value.format, the registry
    # remote.storage.<backend>.* and remote.storage.custom.*, full keys; secrets wrapped in Secret
    "FetcherConfig": (False, (("backend_options", "tuple[tuple[str, Any], ...]", "()"),)),
    "QuotaConfig": (False, ()),
    "ClientConfig": (True, (
        ("bootstrap_servers", "tuple[tuple[str, int], ...]", None),
        ("security_protocol", "str", '"PLAINTEXT"'),
        ("sasl_mechanism", "str", '"PLAIN"'),
        ("ssl_enabled_protocols", "tuple[str, ...]", "()"),
        ("oauth", "OAuthConfig | None", "None"),
        ("isolation_level", "int", "0"))),                    # client.READ_UNCOMMITTED
    # the reader schemas the driver resolved (kafka_tiered_source.values.readers); None until then
    "ValuesConfig": (False, (("readers", "Any", "None"),)),
}

_DOC = '''"""{what}
Generated from :mod:`.table` by ``python -m kafka_tiered_source.options.codegen``: edit the table
(or the codegen's EXTRAS), not this file."""
from __future__ import annotations

from typing import {typing}
{imports}'''

_FIELDS_IMPORTS = "\nfrom ..redact import Secret\nfrom .frozen import Frozen\nfrom .oauth import OAuthConfig\n"
_READ_IMPORTS = """
from ..model import EarliestOffsets, LatestOffsets, OffsetBound, Strategy
from .fields import {aliases}
from .frozen import Frozen
from .option_map import OptionMap
from .pricing import CostModel
from .quotas import QuotaConfig
from .storage import FetcherConfig
from .typed_values import ValuesConfig
"""


def fields_of(config: str) -> tuple[Option, ...]:
    return tuple(o for o in (*OPTIONS, *KAFKA_OPTIONS) if o.config == config)


def _aliases() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for o in (*OPTIONS, *KAFKA_OPTIONS):
        p = o.parse
        if isinstance(p, Parser) and p.alias is not None:
            if out.setdefault(p.alias, p.choices) != p.choices:
                raise ValueError(f"two enumerations are called {p.alias}")
    return out


def _wrap(items: list[str], lead: str, indent: str, width: int = 110) -> list[str]:
    """``items`` joined by ", " after ``lead``, broken into lines of at most ``width``."""
    lines, line = [], lead
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(line) + len(piece) + 1 > width and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += piece + " "
    lines.append(line.rstrip())
    return lines


def config_class(config: str) -> list[str]:
    """The generated ``<config>Fields`` class, as lines."""
    rows = fields_of(config)
    kw_only, extras = EXTRAS[config]
    names = [str(o.field) for o in rows] + [n for n, _, _ in extras]
    if len(set(names)) != len(names):
        raise ValueError(f"{config}: a field is declared twice")
    positional = [str(o.field) for o in rows] + ([] if kw_only else [n for n, _, _ in extras])
    out = ["", "", f"class {config}Fields(Frozen):",
           f'    """The fields of :class:`{config}`: one per option of the table, then the rest."""',
           *_wrap([f'"{n}"' for n in names], "    __slots__ = FIELDS = (", " " * 24)]
    out[-1] += ",)" if len(names) == 1 else ")"
    out += ["    #: those that are one option each",
            f"    OPTION_FIELDS: ClassVar[tuple[str, ...]] = FIELDS[:{len(rows)}]",
            *_wrap([f'"{n}"' for n in positional], "    __match_args__ = (", " " * 22)]   # as a dataclass's
    out[-1] += ",)" if len(positional) == 1 else ")"
    params = []
    for o in rows:
        if o.value_type.startswith("Any"):
            raise ValueError(f"option {o.name}: its parser does not say its type (use a Parser)")
        default = json.dumps(o.default) if isinstance(o.default, str) else repr(o.default)
        out += [f"    #: ``{o.name}``: {o.doc}", f"    {o.field}: {o.value_type}"]
        params.append(f"{o.field}: {o.value_type} = {default}")
    if extras:
        out.append("    # not one option each")
    if kw_only and extras:
        params.append("*")
    for name, kind, given in extras:
        out.append(f"    {name}: {kind}")
        if given is not None and given.endswith(")") and given != "()":
            given = f"_DEFAULT_{name.upper()}"     # built once, in the module (an immutable value)
        params.append(f"{name}: {kind}" + ("" if given is None else f" = {given}"))
    out += ["", *_wrap(params, "    def __init__(self, ", " " * 17)]
    out[-1] += ") -> None:"
    out.append("        _set = object.__setattr__")
    out += [f'        _set(self, "{n}", {n})' for n in names]
    out += ["        self.__post_init__()", "",
            "    def __post_init__(self) -> None:",
            '        """Checks of the whole config, run by ``__init__`` (as a dataclass runs its own)."""', "",
            "    def _values(self) -> tuple:",
            *_wrap([f"self.{n}" for n in names], "        return (", " " * 16)]
    out[-1] += ",)" if len(names) == 1 else ")"
    # a dataclass's repr: Name(field=value, ...) (a Secret's own repr redacts it)
    out += ["", "    def __repr__(self) -> str:", '        return (f"{type(self).__qualname__}("']
    out += [f'                f"{n}={{self.{n}!r}}{", " if i < len(names) - 1 else ")"}"' for i, n in enumerate(names)]
    out[-1] += ")"
    return out


def source() -> str:
    """The text of options/fields.py for the table as it is."""
    lines = [_DOC.format(what="The frozen configs' fields, one per row of the option table that has a ``field``, and\n"
                              "each config's others (all but :class:`ReadOptions`', in :mod:`.read_fields`).",
                         typing="Any, ClassVar, Literal", imports=_FIELDS_IMPORTS).rstrip("\n"), ""]
    for alias, choices in _aliases().items():
        lines.append(f"{alias} = Literal[{', '.join(json.dumps(c) for c in choices)}]")
    for config in CONFIGS[1:]:
        lines += config_class(config)
    return "\n".join(lines) + "\n"


def read_source() -> str:
    """The text of options/read_fields.py: :class:`ReadOptions`' fields."""
    types = [o.value_type for o in fields_of("ReadOptions")] + [k for _, k, _ in EXTRAS["ReadOptions"][1]]
    used = sorted({a for a in _aliases() if any(a in t.replace("|", " ").split() for t in types)})
    lines = [_DOC.format(what="The fields of :class:`.read.ReadOptions`: one per row of the option table for it, then the\n"
                              "others (the other configs among them).",
                         typing="ClassVar", imports=_READ_IMPORTS.format(aliases=", ".join(used))).rstrip("\n"), ""]
    lines += [f"_DEFAULT_{name.upper()} = {default}" for name, _, default in EXTRAS["ReadOptions"][1]
              if default is not None and default.endswith(")") and default != "()"]
    lines += config_class("ReadOptions")
    return "\n".join(lines) + "\n"


def sources() -> dict[str, str]:
    """Every generated module's path and text."""
    return {PATH: source(), READ_PATH: read_source()}


#: docs/options.md of a checkout: the option reference between its markers is markdown_table()
DOCS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "options.md")
BEGIN, END = "<!-- options:begin -->\n", "<!-- options:end -->"


def reference(page: str) -> str:
    """``page`` (docs/options.md's text) with the generated reference between its markers."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + BEGIN + markdown_table() + END + tail


def main() -> int:
    for path, text in sources().items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path} ({text.count(chr(10))} lines)")
    if os.path.exists(DOCS):          # a checkout (an installed package has no docs/)
        with open(DOCS, encoding="utf-8") as f:
            page = f.read()
        with open(DOCS, "w", encoding="utf-8") as f:
            f.write(reference(page))
        print(f"wrote the option reference in {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
