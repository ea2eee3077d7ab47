"""The ``kafka-tiered`` command line.

Subcommands are registered with :func:`command`: a function that receives the argparse
sub-parser to add its options and returns the function that runs it (``run(args) -> exit
code``).  ``main`` builds the parser from the registry, so a new subcommand (``broker``, ...) is
one decorated function in its own module of this package plus its name in
:data:`SUBCOMMAND_MODULES`.  The command line is the top of the layout: it may import any part
(the ``broker`` command starts the embedded broker of :mod:`kafka_tiered_source.testing`).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable

_REGISTRY: dict[str, tuple[str, Callable]] = {}

# Modules that register subcommands when imported (besides this one).
SUBCOMMAND_MODULES: list[str] = ["kafka_tiered_source.cli.dump", "kafka_tiered_source.cli.broker",
                                  "kafka_tiered_source.cli.estimate", "kafka_tiered_source.cli.segments",
                                  "kafka_tiered_source.cli.export"]


def command(name: str, help: str):
    """Register ``setup(parser) -> run`` as subcommand ``name``."""
    def register(setup: Callable):
        _REGISTRY[name] = (help, setup)
        return setup
    return register


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's ``RawDescriptionHelpFormatter``, its width found as ``shutil.get_terminal_size``
    finds it without importing ``shutil``: argparse makes a formatter for every argument added,
    and its own ``import shutil`` (with zlib, bz2, lzma, fnmatch) was ~10 M instructions of every
    command's start (issue 36)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            width = terminal_columns() - 2   # as HelpFormatter does with shutil's
        super().__init__(prog, indent_increment, max_help_position, width)


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    try:
        lines = int(os.environ["LINES"])
    except (KeyError, ValueError):
        lines = 0
    if columns <= 0 or lines <= 0:
        try:
            size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            size = os.terminal_size((80, 24))
        if columns <= 0:
            columns = size.columns or 80
    return columns


def examples(*lines: str) -> str:
    """A sub-parser's epilog: ``examples:`` and one command per line (a ``#`` comment may
    follow).  ``kafka-tiered --help`` shows the first example of every subcommand."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of ``only`` alone (``main`` when the command line
    names one): ``kafka-tiered estimate`` then imports neither the embedded broker's modules
    nor ``export``'s, and pays only for its own (issue 36's cold start)."""
    for mod in SUBCOMMAND_MODULES if only is None else [f"{__name__}.{only}"]:
        importlib.import_module(mod)
    parser = argparse.ArgumentParser(prog="kafka-tiered", formatter_class=Formatter,
                                     description="Read Kafka topics out of tiered storage.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    firsts = []
    for name, (help, setup) in sorted(_REGISTRY.items()):
        if only is not None and name != only:
            continue
        p = sub.add_parser(name, help=help, description=help,
                           formatter_class=Formatter)
        p.set_defaults(_run=setup(p))
        shown = (p.epilog or "").splitlines()[1:2]   # a subcommand's epilog is examples(...)
        firsts += [line.strip() for line in shown]
    parser.epilog = examples(*firsts, "kafka-tiered COMMAND --help            # each command's options and examples")
    return parser


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    # A command named first is the only parser built (its module registers it); anything else
    # (no command, --help, a misspelt one) gets the whole parser and its usage and errors.
    only = given[0] if given and f"{__name__}.{given[0]}" in SUBCOMMAND_MODULES else None
    args = build_parser(only).parse_args(argv)
    try:
        return args._run(args)
    except BrokenPipeError:   # `kafka-tiered dump x.log | head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
