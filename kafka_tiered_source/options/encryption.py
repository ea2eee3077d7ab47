"""``remote.storage.aiven.encryption.key.pairs``: where the private key of each key pair is.

Aiven's plugin wraps each segment's AES data key with the public key of its active key pair and
writes ``{keyPairId}:{base64}`` into the manifest; it keeps older pairs configured
(``encryption.key.pairs``) so segments written before a rotation stay readable.  A reader needs
the private key of every pair whose segments it reads, so the option names them by id:

    remote.storage.aiven.encryption.key.pairs = k2026=file:/etc/kafka/k2026-private.pem,k2025=env:TIERED_K2025

``file:PATH`` is a PEM file (PKCS#8, as the plugin's ``...private.key.file``; PKCS#1 is read
too) on every host that reads (driver and executors); ``env:NAME`` an environment variable
holding the PEM text (set it on the executors too, e.g. ``spark.executorEnv.NAME``).  The key
itself is never an option value: an option is logged, shown in plans and shipped to every task,
so a value holding PEM text is refused, without being echoed.
"""
from __future__ import annotations

import re

from ..dataclass import dataclass
from ..errors import ConfigError

OPTION = "remote.storage.aiven.encryption.key.pairs"
SOURCES = ("file", "env")
# Kafka's ConfigDef.Type.LIST splits ids on commas; the ids themselves are free text.
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"   # compiled when first used (re caches it): not at import (issue 36)


@dataclass(frozen=True)
class KeyPairSource:
    """Where the private key of key pair ``key_id`` comes from: ``kind`` ``file`` or ``env``."""
    key_id: str
    kind: str
    where: str

    def describe(self) -> str:
        return f"{self.kind}:{self.where}"


def parse_key_pairs(label: str, name: str, raw) -> tuple[KeyPairSource, ...]:
    """Parse the option's value; errors name the entry by its position and key-pair id only."""
    text = str(raw)
    if "-----BEGIN" in text or "PRIVATE KEY" in text.upper():
        raise ConfigError(f"{label} must say where each private key is (id=file:PATH or id=env:NAME), "
                          "never hold the key itself: option values are logged and shipped to every "
                          "task", option=name)
    out: list[KeyPairSource] = []
    seen: set[str] = set()
    entries = [e.strip() for e in text.split(",")]
    if not any(entries):
        raise ConfigError(f"{label} is empty; give id=file:PATH or id=env:NAME per key pair", option=name)
    for i, entry in enumerate(entries, 1):
        if not entry:
            raise ConfigError(f"{label}: entry {i} is empty (a stray comma?)", option=name)
        key_id, eq, source = entry.partition("=")
        key_id = key_id.strip()
        if not eq or not key_id:
            raise ConfigError(f"{label}: entry {i} is not id=file:PATH or id=env:NAME", option=name)
        if key_id in seen:
            raise ConfigError(f"{label}: key pair id {key_id!r} is given twice", option=name)
        kind, colon, where = source.strip().partition(":")
        kind = kind.strip().lower()
        where = where.strip()
        if not colon or kind not in SOURCES or not where:
            raise ConfigError(f"{label}: the private key of key pair {key_id!r} must come from "
                              f"file:PATH or env:NAME", option=name)
        if kind == "env" and not re.match(_ENV_NAME, where):
            raise ConfigError(f"{label}: key pair {key_id!r}: {where!r} is not an environment "
                              f"variable name", option=name)
        seen.add(key_id)
        out.append(KeyPairSource(key_id, kind, where))
    import importlib.util
    if importlib.util.find_spec("cryptography") is None:
        raise ConfigError(f"{label}: reading encrypted segments needs the cryptography package; install "
                          f"it with: pip install kafka-tiered-source[encryption]", option=name)
    return tuple(out)
