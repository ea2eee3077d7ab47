"""Writes :mod:`.fields` from the option table: ``python -m kafka_tiered_source.options.codegen``.

Each row with a ``field`` becomes an attribute of its config's ``<Config>Fields`` base class,
typed by its parser (a ``Literal`` alias for an enumeration, ``| None`` without a default) and
defaulted to the row's default, in table order.  The hand-written configs (``ReadOptions``,
``FetcherConfig``, ``QuotaConfig``, ``ClientConfig``) derive from those bases and add what is not
one option's value.  It also writes the option reference in docs/options.md of a checkout.
tests/test_options_table.py fails while either file on disk differs from what this writes.
"""
from __future__ import annotations

import json
import os
import sys

from .table import KAFKA_OPTIONS, OPTIONS, Option, Parser, markdown_table

#: The configs with generated fields, in the order the module lists them.
CONFIGS = ("ReadOptions", "FetcherConfig", "QuotaConfig", "ClientConfig", "ValuesConfig")
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fields.py")

_HEADER = '''"""The option-backed fields of the frozen configs, one per row of the option table that has a
``field``.  Generated from :mod:`.table` by ``python -m kafka_tiered_source.options.codegen``:
edit the table, not this file."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
{imports}
'''


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


def source() -> str:
    """The text of options/fields.py for the table as it is."""
    secrets = any(o.value_type.startswith("Secret") for c in CONFIGS for o in fields_of(c))
    lines = [_HEADER.format(imports="\nfrom ..redact import Secret\n" if secrets else "").rstrip("\n"), ""]
    for alias, choices in _aliases().items():
        lines.append(f"{alias} = Literal[{', '.join(json.dumps(c) for c in choices)}]")
    for config in CONFIGS:
        lines += ["", "", "@dataclass(frozen=True)", f"class {config}Fields:",
                  f'    """The fields of :class:`{config}` that are one option each."""']
        for o in fields_of(config):
            if o.value_type.startswith("Any"):
                raise ValueError(f"option {o.name}: its parser does not say its type (use a Parser)")
            lines.append(f"    #: ``{o.name}``: {o.doc}")
            default = json.dumps(o.default) if isinstance(o.default, str) else repr(o.default)
            lines.append(f"    {o.field}: {o.value_type} = {default}")
    return "\n".join(lines) + "\n"


#: docs/options.md of a checkout: the option reference between its markers is markdown_table()
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "docs", "options.md")
BEGIN, END = "<!-- options:begin -->\n", "<!-- options:end -->"


def reference(page: str) -> str:
    """``page`` (docs/options.md's text) with the generated reference between its markers."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + BEGIN + markdown_table() + END + tail


def main() -> int:
    text = source()
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {PATH} ({text.count(chr(10))} lines)")
    if os.path.exists(DOCS):          # a checkout (an installed package has no docs/)
        with open(DOCS, encoding="utf-8") as f:
            page = f.read()
        with open(DOCS, "w", encoding="utf-8") as f:
            f.write(reference(page))
        print(f"wrote the option reference in {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
