"""What every generated config (:mod:`.fields`, :mod:`.read_fields`) does alike: compare, hash,
pickle and copy by its fields' values, and refuse assignment, as a frozen dataclass does.  The
generated class holds the rest: ``__slots__``, ``FIELDS``, ``__init__``, ``_values``, ``__repr__``."""
from __future__ import annotations

from typing import Any, ClassVar, TypeVar

_T = TypeVar("_T", bound="Frozen")


class Frozen:
    """A frozen config: equal to another of its class with equal fields, hashable, picklable."""
    __slots__ = ()
    #: every field's name, in order
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Frozen) and other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError   # here: `dataclasses` imports `inspect` (cold start)
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> tuple:
        return self._values()

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.FIELDS, state, strict=True):
            object.__setattr__(self, name, value)

    def replace(self: _T, **changes: Any) -> _T:
        """A copy with ``changes`` (by field name), built and checked as a new one is
        (``dataclasses.replace``)."""
        values = dict(zip(self.FIELDS, self._values(), strict=True))
        values.update(changes)
        return type(self)(**values)
