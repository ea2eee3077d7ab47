"""The embedded broker's local log: Kafka segment files, their indexes and one partition's log.

Files are Kafka's own: ``%020d.log`` (record batches back to back), ``.index`` (8-byte entries:
relative offset int32, position int32), ``.timeindex`` (12-byte entries: max timestamp so far
int64, relative offset int32) and ``.txnindex`` (34-byte aborted-transaction entries).  Index
entries are made the way Kafka's ``LogSegment`` does: before a batch is added, if more than
``index.interval.bytes`` were written since the last entry, an entry names the batch's *last*
offset and the batch's start position; the time index gets (max timestamp so far, offset of that
max) when the timestamp grew.  Rebuilding the index of a segment written by Kafka gives the same
bytes (tests/test_broker_log.py checks it against the fixtures).

Single node: the high watermark is the log end offset; the last stable offset is the first
offset of the earliest open transaction, else the high watermark.
"""
from __future__ import annotations

import bisect
import os
import struct
import time
from typing import Iterator

import crc32c

from ..dataclass import dataclass, field
from ..errors import KafkaTieredError
from ..records.header import (
    ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK,
    BatchHeader, iter_headers, read_header,
)
from ..storage.indexes import (OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY, AbortedTxn, lookup_position,
                               lookup_time, parse_txn_index)
from .batches import StorageError, control_batch, control_type, validate_batches
from .epochs import LeaderEpochCache
from .logconfig import roll_jitter, should_roll

INDEX_INTERVAL_BYTES = 4096
_LENGTH = struct.Struct(">i")
_BASE_LENGTH = struct.Struct(">qi")     # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")       # lastOffsetDelta, at 23
TXN_ENTRY_SIZE = TXN_ENTRY.size          # 34
NO_TIMESTAMP = -1


