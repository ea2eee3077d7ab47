"""``get_logger(name)``: ``logging.getLogger(name)`` for a module that logs now and then, without
importing ``logging`` until a record could be emitted (issue 36's cold start).

Why: ``import logging`` brings ``traceback``, ``linecache``, ``tokenize``, ``string``, ``weakref``
and ``threading``: ~20 M instructions, ~10 ms of a new process's first plan, paid by every module
that keeps a logger even when it never logs.

While no one has imported ``logging``, nothing has configured it: the root logger is at WARNING
with no handler, so a DEBUG or INFO record would be dropped; here it is dropped without importing
anything.  A WARNING or higher record, or any record once ``logging`` is imported (an application
that configures logging imports it), goes to ``logging.getLogger(name)`` as it would have.
"""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["INFO", "WARNING", "get_logger"]

INFO, WARNING = 20, 30   # logging.INFO, logging.WARNING


class _Logger:
    __slots__ = ("name", "_logger")

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: Any = None

    @property
    def logger(self) -> Any:
        """The ``logging.Logger`` itself (``logging`` imported if no one has)."""
        if self._logger is None:
            import logging
            self._logger = logging.getLogger(self.name)
        return self._logger

    def isEnabledFor(self, level: int) -> bool:   # noqa: N802 - logging.Logger's name
        if "logging" in sys.modules:
            return self.logger.isEnabledFor(level)
        return level >= WARNING   # unconfigured: the root logger's level

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        if "logging" in sys.modules:   # otherwise unconfigured: DEBUG is below its WARNING
            self.logger.debug(msg, *args, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        if "logging" in sys.modules:   # otherwise unconfigured: INFO is below its WARNING
            self.logger.info(msg, *args, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.warning(msg, *args, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.error(msg, *args, **kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.exception(msg, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<logger {self.name} (logging {'imported' if 'logging' in sys.modules else 'not imported yet'})>"


def get_logger(name: str) -> _Logger:
    """``logging.getLogger(name)``'s ``debug``, ``info``, ``warning``, ``error`` and ``exception``."""
    return _Logger(name)
