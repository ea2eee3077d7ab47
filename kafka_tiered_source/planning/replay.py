"""Replaying ``__remote_log_metadata``: a metadata partition's records, from a position to its
high watermark, into a :class:`~.remote_log_state.RemoteLogState`.

The records are applied as a broker's RemoteLogMetadataCache applies them (the state changes
RemoteLogSegmentState allows); other topics' records are passed over without being decoded
(:mod:`~..protocol.metadata_select`); tombstones end the copy their key names (KIP-1266's
compacted topic).  :mod:`.catalog` keeps the replayed state from plan to plan;
:mod:`.metadata_topic` locates segments with it.
"""
from __future__ import annotations

from typing import Any, Collection

from ..dataclass import dataclass
from ..errors import BrokerError
from ..ids import uuid_from_str
from ..logs import get_logger
from ..model import EARLIEST, LATEST
from ..protocol import remote_log_metadata as rlm
from ..protocol.metadata_select import select_records
from ..records.backend import decoder_backend
from .remote_log_state import RemoteLogState


log = get_logger(__name__)

DEFAULT_TOPIC = rlm.TOPIC
# Bytes asked per Fetch while scanning a metadata partition (its records are ~150 bytes each).
SCAN_BYTES = 8 * 1024 * 1024


class Discontinuity(Exception):
    """The metadata partition is no longer the log read up to a position: why, in words."""


@dataclass(frozen=True)
class Replayed:
    """Where a replay of one metadata partition ended: the next offset to read, the
    partitionLeaderEpoch of the last batch read (-1: none), the log start offset and high
    watermark the partition showed, and how many records were applied and passed over."""
    next_offset: int
    last_epoch: int
    log_start: int
    high_watermark: int
    applied: int
    passed: int
    start: int = 0           # where it began
    keyed: bool = False      # records with keys were seen (a KIP-1266 topic, compacted)


def replay(client: Any, topic: str, mp: int, state: RemoteLogState, wanted: Collection[bytes] | None, *,
           start: int | None, last_epoch: int = -1, high_watermark: int = -1, proven: bool = False) -> Replayed:
    """Replay metadata partition ``mp`` of ``topic`` into ``state``, in the partition's order,
    from ``start`` (None: its log start offset) to its high watermark; ``wanted``: the ids of
    the topics whose records are replayed (None: every record).

    With a ``start``, the first answer must show that the log is still the one read up to it
    (``high_watermark``: the one seen then under the same leader epoch, -1: none), and each
    tombstone must name the copy it ends: otherwise :class:`Discontinuity` (the state may then
    hold part of the replay: drop it).  ``proven``: OffsetForLeaderEpoch showed the position on
    a new leader's log, whose high watermark may still lag below it: then there is nothing to
    read yet, and that is no discontinuity."""
    where = f"{topic}-{mp}"
    offset = start
    if offset is None:
        offset = client.list_offsets(topic, {mp: EARLIEST}, isolation_level=0)[mp].offset
    ahead = _Ahead(client, topic, mp)
    try:
        return _replay(client, topic, mp, state, wanted, start, last_epoch, high_watermark, proven, where, offset,
                       ahead)
    finally:
        ahead.close()


class _Ahead:
    """The next Fetch of a replay, asked on a thread of its own while the rows of the last one
    are replayed (the broker's answer and the replay then overlap: a metadata partition of a
    large cluster is hundreds of answers).  Only one request is ever in flight, and the replay
    waits for it before it returns or raises, so the client is used by one thread at a time."""

    def __init__(self, client: Any, topic: str, mp: int):
        self.client, self.topic, self.mp = client, topic, mp
        self._thread: Any = None
        self._offset = -1
        self._result: Any = None

    def fetch(self, offset: int) -> Any:
        """The answer at ``offset``: the one asked ahead, or asked now."""
        if self._thread is not None and self._offset == offset:
            self._thread.join()
            self._thread = None
            ok, value = self._result
            if not ok:
                raise value
            return value
        self.close()
        return self._fetch(offset)

    def _fetch(self, offset: int) -> Any:
        return self.client.fetch(self.topic, self.mp, offset, max_bytes=SCAN_BYTES, partition_max_bytes=SCAN_BYTES,
                                 max_wait_ms=0, min_bytes=0, isolation_level=0)

    def ask(self, offset: int) -> None:
        """Ask for the answer at ``offset`` now, on a thread."""
        import threading

        def run() -> None:
            try:
                self._result = (True, self._fetch(offset))
            except BaseException as exc:   # handed to fetch(), which raises it where it is used
                self._result = (False, exc)
        self._offset = offset
        self._thread = threading.Thread(target=run, name=f"kafka-tiered-{self.topic}-{self.mp}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a request in flight (its answer is dropped)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _replay(client: Any, topic: str, mp: int, state: RemoteLogState, wanted: Collection[bytes] | None,
            start: int | None, last_epoch: int, high_watermark: int, proven: bool, where: str, offset: int,
            ahead: _Ahead) -> Replayed:
    hw = log_start = -1
    applied = passed = 0
    native = decoder_backend() == "native"
    keyed = False
    first = offset
    while True:
        try:
            res = ahead.fetch(offset)
        except BrokerError as exc:
            if start is None or exc.error_name != "OFFSET_OUT_OF_RANGE":
                raise
            # Kafka refuses a fetch below the log start or past the log end: say which
            listed = client.list_offsets(topic, {mp: EARLIEST}, isolation_level=0)[mp].offset
            _check_range(start, listed, client.list_offsets(topic, {mp: LATEST}, isolation_level=0)[mp].offset,
                         high_watermark, proven)
            raise Discontinuity(f"the position {start} is out of its range") from None
        if hw < 0:
            part = res.partition
            hw, log_start = part.high_watermark, part.log_start_offset
            if start is not None:
                _check_range(start, log_start, hw, high_watermark, proven)
        got = select_records(res.records or b"", wanted, decode=True)
        if got.next_offset is not None and offset < got.next_offset < hw:
            ahead.ask(got.next_offset)       # while these rows are replayed
        hits = got.hits
        if not got.tombstones:
            # the usual answer: rows only, every one decoded (no (offset, value) for the codec),
            # applied as they are once those below the offset asked are cut (a fetch answers from
            # the batch holding it; hits are in offset order)
            skip = 0
            while skip < len(hits) and (hits[skip][0] if len(hits[skip]) == 2 else hits[skip][1]) < offset:
                skip += 1
            rest = hits[skip:] if skip else hits
            if 2 not in map(len, rest):
                applied += len(rest)
                hits = []
                _apply(state, rest, mp, native)
        tombstones = iter(t for t in got.tombstones if t[0] >= offset)
        tomb = next(tombstones, None)
        rows: list = []          # applied together, in order, before anything else is
        for hit in hits:
            # a row (native/rlm_rows.c, or its twin rlm.row_of), or (offset, value) for the codec
            # to read or to say what is wrong with it
            off = hit[0] if len(hit) == 2 else hit[1]
            if tomb is not None and tomb[0] < off:
                _apply(state, rows, mp, native)
                while tomb is not None and tomb[0] < off:
                    _tombstone(state, tomb, wanted, where, incremental=start is not None)
                    tomb = next(tombstones, None)
            if off >= offset:    # a fetch answers from the batch holding the offset
                if len(hit) == 2:
                    _apply(state, rows, mp, native)
                    hit = rlm.row_of(rlm.decode_record(hit[1], where=f"{where} offset {off}"), off)
                rows.append(hit)
                applied += 1
        _apply(state, rows, mp, native)
        while tomb is not None:
            _tombstone(state, tomb, wanted, where, incremental=start is not None)
            tomb = next(tombstones, None)
        passed += got.passed
        keyed = keyed or got.keyed > 0
        if got.next_offset is None or got.next_offset <= offset:
            break        # nothing more below the high watermark
        offset, last_epoch = got.next_offset, got.last_epoch
        if offset >= hw:
            break
    state.positions[mp] = offset
    return Replayed(offset, last_epoch, log_start, hw, applied, passed, first, keyed)


