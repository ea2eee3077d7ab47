"""The ``kafka.*`` pass-through settings of a read: an immutable mapping whose repr hides secrets."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator

from ..redact import REDACTED, is_secret_key


class OptionMap(Mapping):
    """An immutable, picklable ``str -> str`` mapping whose repr hides secret values.

    Used for the ``kafka.*`` pass-through settings.
    """

    __slots__ = ("_items", "_dict")
    _items: tuple[tuple[str, str], ...]
    _dict: dict[str, str]

    def __init__(self, items=()):
        pairs = tuple(sorted(dict(items).items()))
        object.__setattr__(self, "_items", pairs)
        object.__setattr__(self, "_dict", dict(pairs))

    def __getitem__(self, key):
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._items)

    def __setattr__(self, name, value):
        raise AttributeError("OptionMap is immutable")

    def __eq__(self, other):
        if isinstance(other, OptionMap):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __hash__(self):
        return hash(self._items)

    def __reduce__(self):
        return (OptionMap, (self._items,))

    def redacted(self) -> dict:
        return {k: (REDACTED if is_secret_key(k) else v) for k, v in self._items}

    def __repr__(self) -> str:
        return f"OptionMap({self.redacted()!r})"

    __str__ = __repr__
