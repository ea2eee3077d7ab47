"""Executor side: a batch of records in Spark's Kafka schema -> the same batch with typed keys
and values (:func:`output_schema` in ``columns.py`` says which columns).

Per typed column, a batch at a time: the framing of every row is read at once
(:func:`.framing.split`), rows are grouped by schema id, each group is decoded by its writer
schema resolved to the reader schema (one :class:`~.formats.Resolver` per reader and writer id
per process; the writer schema fetched once per id per process by the registry client), and the
groups' arrays are put back in row order with one ``take``.  A row that cannot be decoded (bad
framing, an id the registry does not have, a registry that is down, a malformed payload) fails the
read under ``mode=FAILFAST`` (:class:`ValueDecodeError`, naming topic, partition, offset and
schema id) and is null under ``PERMISSIVE``, with its bytes in ``corruptKey``/``corruptValue``.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import KafkaTieredError, SchemaError, ValueDecodeError
from ..options.typed_values import ValuesConfig
from . import framing
from .columns import output_schema
from .formats import ProtobufResolver, ReaderSchema, Resolver, resolver
from .registry import RegistryClient, registry_client

_resolvers: dict[tuple, Resolver | SchemaError] = {}
_resolvers_lock = threading.Lock()


def _resolver(client: RegistryClient, reader: ReaderSchema, schema_id: int) -> Resolver:
    """The writer schema ``schema_id`` resolved to ``reader``, made once per process (a schema
    that cannot be resolved is kept as its error: it will not resolve later either)."""
    key = (client.urls, reader, schema_id)
    with _resolvers_lock:
        got = _resolvers.get(key)
    if got is None:
        writer = client.schema(schema_id, reader.format)
        refs = {name: s.text for name, s in client.references(writer).items()}
        try:
            got = resolver(reader, writer, refs)
        except SchemaError as exc:
            got = exc
        with _resolvers_lock:
            if len(_resolvers) > 4096:
                _resolvers.clear()
            _resolvers[key] = got
    if isinstance(got, SchemaError):
        raise got
    return got


class SideDecoder:
    """Decodes one column (``key`` or ``value``) of batches."""

    def __init__(self, reader: ReaderSchema | None, fmt: str, client: RegistryClient | None):
        self.reader = reader
        self.format = fmt
        self.client = client
        self.failed: dict[int, str] = {}     # ids whose writer schema could not be had, this task

    def decode(self, col: pa.Array) -> tuple[pa.Array, pa.Array | None, list[tuple[int, int | None, str]]]:
        """(typed column, schema ids or None, bad rows as (row, schema id, reason))."""
        if self.format == "string":
            return _strings(col)
        assert self.reader is not None and self.client is not None
        n = len(col)
        frames = framing.split(col)
        typ = self.reader.arrow_type
        bad: list[tuple[int, int | None, str]] = []
        for code, reason in framing.REASONS.items():
            for row in np.nonzero(frames.status == code)[0].tolist():
                bad.append((row, None, reason))
        ok = frames.status == framing.OK
        ids_valid = ok.copy()
        pieces: list[pa.Array] = []
        order: list[np.ndarray] = []
        framed_rows = np.nonzero(ok)[0].astype(np.int32)
        framed_ids = frames.schema_id[framed_rows]
        for sid in np.unique(framed_ids).tolist():
            rows = framed_rows[framed_ids == sid]
            got = self._group(col, rows, int(sid), bad)
            if got is not None:
                pieces.append(got[0])
                order.append(got[1])
        done = np.concatenate(order) if order else np.zeros(0, np.int32)
        rest = np.setdiff1d(np.arange(n, dtype=np.int32), done, assume_unique=True)
        if len(rest):
            pieces.append(pa.nulls(len(rest), typ))
            order.append(rest)
        if not pieces:
            typed = pa.array([], typ)
        else:
            whole = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
            position = np.concatenate(order) if len(order) > 1 else order[0]
            if np.array_equal(position, np.arange(n)):
                typed = whole
            else:
                inverse = np.empty(n, np.int32)
                inverse[position] = np.arange(n, dtype=np.int32)
                typed = whole.take(pa.array(inverse))
        ids = pa.array(frames.schema_id, pa.int32(), mask=~ids_valid)
        return typed, ids, bad

    def _group(self, col: pa.Array, rows: np.ndarray, sid: int,
               bad: list[tuple[int, int | None, str]]) -> tuple[pa.Array, np.ndarray] | None:
        """The decoded rows of one schema id and which rows they are (None when none could be
        decoded: they are all in ``bad``)."""
        assert self.reader is not None and self.client is not None
        reason = self.failed.get(sid)
        res: Resolver | None = None
        if reason is None:
            try:
                res = _resolver(self.client, self.reader, sid)
            except KafkaTieredError as exc:
                reason = f"{type(exc).__name__}: {exc}"
                self.failed[sid] = reason
        if res is None:
            bad.extend((row, sid, str(reason)) for row in rows.tolist())
            return None
        if isinstance(res, ProtobufResolver):
            skips, indexes, errors = framing.message_indexes(col, rows)
            keep = np.ones(len(rows), bool)
            for i, err in enumerate(errors):
                found = indexes[i]
                if err is None and found is not None:
                    try:
                        res.check(found)
                    except SchemaError as exc:
                        err = str(exc)
                if err is not None:
                    keep[i] = False
                    bad.append((int(rows[i]), sid, err))
            if not keep.all():
                rows, skips = rows[keep], skips[keep]
                if not len(rows):
                    return None
        else:
            skips = np.full(len(rows), framing.HEADER, np.int32)
        out = res.decode(col, rows, skips)
        bad.extend((int(rows[i]), sid, why) for i, why in out.bad)
        if len(out.array) != len(rows):   # a resolver's contract broken: never hand Spark a wrong batch
            raise SchemaError(f"decoding schema id {sid} gave {len(out.array)} values for {len(rows)} records",
                              schema_id=sid)
        return out.array, rows


def _strings(col: pa.Array) -> tuple[pa.Array, None, list[tuple[int, int | None, str]]]:
    try:
        return col.cast(pa.string()), None, []
    except pa.ArrowInvalid:
        pass
    out: list[str | None] = []
    bad: list[tuple[int, int | None, str]] = []
    for row, raw in enumerate(col.to_pylist()):
        try:
            out.append(None if raw is None else raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            out.append(None)
            bad.append((row, None, f"not UTF-8: {exc.reason} at byte {exc.start}"))
    return pa.array(out, pa.string()), None, bad


class BatchDecoder:
    """Turns batches in Spark's Kafka schema into the typed schema of ``config``
    (``config.readers`` resolved on the driver)."""

    def __init__(self, config: ValuesConfig, include_headers: bool, sasl: tuple[str, str] | None = None):
        self.config = config
        self.schema = output_schema(config, include_headers)
        readers = config.readers
        client = None
        if any(config.side(s).registry for s in ("key", "value")):
            client = registry_client(config, sasl)
        self.sides: dict[str, SideDecoder] = {}
        for side in ("key", "value"):
            s = config.side(side)
            if s.typed:
                reader = getattr(readers, side) if readers is not None else None
                if s.registry and reader is None:
                    raise KafkaTieredError(f"the {side} reader schema was not resolved before the read (the "
                                           f"entry point must call values.readers.resolve_readers)")
                self.sides[side] = SideDecoder(reader, s.format, client if s.registry else None)

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns: dict[str, Any] = {name: batch.column(name) for name in batch.schema.names}
        permissive = self.config.permissive
        for side, dec in self.sides.items():
            raw = batch.column(side)
            typed, ids, bad = dec.decode(raw)
            if bad:
                if not permissive:
                    row, sid, reason = min(bad, key=lambda b: b[0])
                    raise ValueDecodeError(reason, side=side, topic=batch.column("topic")[row].as_py(),
                                           partition=batch.column("partition")[row].as_py(),
                                           offset=batch.column("offset")[row].as_py(), schema_id=sid)
                corrupt = np.zeros(len(raw), bool)
                corrupt[[b[0] for b in bad]] = True
                typed = _null_where(typed, corrupt)
                columns[f"corrupt{side.capitalize()}"] = _null_where(raw, ~corrupt)
            elif permissive:
                columns[f"corrupt{side.capitalize()}"] = pa.nulls(len(raw), pa.binary())
            columns[side] = typed
            if ids is not None:
                columns[f"{side}SchemaId"] = ids
        return pa.RecordBatch.from_arrays([_as(columns[f.name], f.type) for f in self.schema], schema=self.schema)


def _null_where(arr: pa.Array, nulls: np.ndarray) -> pa.Array:
    """``arr`` with the rows ``nulls`` marks null (the rest unchanged)."""
    if not nulls.any():
        return arr
    import pyarrow.compute as pc
    return pc.if_else(pa.array(nulls), pa.nulls(len(arr), arr.type), arr)


def _as(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    return arr if arr.type == typ else arr.cast(typ)