def collect_aborted(entries, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
    """Kafka's ``TransactionIndex.collectAbortedTxns``: entries overlapping
    [fetch_offset, upper_bound); complete once an entry's LSO reaches the upper bound."""
    out = []
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
            out.append(e)
        if e.last_stable_offset >= upper_bound:
            return out, True
    return out, False


class IndexBuilder:
    """Kafka's per-batch index rule, shared by appends, recovery and remote index copies."""

    def __init__(self, base_offset: int, interval: int = INDEX_INTERVAL_BYTES):
        self.base_offset = base_offset
        self.interval = interval
        self.offsets: list[tuple[int, int]] = []
        self.times: list[tuple[int, int]] = []
        self.bytes_since_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1

    def add(self, h: BatchHeader, position: int) -> tuple[bytes, bytes]:
        """Account one batch at ``position``; return the index/timeindex bytes it adds."""
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        new_off = new_time = b""
        if self.bytes_since_entry > self.interval:
            e = (h.last_offset - self.base_offset, position)
            self.offsets.append(e)
            new_off = OFFSET_ENTRY.pack(*e)
            if not self.times or self.max_timestamp > self.times[-1][0]:
                t = (self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
                self.times.append(t)
                new_time = TIME_ENTRY.pack(*t)
            self.bytes_since_entry = 0
        self.bytes_since_entry += h.size
        return new_off, new_time

    def offset_index_bytes(self) -> bytes:
        return b"".join(OFFSET_ENTRY.pack(*e) for e in self.offsets)

    def time_index_bytes(self) -> bytes:
        return b"".join(TIME_ENTRY.pack(*e) for e in self.times)


def build_indexes(data, base_offset: int, interval: int = INDEX_INTERVAL_BYTES) -> tuple[bytes, bytes]:
    """(.index bytes, .timeindex bytes) for a whole segment, as Kafka's recovery builds them."""
    b = IndexBuilder(base_offset, interval)
    for h in iter_headers(data):
        b.add(h, h.position)
    return b.offset_index_bytes(), b.time_index_bytes()


def filename(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


# --------------------------------------------------------------------------------------------
# segments


class Segment:
    """One segment: the .log file plus its in-memory index state (mirrored to the index files)."""

    def __init__(self, directory: str, base_offset: int, *, interval: int = INDEX_INTERVAL_BYTES):
        self.dir = directory
        self.base_offset = base_offset
        self.path = os.path.join(directory, filename(base_offset, ".log"))
        self.index = IndexBuilder(base_offset, interval)
        self.size = 0
        self.next_offset = base_offset     # one past the last offset held
        self.txn_entries: list[AbortedTxn] = []
        self.created_ms = int(time.time() * 1000)
        # LogSegment's rollingBasedTimestamp (its first batch's max timestamp) and rollJitterMs
        self.rolling_timestamp = NO_TIMESTAMP
        self.roll_jitter_ms = 0

    # -- paths
    def file(self, suffix: str) -> str:
        return os.path.join(self.dir, filename(self.base_offset, suffix))

    @property
    def max_timestamp(self) -> int:
        return self.index.max_timestamp

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @classmethod
    def create(cls, directory, base_offset, *, interval=INDEX_INTERVAL_BYTES) -> "Segment":
        s = cls(directory, base_offset, interval=interval)
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            open(s.file(suffix), "wb").close()
        return s

    @classmethod
    def load(cls, directory, base_offset, *, interval=INDEX_INTERVAL_BYTES) -> "Segment":
        """Open an existing segment: walk its batches, keep its .txnindex, rebuild missing or
        short indexes (Kafka's recovery rule, so a Kafka-written index comes out the same)."""
        s = cls(directory, base_offset, interval=interval)
        with open(s.path, "rb") as f:
            data = f.read()
        try:
            for h in iter_headers(data):
                if s.size == 0:
                    s.rolling_timestamp = h.max_timestamp
                s.index.add(h, h.position)
                s.size = h.end
                s.next_offset = h.last_offset + 1
        except ValueError as exc:
            raise KafkaTieredError(f"{s.path}: {exc}") from None
        if s.size != len(data):
            # a torn tail (crash mid-write): cut it off as Kafka's recovery does
            with open(s.path, "r+b") as f:
                f.truncate(s.size)
        want = {".index": s.index.offset_index_bytes(), ".timeindex": s.index.time_index_bytes()}
        for suffix, content in want.items():
            p = s.file(suffix)
            existing = open(p, "rb").read() if os.path.exists(p) else None
            if existing != content:
                with open(p, "wb") as f:
                    f.write(content)
        tp = s.file(".txnindex")
        if os.path.exists(tp):
            with open(tp, "rb") as f:
                s.txn_entries = parse_txn_index(f.read(), location=tp)
        else:
            open(tp, "wb").close()
        s.created_ms = int(os.path.getmtime(s.path) * 1000)
        return s

    def append(self, buf: bytes, headers: list[BatchHeader]) -> None:
        """Append already offset-assigned batches (``headers`` parsed from ``buf``)."""
        start = self.size
        if start == 0:
            self.rolling_timestamp = max(h.max_timestamp for h in headers)
        new_off, new_time = bytearray(), bytearray()
        for h in headers:
            o, t = self.index.add(h, start + h.position)
            new_off += o
            new_time += t
        with open(self.path, "ab") as f:
            f.write(buf)
        if new_off:
            with open(self.file(".index"), "ab") as f:
                f.write(new_off)
        if new_time:
            with open(self.file(".timeindex"), "ab") as f:
                f.write(new_time)
        self.size += len(buf)
        self.next_offset = headers[-1].last_offset + 1

    def append_aborted(self, entry: AbortedTxn) -> None:
        self.txn_entries.append(entry)
        with open(self.file(".txnindex"), "ab") as f:
            f.write(TXN_ENTRY.pack(0, *entry))

    def read_bytes(self, start: int, end: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def data(self) -> bytes:
        with open(self.path, "rb") as f:
            return f.read()

    def find_batch(self, offset: int) -> int | None:
        """Position of the first batch whose last offset >= ``offset`` (index, then scan)."""
        pos = lookup_position(self.index.offsets, self.base_offset, offset)
        with open(self.path, "rb") as f:
            while pos + LOG_OVERHEAD <= self.size:
                f.seek(pos)
                head = f.read(HEADER_SIZE)
                if len(head) < HEADER_SIZE:
                    return None
                h = read_header(head)
                if h.last_offset >= offset:
                    return pos
                pos += h.size
        return None

    def headers_from(self, position: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Batch headers from ``position`` to ``end`` without reading record bodies."""
        end = self.size if end is None else end
        with open(self.path, "rb") as f:
            pos = position
            while pos + HEADER_SIZE <= end:
                f.seek(pos)
                h = read_header(f.read(HEADER_SIZE))
                yield h._replace(position=pos)
                pos += h.size

    def select(self, position: int, offset: int, max_bytes: int, bound: int) -> tuple[bytes, int]:
        """What a fetch of ``offset`` returns from this segment: whole batches from ``position``
        (the first whose last offset >= ``offset``, :meth:`find_batch`), at least one, then more
        while they fit in ``max_bytes``, none whose base offset is >= ``bound``; and the offset
        after the last.  ``(b"", offset)`` when nothing qualifies.  One read of the file, walked
        in memory, as Kafka's LogSegment.read takes one slice of it (a partition of 160,000
        small batches is served in milliseconds, not a file read per batch)."""
        with open(self.path, "rb") as f:
            f.seek(position)
            data = f.read(max(max_bytes, LOG_OVERHEAD))
            if len(data) >= LOG_OVERHEAD:
                first = _LENGTH.unpack_from(data, 8)[0] + LOG_OVERHEAD
                if first > len(data):          # at least one batch, however large
                    data += f.read(first - len(data))
        start, end, nxt, pos, n = -1, 0, offset, 0, len(data)
        while pos + HEADER_SIZE <= n:
            base, length = _BASE_LENGTH.unpack_from(data, pos)
            size = length + LOG_OVERHEAD
            last = base + _LAST_DELTA.unpack_from(data, pos + 23)[0]
            if last < offset:
                pos += size
                continue
            if base >= bound:
                break
            if start < 0:
                start = pos
            elif pos + size - start > max_bytes:
                break
            if pos + size > n:
                break
            end, nxt = pos + size, last + 1
            pos += size
        if start < 0 or end <= start:
            return b"", offset
        return data[start:end], nxt

    def delete(self) -> None:
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.remove(self.file(suffix))
            except FileNotFoundError:
                pass


# --------------------------------------------------------------------------------------------
# the partition log


@dataclass
class ProducerEntry:
    epoch: int = -1
    # (first seq, last seq, first offset, last offset) of the last batches, for retries
    batches: list = field(default_factory=list)
    txn_first_offset: int | None = None       # open transaction's first offset


@dataclass(frozen=True)
class LocalRead:
    records: bytes
    next_offset: int                      # offset after the last returned batch
    first_batch_offset: int | None
    upper_bound: int                      # for collecting aborted transactions


class PartitionLog:
    """An append-only log of Kafka segments in ``directory``.

    ``log_start_offset`` may be below the first local segment once tiered segments are deleted
    locally: the owner (BrokerStorage) keeps it; this class serves local data only.
    """

    def __init__(self, directory: str, *, topic: str, partition: int,
                 segment_bytes: int = 1 << 30, interval: int = INDEX_INTERVAL_BYTES,
                 log_append_time: bool = False, segment_ms: int | None = None,
                 segment_jitter_ms: int = 0):
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.segment_jitter_ms = segment_jitter_ms
        self.interval = interval
        self.log_append_time = log_append_time
        self.segments: list[Segment] = []
        self.producers: dict[int, ProducerEntry] = {}
        os.makedirs(directory, exist_ok=True)
        self.epochs = LeaderEpochCache(directory)

    # -- opening
    def load(self, start_offset: int = 0) -> None:
        bases = sorted(int(n[:-4]) for n in os.listdir(self.dir)
                       if n.endswith(".log") and n[:-4].isdigit() and len(n) == 24)
        self.segments = [Segment.load(self.dir, b, interval=self.interval) for b in bases]
        for seg in self.segments:
            seg.roll_jitter_ms = roll_jitter(self.segment_ms, self.segment_jitter_ms)
        if not self.segments:
            self.segments = [self._new_segment(start_offset)]
        self._rebuild_producer_state()
        if not self.epochs.load():
            # no checkpoint (segments imported from elsewhere): the epochs the batches carry
            for seg in self.segments:
                for h in seg.headers_from(0):
                    self.epochs.assign(h.partition_leader_epoch, h.base_offset)
            self.epochs.save()

    def _rebuild_producer_state(self) -> None:
        """Open transactions and last sequences from a walk of the local batches.  Tiered
        segments lie below the LSO, so every open transaction starts in a local segment."""
        self.producers = {}
        for seg in self.segments:
            for h in seg.headers_from(0):
                self._track(h, h.base_offset, h.last_offset, seg, replay=True)

    def _track(self, h: BatchHeader, first: int, last: int, seg, replay: bool = False) -> None:
        if h.producer_id < 0:
            return
        p = self.producers.setdefault(h.producer_id, ProducerEntry())
        if h.producer_epoch > p.epoch:
            p.epoch, p.batches = h.producer_epoch, []
        if h.is_control:
            p.txn_first_offset = None
            return
        if h.base_sequence >= 0:
            p.batches.append((h.base_sequence, h.base_sequence + h.last_offset_delta, first, last))
            del p.batches[:-5]
        if h.is_transactional and p.txn_first_offset is None:
            p.txn_first_offset = first

    # -- offsets
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def local_start_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def last_stable_offset(self) -> int:
        firsts = [p.txn_first_offset for p in self.producers.values() if p.txn_first_offset is not None]
        return min(firsts) if firsts else self.log_end_offset

    def open_transactions(self) -> dict[int, int]:
        return {pid: p.txn_first_offset for pid, p in self.producers.items()
                if p.txn_first_offset is not None}

    # -- writing
    def _new_segment(self, base_offset: int) -> Segment:
        s = Segment.create(self.dir, base_offset, interval=self.interval)
        s.roll_jitter_ms = roll_jitter(self.segment_ms, self.segment_jitter_ms)
        return s

    def _maybe_roll(self, headers: list[BatchHeader], incoming: int) -> Segment:
        """UnifiedLog.maybeRoll before appending ``headers`` (``incoming`` bytes): by size, by
        segment.ms of record time (:func:`.logconfig.should_roll`)."""
        a = self.active
        if should_roll(a, incoming, max(h.max_timestamp for h in headers), headers[-1].last_offset,
                       segment_bytes=self.segment_bytes, segment_ms=self.segment_ms):
            a = self._new_segment(self.log_end_offset)
            self.segments.append(a)
        return a

    def roll(self) -> None:
        """Close the active segment (if it holds data) and start a new one."""
        if self.active.size > 0:
            self.segments.append(self._new_segment(self.log_end_offset))

    def append(self, records: bytes) -> tuple[int, int, int]:
        """Append a Produce request's batches; returns (base offset, last offset, log append
        time or -1).  Exact retries of the last batches of an idempotent producer return the
        offsets they got the first time and write nothing."""
        return self.append_leader(records)[0]

    def append_leader(self, records: bytes) -> tuple[tuple[int, int, int], bytes | None]:
        """:meth:`append`, and the bytes written (offsets and leader epoch assigned), which the
        followers replicate; None when nothing was written (a retried batch)."""
        headers = validate_batches(records, topic=self.topic, partition=self.partition)
        for h in headers:
            if h.is_control:
                raise StorageError("INVALID_RECORD", f"a producer may not write control batches "
                                   f"(byte position {h.position})", topic=self.topic, partition=self.partition)
        dup = self._duplicate(headers)
        if dup is not None:
            return (dup[0], dup[1], -1), None
        buf = bytearray(records)
        offset = self.log_end_offset
        now = int(time.time() * 1000)
        epoch = self.epochs.latest
        for h in headers:
            struct.pack_into(">q", buf, h.position, offset)     # not covered by the CRC
            struct.pack_into(">i", buf, h.position + 12, epoch)  # partitionLeaderEpoch: nor this
            if self.log_append_time:
                attrs = h.attributes | TIMESTAMP_TYPE_MASK
                struct.pack_into(">h", buf, h.position + ATTRIBUTES_OFFSET, attrs)
                struct.pack_into(">q", buf, h.position + 35, now)
                crc = crc32c.crc32c(memoryview(buf)[h.position + ATTRIBUTES_OFFSET:h.end])
                struct.pack_into(">I", buf, h.position + CRC_OFFSET, crc)
            offset += h.last_offset_delta + 1
        data = bytes(buf)
        new_headers = self._write(data)
        return (new_headers[0].base_offset, new_headers[-1].last_offset,
                now if self.log_append_time else -1), data

    def _write(self, data: bytes) -> list[BatchHeader]:
        new_headers = list(iter_headers(data))
        seg = self._maybe_roll(new_headers, len(data))
        seg.append(data, new_headers)
        for h in new_headers:
            self._track(h, h.base_offset, h.last_offset, seg)
        if self.epochs.assign(new_headers[0].partition_leader_epoch, new_headers[0].base_offset):
            self.epochs.save()
        return new_headers

    def append_replicated(self, data: bytes) -> None:
        """A follower's append of batches the leader wrote (offsets and epochs kept), rolling
        at this replica's own segment size (Kafka's appendAsFollower)."""
        headers = validate_batches(data, topic=self.topic, partition=self.partition)
        if headers[0].base_offset != self.log_end_offset:
            raise StorageError("OFFSET_OUT_OF_RANGE", f"replicated batch at offset {headers[0].base_offset}, "
                               f"log end offset {self.log_end_offset}", topic=self.topic, partition=self.partition)
        if headers[0].is_control:
            self._append_marker(data, headers[0], control_type(data, headers[0]) == 1)
        else:
            self._write(data)

    def _duplicate(self, headers):
        """(first, last) offsets if the request repeats cached batches; raise on fencing or a gap."""
        h = headers[0]
        if h.producer_id < 0 or h.base_sequence < 0:
            return None
        p = self.producers.get(h.producer_id)
        if p is None:
            return None
        if h.producer_epoch < p.epoch:
            raise StorageError("INVALID_PRODUCER_EPOCH",
                               f"producer {h.producer_id} epoch {h.producer_epoch} is older than {p.epoch}",
                               topic=self.topic, partition=self.partition)
        if h.producer_epoch > p.epoch or not p.batches:
            return None
        for first_seq, last_seq, first_off, last_off in p.batches:
            if first_seq == h.base_sequence and last_seq == h.base_sequence + h.last_offset_delta:
                return first_off, last_off
        expected = (p.batches[-1][1] + 1) & 0x7FFFFFFF
        if h.base_sequence != expected:
            raise StorageError("OUT_OF_ORDER_SEQUENCE_NUMBER",
                               f"producer {h.producer_id} sent sequence {h.base_sequence}, expected {expected}",
                               topic=self.topic, partition=self.partition)
        return None

    def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int) -> int:
        """Write a COMMIT/ABORT marker for the producer's open transaction; returns its offset.
        An ABORT adds the transaction to the .txnindex of the segment holding the marker."""
        return self.write_txn_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch)[0]

    def write_txn_marker_batch(self, producer_id: int, producer_epoch: int, commit: bool,
                               coordinator_epoch: int) -> tuple[int, bytes]:
        """:meth:`write_txn_marker`, and the control batch written (for the followers)."""
        p = self.producers.setdefault(producer_id, ProducerEntry())
        if producer_epoch < p.epoch:
            raise StorageError("INVALID_PRODUCER_EPOCH",
                               f"marker epoch {producer_epoch} of producer {producer_id} is older than {p.epoch}",
                               topic=self.topic, partition=self.partition)
        offset = self.log_end_offset
        batch = control_batch(offset, producer_id, producer_epoch, commit, coordinator_epoch,
                              int(time.time() * 1000), leader_epoch=self.epochs.latest)
        self._append_marker(batch, next(iter_headers(batch)), commit)
        return offset, batch

    def _append_marker(self, batch: bytes, h: BatchHeader, commit: bool) -> None:
        p = self.producers.setdefault(h.producer_id, ProducerEntry())
        offset = h.base_offset
        first = p.txn_first_offset if p.txn_first_offset is not None else offset
        seg = self._maybe_roll([h], len(batch))
        seg.append(batch, [h])
        self._track(h, offset, offset, seg)      # closes the transaction
        if not commit:
            # LSO once this transaction is done: the next open one, else just past the marker
            others = [q.txn_first_offset for pid, q in self.producers.items()
                      if pid != h.producer_id and q.txn_first_offset is not None]
            lso = min(others) if others else offset + 1
            seg.append_aborted(AbortedTxn(h.producer_id, first, offset, lso))
        if self.epochs.assign(h.partition_leader_epoch, offset):
            self.epochs.save()

    # -- reading
    def segment_for(self, offset: int) -> int | None:
        """Index in ``segments`` of the segment that may hold ``offset``."""
        bases = [s.base_offset for s in self.segments]
        i = bisect.bisect_right(bases, offset) - 1
        return i if i >= 0 else None

    def read(self, offset: int, max_bytes: int, bound: int) -> LocalRead:
        """Whole batches from the one holding ``offset``, within ``max_bytes`` (at least one
        batch), none at or past ``bound`` (HW or LSO).  The caller checked the offset range."""
        i = self.segment_for(offset)
        if i is None:
            i = 0
        while i < len(self.segments):
            seg = self.segments[i]
            pos = seg.find_batch(offset)
            if pos is not None:
                data, nxt = seg.select(pos, offset, max_bytes, bound)
                if not data:
                    return LocalRead(b"", offset, None, offset)
                return LocalRead(data, nxt, struct.unpack_from(">q", data, 0)[0], nxt)
            i += 1
        return LocalRead(b"", offset, None, offset)

    def aborted_local(self, fetch_offset: int, upper_bound: int, from_segment: int = 0) -> tuple[list[AbortedTxn], bool]:
        out = []
        for seg in self.segments[from_segment:]:
            if seg.next_offset <= fetch_offset and not seg.txn_entries:
                continue
            got, complete = collect_aborted(seg.txn_entries, fetch_offset, upper_bound)
            out.extend(got)
            if complete:
                return out, True
        return out, False

    def batch_at_or_after_time(self, ts: int) -> tuple[Segment, BatchHeader] | None:
        """First local batch whose max timestamp >= ``ts`` (time index, then scan)."""
        for seg in self.segments:
            if seg.max_timestamp < ts:
                continue
            start_off = lookup_time(seg.index.times, seg.base_offset, ts)
            pos = lookup_position(seg.index.offsets, seg.base_offset, start_off)
            for h in seg.headers_from(pos):
                if h.max_timestamp >= ts:
                    return seg, h
        return None

    def delete_segments_before(self, offset: int) -> list[Segment]:
        """Drop local segments that end at or before ``offset`` (never the active one)."""
        gone = []
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            seg = self.segments.pop(0)
            seg.delete()
            gone.append(seg)
        return gone
