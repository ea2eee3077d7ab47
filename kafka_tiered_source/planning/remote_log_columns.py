"""A :class:`~.remote_log_state.RemoteLogState` in columns, as the catalog's snapshots hold it
(:mod:`.catalog_snapshots`, format 2).

A snapshot of a large cluster holds a million copies.  As one JSON object per copy it took ~1 s
per 100k copies to write and as long again to read; here each partition's copies are columns:
the 22-character segment ids joined into one string, their integers one base64'd array of
little-endian int64 (:data:`INTS` columns, one after the other), their leader epochs another, and the rare custom
metadata and odd topic names sparse maps by index.  The per-epoch offset maps are kept as they
are (keys as an int64 array, ids joined), since the replay that made them is order-dependent
and cannot be redone from the copies.

Anything inconsistent in a document read back is a :class:`ValueError` (the catalog then
rescans the metadata partition).
"""
from __future__ import annotations

import base64
import sys
from array import array
from itertools import islice
from typing import Any

from ..records.backend import decoder_backend, slots_maker
from .remote_log_state import CopyMeta, EpochState, PartitionState, RemoteLogState

ID_CHARS = 22           # a Kafka Uuid string
# per copy: start, end, size, max timestamp, state, broker epoch, order (metadata partition,
# offset), txn index empty, how many leader epochs
INTS = 10


