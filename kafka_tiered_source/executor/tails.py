"""Proving a broker's empty answer: when the reader may skip a tiered copy's compacted tail.

A broker answers a fetch below its high watermark with no records and no error where the tiered
copy serving the offset, and every copy after it, hold no batch at or after it
(RemoteLogManager.read: a tail compaction emptied, KAFKA-15388).  It gives the very same answer
where nothing is empty:

* a remote read that outlasts ``remote.fetch.max.wait.ms`` (KIP-1018, default 500 ms):
  ReplicaManager.processRemoteFetch watches the read in a DelayedRemoteFetch whose delay is that
  setting; on expiry, DelayedRemoteFetch.onComplete answers the partition from its local read
  result, whose records are empty;
* a DelayedRemoteFetch completed early because the broker stopped hosting the partition
  (tryComplete's cases a, b, d: NotLeaderOrFollower, UnknownTopicOrPartition, KafkaStorage),
  again from the local read result;
* a broker over its remote fetch quota (KIP-956, ReplicaManager.handleOffsetOutOfRangeError
  when RemoteLogManager's fetch throttle time is > 0): no remote read at all, empty records
  after the request's DelayedFetch waits ``fetch.max.wait.ms`` (``fetch.min.bytes`` >= 1:
  that partition's offset is unknown to DelayedFetch.tryComplete, so no byte ever counts).

So an empty answer alone proves nothing, and the reader skips only what one of two proofs shows
empty (never on an assumption):

* **Storage** (the plan knows the copy and the reader can read it): the copy's own bytes, read
  from the offset index entry at or before the offset on, hold no batch with an offset in
  ``[offset, span end)`` (its last offset at or after the offset, its base before the end: the
  copy may hold batches past the span, another lineage's after an unclean election).  The plan
  says this copy serves those offsets, so what it does not hold, nobody serves.  A copy that
  does hold one proves the answers were not a tail, and nothing is skipped, whatever the
  timing.
* **Timing**: an answer that comes clearly sooner than the broker could expire a remote read
  or serve a throttled one, measured from before the request was sent, is neither: it is
  RemoteLogManager.read's answer.  The bound is the smaller of the leader's
  ``remote.fetch.max.wait.ms`` (DescribeConfigs of its BROKER resource; unknown: no bound) and
  the request's ``fetch.max.wait.ms``; "clearly" is :data:`FAST` of it (Kafka's timing wheel
  never fires a DelayedOperation before its delay; it fires late, not early).  An early
  completion for a partition the broker stopped hosting is ruled out by a second such answer
  from the same broker under the same leader epoch (Fetch is fenced with
  ``current_leader_epoch``, KIP-320): a broker that stopped hosting the partition answers that
  epoch with an error ever after (hosting it again takes a new leader epoch).  An answer that
  names a preferred read replica (KIP-392) is no proof: the leader read nothing.

Where neither proves the tail empty the reader asks again, backing off, and after
``kafkaConsumer.pollTimeoutMs`` fails with :class:`~kafka_tiered_source.errors.NoRecordsError`
naming the partition, the offset and why.
"""
from __future__ import annotations

import logging
import time

from ..dataclass import replace
from ..errors import BrokerError, KafkaTieredError

log = logging.getLogger(__name__)

REMOTE_FETCH_MAX_WAIT = "remote.fetch.max.wait.ms"
#: An empty answer counts as fast when it came within this share of the time in which a broker
#: could expire a remote read or answer a throttled one.
FAST = 0.8


