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
    parser = argparse.ArgumentParser(prog="kafka-tiered", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Read Kafka topics out of tiered storage.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    firsts = []
    for name, (help, setup) in sorted(_REGISTRY.items()):
        if only is not None and name != only:
            continue
        p = sub.add_parser(name, help=help, description=help,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
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