def _pack(values: array) -> str:
    if sys.byteorder != "little":
        values = array("q", values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _unpack(text: str, what: str) -> array:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 8:
        raise ValueError(f"{what}: {len(raw)} bytes is no int64 array")
    out = array("q")
    out.frombytes(raw)
    if sys.byteorder != "little":
        out.byteswap()
    return out


def _ids(joined: str, n: int, what: str) -> list[str]:
    if not isinstance(joined, str) or len(joined) != n * ID_CHARS:
        raise ValueError(f"{what}: {len(joined)} characters are not {n} ids")
    return [joined[i:i + ID_CHARS] for i in range(0, len(joined), ID_CHARS)]


def _joined(ids: list[str], what: str) -> str:
    for i in ids:
        if len(i) != ID_CHARS:
            raise ValueError(f"{what}: {i!r} is not a Kafka Uuid string")
    return "".join(ids)


# CopyMeta's fields as native/rlm_replay.c ``rlm_columns`` reads them, slot by slot
_SLOTS = ("segment_id", "topic", "topic_id", "partition", "start_offset", "end_offset", "size_bytes",
          "max_timestamp_ms", "state", "broker_epoch", "order", "txn_index_empty", "leader_epochs", "custom_metadata")
_native_columns: Any = False      # not looked up yet


def _columns_native() -> Any:
    """``copies -> (ints, leader epochs, ids) | None`` in C, or None (the pure-Python path)."""
    global _native_columns
    if _native_columns is False:
        _native_columns = None
        if decoder_backend() == "native":
            from .._native import rlm_columns
            descrs = tuple(getattr(CopyMeta, name) for name in _SLOTS)
            _native_columns = lambda copies, topic, tid, p: rlm_columns(copies, descrs, topic, tid, p)  # noqa: E731
    return _native_columns


def partition_to_doc(topic_id: str, partition: int, state: PartitionState) -> dict:
    copies = list(state.copies.values())
    topic = copies[0].topic if copies else ""
    native = _columns_native() if copies and isinstance(topic, str) else None
    got = native(copies, topic, topic_id, partition) if native is not None else None
    if got is not None:      # every copy the usual one: the columns made in C, as below
        ints_raw, epochs_raw, ids = got
        return {"topic_id": topic_id, "partition": partition, "deleted": state.deleted, "topic": topic,
                "ids": ids, "ints": base64.b64encode(ints_raw).decode("ascii"),
                "leader_epochs": base64.b64encode(epochs_raw).decode("ascii"), "custom": {}, "names": {},
                "epochs": _epochs_doc(state)}
    custom: dict[str, str] = {}
    names: dict[str, str] = {}
    for i, c in enumerate(copies):
        if len(c.order) != 2:
            raise ValueError(f"copy {c.segment_id}: order {c.order} is not (metadata partition, offset)")
        if c.custom_metadata is not None:
            custom[str(i)] = base64.b64encode(c.custom_metadata).decode("ascii")
        if c.topic != topic or c.topic_id != topic_id or c.partition != partition:
            if c.topic_id != topic_id or c.partition != partition:
                raise ValueError(f"copy {c.segment_id} is of {c.topic_id}-{c.partition}, not {topic_id}-{partition}")
            names[str(i)] = c.topic
    # column after column (INTS of them, each as long as the copies): one pass per field
    ints = array("q", [c.start_offset for c in copies])
    ints.extend([c.end_offset for c in copies])
    ints.extend([c.size_bytes for c in copies])
    ints.extend([c.max_timestamp_ms for c in copies])
    ints.extend([c.state for c in copies])
    ints.extend([c.broker_epoch for c in copies])
    ints.extend([c.order[0] for c in copies])
    ints.extend([c.order[1] for c in copies])
    ints.extend([c.txn_index_empty for c in copies])
    ints.extend([len(c.leader_epochs) for c in copies])
    epochs = array("q", [x for c in copies for pair in c.leader_epochs for x in pair])
    return {"topic_id": topic_id, "partition": partition, "deleted": state.deleted, "topic": topic,
            "ids": _joined([c.segment_id for c in copies], "ids"), "ints": _pack(ints), "leader_epochs": _pack(epochs),
            "custom": custom, "names": names, "epochs": _epochs_doc(state)}


def _epochs_doc(state: PartitionState) -> dict:
    return {str(e): {"keys": _pack(array("q", s.keys)), "ids": _joined(s.ids, f"epoch {e}"), "highest": s.highest}
            for e, s in state.epochs.items()}


def partition_from_doc(d: dict) -> tuple[tuple[str, int], PartitionState]:
    topic_id, partition, topic = d["topic_id"], int(d["partition"]), d["topic"]
    if not isinstance(topic_id, str) or not isinstance(topic, str):
        raise ValueError("topic id and name are strings")
    # a topic's partitions share its strings (as the replay's copies do: a task pickles them once)
    topic_id, topic = sys.intern(topic_id), sys.intern(topic)
    where = f"{topic_id}-{partition}"
    ids = _ids(d["ids"], len(d["ids"]) // ID_CHARS, where)
    ints = _unpack(d["ints"], where)
    flat = _unpack(d["leader_epochs"], where)
    n = len(ids)
    if len(ints) != INTS * n:
        raise ValueError(f"{where}: {len(ints)} integers for {n} copies")
    if len(flat) % 2:
        raise ValueError(f"{where}: leader epochs are not pairs")
    cols = [ints[k * n:(k + 1) * n] for k in range(INTS)]
    if sum(cols[9]) * 2 != len(flat) or min(cols[9], default=0) < 0:
        raise ValueError(f"{where}: {len(flat) // 2} leader epochs for copies that hold {sum(cols[9])}")
    pairs = iter(zip(flat[0::2], flat[1::2], strict=True))
    custom = {int(k): base64.b64decode(v.encode("ascii"), validate=True) for k, v in d["custom"].items()}
    names = {int(k): str(v) for k, v in d["names"].items()}
    state = PartitionState(deleted=bool(d["deleted"]))
    copies = state.copies
    gen = state.gen
    make = slots_maker(CopyMeta)      # every field in order, the cached segment (last) none yet
    for i, (sid, start, end, size, ts, st, broker, mp, off, empty, k) in enumerate(zip(ids, *cols, strict=True)):
        epochs = (next(pairs),) if k == 1 else tuple(islice(pairs, k))
        copies[sid] = make(sid, names.get(i, topic), topic_id, partition, start, end, size, ts, epochs,
                           custom.get(i), bool(empty), st, (mp, off), broker, gen, None)
    if len(copies) != n:
        raise ValueError(f"{where}: a copy is listed twice")
    for e, s in d["epochs"].items():
        keys = list(_unpack(s["keys"], f"{where} epoch {e}"))
        highest = s["highest"]
        if highest is not None and not isinstance(highest, int):
            raise ValueError(f"{where} epoch {e}: highest {highest!r}")
        state.epochs[int(e)] = EpochState(keys, _ids(s["ids"], len(keys), f"{where} epoch {e}"), highest)
    return (topic_id, partition), state


def to_doc(state: RemoteLogState) -> dict:
    """``state`` as a snapshot's JSON document holds it."""
    return {"partitions": [partition_to_doc(t, p, s) for (t, p), s in state.partitions.items()],
            "positions": {str(k): v for k, v in state.positions.items()}}


def from_doc(d: dict) -> RemoteLogState:
    """The state :func:`to_doc` wrote (:class:`ValueError` when the document does not hold one)."""
    parts = dict(partition_from_doc(x) for x in d["partitions"])
    if len(parts) != len(d["partitions"]):
        raise ValueError("a partition is listed twice")
    return RemoteLogState(parts, {int(k): int(v) for k, v in d["positions"].items()})