class EmptyAnswers:
    """The empty answers one offset has had: how many, when the poll timeout ends (it runs from
    the first), the last fast answer's broker and leader epoch, what storage said, and why
    nothing proved the tail empty (for the error)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.offset: int | None = None
        self.attempts = 0
        self.deadline = 0.0
        self.last_fast: tuple | None = None     # (node id, leader epoch) of the last answer, if fast
        self.storage: bool | str | None = None   # the copy's verdict: empty, not, why unreadable
        self.times_ms: list[int] = []
        self.timing: str = ""                   # why the timing proves nothing, when it does not

    def seen(self, offset: int, poll_ms: int) -> int:
        """Count an empty answer for ``offset``; the number of earlier ones."""
        if offset != self.offset:
            self.reset()
            self.offset = offset
            self.deadline = time.monotonic() + poll_ms / 1000
        self.attempts += 1
        return self.attempts - 1

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def why(self, offset: int, end: int, copy) -> str:
        """Why the offsets ``[offset, end)`` were not proven empty."""
        what = f"copy {copy.segment_id} (offsets {copy.base_offset}-{copy.end_offset})" if copy is not None else \
            "the copy serving them (the plan does not name it)"
        parts = []
        if self.storage is False:
            parts.append(f"{what} holds a batch at or after offset {offset}, so the empty answers were not "
                         f"its compacted tail (a remote read that outlasted remote.fetch.max.wait.ms answers so)")
        elif isinstance(self.storage, str):
            parts.append(f"{what} could not be read ({self.storage})")
        if self.timing:
            parts.append(self.timing)
        elif self.times_ms:
            parts.append(f"no two answers in a row were fast enough to rule out an expired remote read "
                         f"(took {', '.join(map(str, self.times_ms[-4:]))} ms)")
        return f"nothing proved offsets [{offset}, {end}) empty: " + "; ".join(parts)


class Tails:
    """The proofs for one reader: the brokers' ``remote.fetch.max.wait.ms`` (asked once per
    broker) and the copies' bytes.  ``reader`` is the :class:`~.reader.TaskReader`."""

    def __init__(self, reader):
        self.reader = reader
        self._waits: dict[int, int | str] = {}    # node id -> remote.fetch.max.wait.ms, or why unknown

    def prove(self, empty: EmptyAnswers, offset: int, end: int, copy, fr, elapsed_s: float) -> str | None:
        """How offsets ``[offset, end)``, which ``copy`` serves (None: the plan does not name it),
        are proven empty (for the log), or None.  ``fr``: the empty :class:`~..protocol.fetch.FetchResult`; ``elapsed_s``: from
        before the request was sent to its answer (retries inside make it longer, never
        shorter, so a fast total is a fast answer)."""
        if empty.storage is None:
            empty.storage = self._storage(copy, offset, end)
        if empty.storage is True:
            return f"copy {copy.segment_id} holds no batch there (read from storage)"
        fast = self._fast(fr, elapsed_s, empty)
        key = (fr.node_id, fr.leader_epoch) if fast else None
        earlier, empty.last_fast = empty.last_fast, key
        if empty.storage is False or key is None or earlier != key:
            return None
        return (f"two answers in a row from broker {fr.node_id} under leader epoch {fr.leader_epoch}, each in "
                f"{empty.times_ms[-1]} ms or less, sooner than it could expire a remote read")

    # -- timing ------------------------------------------------------------------------------
    def _fast(self, fr, elapsed_s: float, empty: EmptyAnswers) -> bool:
        empty.times_ms.append(round(elapsed_s * 1000))
        bound, why = self.bound_s(fr)
        empty.timing = why
        return bound is not None and elapsed_s < bound

    def bound_s(self, fr) -> tuple[float | None, str]:
        """Seconds under which an empty answer from ``fr``'s broker is RemoteLogManager.read's,
        or None and why there is no such bound."""
        cfg = self.reader.client.config
        if cfg.fetch_min_bytes < 1 or cfg.fetch_max_wait_ms <= 0:
            return None, (f"with fetch.min.bytes={cfg.fetch_min_bytes} and fetch.max.wait.ms="
                          f"{cfg.fetch_max_wait_ms} a broker answers at once whatever it read, so timing proves nothing")
        if fr.node_id is None or fr.leader_epoch < 0:
            return None, "the leader's epoch is unknown, so an answer cut short by a leadership change is not ruled out"
        if getattr(fr.partition, "preferred_read_replica", -1) >= 0:
            return None, f"the leader named replica {fr.partition.preferred_read_replica} to read from (KIP-392)"
        wait = self.remote_wait_ms(fr.node_id)
        if isinstance(wait, str):
            return None, wait
        return min(wait, cfg.fetch_max_wait_ms) / 1000 * FAST, ""

    def remote_wait_ms(self, node_id: int) -> int | str:
        """Broker ``node_id``'s ``remote.fetch.max.wait.ms``, or why it is not known."""
        if node_id not in self._waits:
            try:
                got = self.reader.client.describe_broker_config(node_id, [REMOTE_FETCH_MAX_WAIT])
            except BrokerError as exc:
                self._waits[node_id] = f"broker {node_id}'s {REMOTE_FETCH_MAX_WAIT} could not be read ({exc})"
            else:
                raw = got.get(REMOTE_FETCH_MAX_WAIT)
                try:
                    self._waits[node_id] = int(raw) if raw is not None else (
                        f"broker {node_id} does not describe {REMOTE_FETCH_MAX_WAIT} (Kafka before 3.8, "
                        f"or the value is hidden), so how soon it expires a remote read is unknown")
                except ValueError:
                    self._waits[node_id] = f"broker {node_id}'s {REMOTE_FETCH_MAX_WAIT} is {raw!r}, not a number"
            if isinstance(self._waits[node_id], str):
                log.info("no timing proof of empty answers: %s", self._waits[node_id])
        return self._waits[node_id]

    # -- storage -----------------------------------------------------------------------------
    def _storage(self, copy, offset: int, end: int) -> bool | str:
        if copy is None:
            return "the plan does not name the copy"
        options = self.reader.options
        if not options.storage.configured and not copy.presigned_url:
            return "no remote.storage.* options: storage cannot be read"
        try:
            return copy_holds_none(self.reader.fetcher, copy, offset, end)
        except (KafkaTieredError, ValueError) as exc:     # ValueError: RecordFormatError
            log.warning("reading the tail of %s to prove it empty failed: %s", copy, exc)
            return str(exc)


