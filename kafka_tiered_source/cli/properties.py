"""Java ``.properties`` files, as Kafka's tools take them (``--command-config client.properties``,
a broker's ``server.properties``): ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!``
comments; a trailing backslash continues the line (how ``sasl.jaas.config`` is usually split);
``\\t \\n \\r \\f \\uXXXX`` escapes, as java.util.Properties.load reads them.  Keeping secrets in a
file keeps them off the command line, where other users of the machine can read them."""
from __future__ import annotations

from ..errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _unescape(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            code = text[i + 2:i + 6]
            if len(code) != 4 or any(c not in "0123456789abcdefABCDEF" for c in code):
                raise ConfigError(f"{where}: malformed \\uXXXX escape", option="--command-config")
            out.append(chr(int(code, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def parse_properties(text: str, where: str = "properties") -> dict[str, str]:
    """The key/value pairs of a properties text (later keys win, as in Java)."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=: \t\f":
                break
            i += 1
        key, rest = line[:i], line[i:]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        out[_unescape(key, where)] = _unescape(rest, where)
    return out


def read_properties(path: str, option: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read(), path)
    except OSError as exc:
        raise ConfigError(f"{option} {path!r} cannot be read: {exc.strerror or exc}", option=option) from None