def _apply(state: RemoteLogState, rows: list, mp: int, native: bool) -> None:
    """The rows gathered so far replayed, and the list emptied."""
    if rows:
        state.apply_rows(rows, mp, native=native)
        rows.clear()


def _check_range(start: int, log_start: int, hw: int, seen_hw: int, proven: bool = False) -> None:
    """A position read on from must not lie below the log start, and the high watermark must
    not have gone down since it was seen under the same leader (``seen_hw``).  With no high
    watermark seen (-1) it must not lie below the position, unless OffsetForLeaderEpoch
    ``proven`` the position on a new leader's log, whose high watermark may lag.  (A high
    watermark seen below the position was such a lagging one: that leader proved the position.)"""
    if log_start > start:
        raise Discontinuity(f"its log start offset {log_start} is past the position {start} "
                            f"(records were deleted before they were read)")
    if hw < seen_hw or (hw < start and seen_hw < 0 and not proven):
        raise Discontinuity(f"its high watermark {hw} is below the position {start} or the "
                            f"high watermark {seen_hw} seen before (the log was truncated)")


def _tombstone(state: RemoteLogState, tomb: tuple[int, bytes | None], wanted: Collection[bytes] | None,
               where: str, *, incremental: bool) -> None:
    offset, raw = tomb
    key = rlm.tombstone_key(raw)
    if key is None:
        if incremental and raw is not None:
            raise Discontinuity(f"the tombstone at offset {offset} has a key this version cannot read "
                                f"({bytes(raw[:60])!r}), so which copy it ends is unknown")
        return
    if wanted is None or key.topic_id in wanted:
        state.tombstone(key)


class MetadataTopicReader:
    """Replays metadata partitions of ``topic`` into ``state`` with ``client``."""

    def __init__(self, client: Any, topic: str = DEFAULT_TOPIC, state: RemoteLogState | None = None):
        self.client = client
        self.topic = topic
        self.state = state if state is not None else RemoteLogState()
        self._partitions: int | None = None
        self._available: bool | None = None

    def partitions(self) -> int:
        """The metadata topic's partition count (a BrokerError when it cannot be described:
        missing, or no DESCRIBE permission)."""
        if self._partitions is None:
            self._partitions = len(self.client.topic(self.topic, refresh=True).partitions)
        return self._partitions

    def available(self) -> bool:
        """Whether the metadata topic exists and can be described (``auto`` moves on if not)."""
        if self._available is None:
            try:
                self.partitions()
                self._available = True
            except BrokerError as exc:
                log.info("%s cannot be read (%s): not locating segments through it", self.topic, exc)
                self._available = False
        return self._available

    def metadata_partition(self, topic_id: str, partition: int) -> int:
        return rlm.metadata_partition(uuid_from_str(topic_id), partition, self.partitions())

    def scan(self, mp: int, wanted: Collection[bytes] | None = None) -> Replayed:
        """Replay metadata partition ``mp`` from where the state stands to its high watermark.
        ``wanted``: ids (16 bytes) of the topics to replay; other topics' records are passed
        over without being decoded (None: every record)."""
        return replay(self.client, self.topic, mp, self.state, wanted, start=self.state.positions.get(mp))