def copy_holds_none(fetcher, copy, offset: int, end: int) -> bool:
    """Whether ``copy`` holds no batch with an offset in ``[offset, end)`` (its last offset at or
    after ``offset``, its base before ``end``): its bytes from the offset index entry at or before
    ``offset`` (Kafka's OffsetIndex.lookup; the first byte when the copy has no index) on, every
    batch checked (magic, CRC-32C, length), to the first batch that answers the question or the
    object's last byte.  Batches before a batch boundary hold smaller offsets than it, so
    starting there misses none.  Raises :class:`KafkaTieredError` where the bytes cannot be read
    or are not whole batches."""
    from ..records.decoder import check_batch
    from ..records.header import HEADER_SIZE, LOG_OVERHEAD, read_header
    from ..storage.indexes import lookup_position, parse_offset_index
    # a KIP-1248 answer's size is where its byte hint ends, not the object's: read to the end
    seg = replace(copy, size_bytes=None) if copy.broker_positions else copy
    raw = fetcher.fetch_index(seg, "offset")
    start = lookup_position(parse_offset_index(raw), seg.base_offset, offset) if raw else 0
    carry = b""
    pos = start                     # segment position of carry's first byte
    pieces = fetcher.iter_log_segment(seg, start, None)
    try:
        for piece in pieces:
            buf = b"".join((carry, piece)) if carry else piece
            at, n = 0, len(buf)
            while n - at >= LOG_OVERHEAD:
                size = LOG_OVERHEAD + int.from_bytes(buf[at + 8:at + 12], "big", signed=True)
                if size < HEADER_SIZE:
                    raise KafkaTieredError(f"{copy}: no record batch at byte {pos + at} (length {size})")
                if n - at < size:
                    break
                check_batch(buf, at, size, pos)
                header = read_header(buf, at)
                if header.base_offset >= end:
                    return True           # this batch and all after it lie past the span
                if header.last_offset >= offset:
                    return False
                at += size
            carry = bytes(memoryview(buf)[at:])
            pos += at
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
    if carry:
        raise KafkaTieredError(f"{copy}: its last {len(carry)} bytes, from byte {pos}, are not a whole batch")
    return True
