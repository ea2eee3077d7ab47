"""Driver side: the reader schema of each typed side, resolved once before any task and shipped
inside the options (``ValuesConfig.readers``), so the column types are fixed when the DataFrame
(or scan) is made and executors only ever ask the registry for writer schemas by id.

Where a side's reader schema comes from, first match wins:

* ``<side>.schema``: the text given;
* ``<side>.schema.subject``: that subject;
* else the subject of ``<side>.subject.name.strategy``: ``<topic>-<side>``
  (TopicNameStrategy, the default), ``<record>`` (RecordNameStrategy) or ``<topic>-<record>``
  (TopicRecordNameStrategy), ``<record>`` being ``<side>.schema.record.name``;

at ``<side>.schema.version`` (default: the latest version).  The topic strategies need the
topics' names from ``subscribe`` or ``assign`` (a ``subscribePattern`` read names its subject
or schema outright), and every topic read must have the same reader schema: one column has one
type.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dataclass import dataclass
from ..errors import ConfigError, SchemaError
from ..model import Assign, Subscribe
from ..options.typed_values import SIDES, SideConfig, ValuesConfig

if TYPE_CHECKING:       # formats and the registry client (numpy, HTTP) only for typed reads
    from .formats import ReaderSchema
    from .registry import RegistryClient


@dataclass(frozen=True)
class Readers:
    key: ReaderSchema | None = None
    value: ReaderSchema | None = None


def _topics(options: Any) -> tuple[str, ...] | None:
    strategy = options.strategy
    if isinstance(strategy, Subscribe):
        return tuple(strategy.topics)
    if isinstance(strategy, Assign):
        return tuple(dict.fromkeys(strategy.topics))
    return None


def subjects(side: SideConfig, topics: tuple[str, ...] | None) -> list[str]:
    """The subjects the side's reader schema is looked up in (one per topic read, for the topic
    strategies)."""
    if side.subject is not None:
        return [side.subject]
    if side.subject_strategy == "RecordNameStrategy":
        return [str(side.record_name)]
    if topics is None:
        raise ConfigError(f"Option '{side.side}.subject.name.strategy' is {side.subject_strategy}, which names the "
                          f"subject after the topic, but subscribePattern does not say which topics are read: give "
                          f"'{side.side}.schema.subject' or '{side.side}.schema'", option=f"{side.side}.schema.subject")
    if side.subject_strategy == "TopicRecordNameStrategy":
        return [f"{t}-{side.record_name}" for t in topics]
    return [f"{t}-{side.side}" for t in topics]


def reader_schema(side: SideConfig, client: RegistryClient | None, topics: tuple[str, ...] | None) -> ReaderSchema:
    from .formats import ReaderSchema, reader_type
    if side.schema is not None:
        typ = reader_type(side.format, side.schema, {}, side.record_name)
        return ReaderSchema(side.side, side.format, side.schema, typ, record_name=side.record_name)
    assert client is not None
    found: dict[tuple[str, tuple], list[tuple[str, Any]]] = {}
    for subject in subjects(side, topics):
        got = client.version(subject, side.version, side.format)
        if got.kind != side.format:
            raise SchemaError(f"subject {subject} holds a {got.kind} schema but {side.side}.format is {side.format}",
                              schema_id=got.id)
        found.setdefault((got.text, got.references), []).append((subject, got))
    if len(found) > 1:
        shown = "; ".join(f"{', '.join(f'{s} (id {g.id})' for s, g in subs)}" for subs in found.values())
        raise ConfigError(f"the topics read have different {side.side} reader schemas ({shown}): one column has one "
                          f"type; read them apart, or give '{side.side}.schema.subject' or '{side.side}.schema'",
                          option=f"{side.side}.schema.subject")
    (subject, got), = [subs[0] for subs in found.values()]
    refs = {name: s.text for name, s in client.references(got).items()}
    typ = reader_type(side.format, got.text, refs, side.record_name, got.id)
    return ReaderSchema(side.side, side.format, got.text, typ, tuple(sorted(refs.items())), got.id, subject,
                        got.version, side.record_name)


def resolve_readers(options: Any) -> Any:
    """``options`` (a ReadOptions) with its reader schemas resolved (unchanged when nothing is
    typed by a registry format, or already resolved)."""
    config: ValuesConfig = options.values
    if config.readers is not None or not any(config.side(s).registry for s in SIDES):
        return options
    try:
        import numpy  # noqa: F401  (framing and the decoders need it)
    except ImportError:
        sides = [s for s in SIDES if config.side(s).registry]
        typed = ", ".join(f"{s}.format={config.side(s).format}" for s in sides)
        raise ConfigError(f"{typed} needs numpy, which is not installed: pip install "
                          f"'kafka-tiered-source[values]'", option=f"{sides[0]}.format") from None
    from .registry import registry_client
    client = None
    if any(config.side(s).registry and config.side(s).schema is None for s in SIDES):
        client = registry_client(config, sasl_of(options))
    topics = _topics(options)
    found = {s: reader_schema(config.side(s), client, topics) for s in SIDES if config.side(s).registry}
    return options.replace(values=config.replace(readers=Readers(**found)))


def sasl_of(options: Any) -> tuple[str, str] | None:
    """The Kafka client's SASL user and password (basic.auth.credentials.source=SASL_INHERIT)."""
    if options.values.basic_auth_credentials_source != "SASL_INHERIT":
        return None
    from ..options.read import client_properties
    from ..options.client import ClientConfig
    cfg = ClientConfig.from_properties(client_properties(options))
    return cfg.sasl_credentials() if cfg.uses_sasl else None
