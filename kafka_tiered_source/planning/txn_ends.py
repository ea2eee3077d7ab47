"""read_committed past a partition's end: the aborted transactions with records before the end
``E`` of a read whose ABORT markers lie at or past ``E``.

A reader of ``[first, E)`` must drop every aborted transaction with ``firstOffset < E`` and its
marker at or after ``first``.  The markers before ``E`` come with the range (:mod:`.txn`,
:mod:`.tiered`); this module finds the others, wherever they are: in the next copy, several
copies later, in the local tail, past the LSO (records 5-9 aborted, another transaction open
from 10, the marker at 13: a read of ``[0, 10)`` must still drop 5-9).  Every transaction with
records below an ``E <= LSO`` is decided, so its marker exists; which producers are open at ``E``
is unknown until the data is read, so the search proves instead that it is complete:

* A ``.txnindex`` entry's ``lastStableOffset`` is the LSO right after its marker (Kafka's
  ``ProducerStateManager.lastStableOffset``: the first offset of the earliest *other* ongoing
  transaction, else the marker + 1).  An entry with ``lastStableOffset >= E`` therefore proves
  that every transaction with records before ``E`` has its marker at or before that entry (one
  still open there would have held the LSO below ``E``).  Kafka's own
  ``TransactionIndex.collectAbortedTxns`` ends its search on this very condition (upstream
  checks ``lastStableOffset >= upperBound``, not ``lastOffset``), so a broker's list is complete
  the same way.

Sources, cheapest first, stopping at the first that completes the search:

1. the in-range entries already read: one of them may prove it (no cost);
2. the ``.txnindex`` of the tiered copies that serve the offsets from ``E`` on (the coverage map
   past the end, so off-lineage markers are never taken), in offset order, skipping copies whose
   index is known to be empty (``TxnIndexEmpty``, an Aiven manifest, a listing): one GET each;
3. with a broker, one read_committed Fetch of one byte: its ``AbortedTransactions`` lists every
   aborted transaction with a marker at or after the fetch offset that overlaps what it returns
   (Kafka's ``collectAbortedTxns`` over the remote copies, then every local segment, markers past
   the LSO included; an answer at or past the LSO is empty, so the offset asked is below it).
   It is asked where no copy serves (the local tail), at ``LSO - 1`` once every copy past ``E``
   was walked without proof, or after :data:`WALK_GETS` copies' indexes proved nothing (a topic
   that never aborts has no entry to prove it; with ``fetch.remote.fallback=never`` the walk goes
   on rather than have the broker read a tiered batch);
4. offline (no broker), the walk goes to the end of the tiered range, which is complete there:
   the offline end of a read_committed range stops before any transaction without a marker in
   the tiered range (:meth:`.listing.StoreListing.open_transactions`, the offline counterpart of
   the LSO), so every transaction with records below ``E`` has its marker in a copy.

A copy's index that cannot be read, with no broker to ask (offline, or
``fetch.remote.fallback=never``), leaves one way: the batch headers of the read up to ``E`` say
which producers are open there.  None: nothing is missing.  Otherwise the read fails with
:class:`~kafka_tiered_source.errors.UnresolvedTransactionError` naming the partition, the offset
and the producers: an outcome is never guessed.

What the search costs (index GETs and bytes, broker fetches and bytes) is kept per partition
(:class:`MarkerCost`) for ``estimate`` and ``describe_read``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from ..dataclass import dataclass
from ..errors import BrokerError, RemoteStorageError, UnresolvedTransactionError
from ..logs import get_logger
from ..records.header import iter_headers
from ..storage.indexes import AbortedTxn, parse_txn_index
from ..storage.segment import RemoteSegment
from .tasks import AbortedTransaction

log = get_logger(__name__)

# Later copies whose indexes were read, proving nothing, before the broker is asked instead (a
# topic that never aborts has no entry that could prove anything: its copies would all be read).
WALK_GETS = 8

# (start, end exclusive, the copy serving it or None for the broker)
Span = tuple[int, int, Optional[RemoteSegment]]


@dataclass
class MarkerCost:
    """What finding the markers past a partition's end cost: ``.txnindex`` GETs (Aiven: a
    manifest GET counted when the manifest was not read yet) and their bytes, broker fetches
    and the record bytes they returned."""
    index_gets: int = 0
    index_bytes: int = 0
    broker_fetches: int = 0
    broker_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.index_gets or self.broker_fetches)

    def __iadd__(self, other: "MarkerCost") -> "MarkerCost":
        self.index_gets += other.index_gets
        self.index_bytes += other.index_bytes
        self.broker_fetches += other.broker_fetches
        self.broker_bytes += other.broker_bytes
        return self

    def as_dict(self) -> dict:
        return {"index_gets": self.index_gets, "index_bytes": self.index_bytes,
                "broker_fetches": self.broker_fetches, "broker_bytes": self.broker_bytes}

    def describe(self) -> str:
        parts = []
        if self.index_gets:
            parts.append(f"{self.index_gets} GETs ({self.index_bytes:,} bytes) of later transaction indexes")
        if self.broker_fetches:
            parts.append(f"{self.broker_fetches} broker fetches ({self.broker_bytes:,} bytes)")
        return " + ".join(parts) or "nothing"


class TxnIndexes:
    """The ``.txnindex`` entries of tiered copies, each copy's read once per plan."""

    def __init__(self, fetcher):
        self.fetcher = fetcher
        self._entries: dict[str, list[AbortedTxn]] = {}

    def entries(self, seg: RemoteSegment, cost: MarkerCost | None = None) -> list[AbortedTxn]:
        """The copy's entries (a storage error raises); a read made now is added to ``cost``:
        the GETs and bytes the fetcher's observer saw (the planner's fetchers count), else one
        GET (and one for an Aiven manifest not read yet) and the index's bytes."""
        got = self._entries.get(seg.segment_id)
        if got is not None:
            return got
        seen: Any = getattr(self.fetcher, "observer", None)
        counts = isinstance(getattr(seen, "requests", None), int) and isinstance(getattr(seen, "bytes", None), int)
        before = (seen.requests, seen.bytes) if counts else (0, 0)
        gets = 1
        layout = getattr(self.fetcher, "layout", None)
        if layout is not None and getattr(layout, "reads_manifests", False) and layout.cached_manifest(seg) is None:
            gets += 1
        data = None
        try:
            data = self.fetcher.fetch_index(seg, "transaction")
        finally:
            if cost is not None:
                if counts and seen.requests > before[0]:
                    cost.index_gets += seen.requests - before[0]
                    cost.index_bytes += seen.bytes - before[1]
                else:
                    cost.index_gets += gets
                    cost.index_bytes += len(data or b"")
        got = (parse_txn_index(data, location=f"{seg.topic}-{seg.partition} segment {seg.segment_id}")
               if data else [])
        self._entries[seg.segment_id] = got
        return got


def broker_aborted(client, pr, offset: int, isolation_level: int, cost: MarkerCost | None = None,
                   *, answered: list | None = None) -> list[AbortedTransaction]:
    """One read_committed Fetch of one byte at ``offset`` (below the LSO): its aborted list.
    A KIP-1248 broker is asked for a location, so it reads no tiered record for it.
    ``answered`` gets whether the answer covers the offset (a batch or a location): an empty
    answer (a remote read that found no batch, as Kafka's may) lists nothing at all."""
    res = client.fetch(pr.topic, pr.partition, offset, max_bytes=1, partition_max_bytes=1, max_wait_ms=0,
                       min_bytes=0, isolation_level=isolation_level,
                       request_remote_location=client.advertises_kip1248(pr.topic, pr.partition))
    if cost is not None:
        cost.broker_fetches += 1
        cost.broker_bytes += len(res.records or b"")
    if answered is not None:
        answered.append(bool(res.records) or res.has_remote_location)
    return [AbortedTransaction(a.producer_id, a.first_offset) for a in (res.partition.aborted_transactions or ())]


# (start, end exclusive) -> the batch headers of those offsets in log order (read_uncommitted)
Headers = Callable[[int, int], Iterable]


class PastEnd:
    """The aborted transactions a reader of ``pr`` must know whose markers lie at or past
    ``pr.end``, found once, lazily (:attr:`aborted`), and what finding them cost.

    ``after``: the spans serving ``[pr.end, ...)`` in offset order (online: up to the LSO;
    offline: to the end of the tiered range); ``indexes``: the plan's :class:`TxnIndexes`;
    ``empty(seg)``: the copy's index is known to be empty; ``known()``: the entries already read
    for the range (served markers below ``pr.end``); ``client``: the broker client, None offline;
    ``ask_on_storage_fault``: a copy's index that cannot be read is asked of the broker (else
    the batch headers, ``headers``, decide, or the read fails by name)."""

    def __init__(self, pr, after: Sequence[Span], indexes: TxnIndexes, *,
                 empty: Callable[[RemoteSegment], bool] = lambda seg: False,
                 known: Callable[[], Iterable[AbortedTxn]] = tuple, client=None, isolation_level: int = 1,
                 ask_on_storage_fault: bool = True, headers: Headers | None = None):
        self.pr = pr
        self.after = list(after)
        self.indexes = indexes
        self.empty = empty
        self.known = known
        self.client = client
        self.iso = isolation_level
        self.ask_on_storage_fault = ask_on_storage_fault
        self.headers = headers
        self.cost = MarkerCost()
        self._aborted: tuple[AbortedTransaction, ...] | None = None

    @property
    def resolved(self) -> bool:
        return self._aborted is not None

    @property
    def aborted(self) -> tuple[AbortedTransaction, ...]:
        """``(producer id, first offset)`` of every aborted transaction with records before
        ``pr.end`` whose marker lies at or past ``pr.end - 1`` (a marker at ``pr.end - 1`` is
        read with the range; listing it too is harmless)."""
        if self._aborted is None:
            self._aborted = tuple(dict.fromkeys(self._search()))
        return self._aborted

    def _search(self) -> list[AbortedTransaction]:
        pr, end = self.pr, self.pr.end
        if pr.start >= end or any(x.last_stable_offset >= end for x in self.known()):
            return []
        found: list[AbortedTransaction] = []
        unproductive = 0
        for s, e, seg in self.after:
            if seg is None:                      # no copy serves it: the broker lists the rest
                return found + self._ask(s)
            if self.empty(seg):
                continue
            if self.client is not None and self.ask_on_storage_fault and unproductive >= WALK_GETS:
                return found + self._ask(s)      # (with fallback=never the walk goes on instead)
            spent = self.cost.index_gets
            try:
                entries = self.indexes.entries(seg, self.cost)
            except RemoteStorageError as exc:
                if self.client is not None and self.ask_on_storage_fault:
                    log.warning("%s-%d: the transaction index of %s cannot be read (%s); asking the broker "
                                "for the aborted transactions from offset %d", pr.topic, pr.partition,
                                seg.segment_id, exc, s)
                    return found + self._ask(s)
                return found + self._without(
                    f"the transaction index of tiered copy {seg.segment_id} (offsets [{seg.base_offset}, "
                    f"{seg.end_offset}]) cannot be read ({exc})")
            unproductive += self.cost.index_gets > spent      # read now, not with the range
            for x in sorted(entries, key=lambda x: x.last_offset):
                if not s <= x.last_offset < e:   # a marker this copy does not serve
                    continue
                if x.first_offset < end:
                    found.append(AbortedTransaction(x.producer_id, x.first_offset))
                if x.last_stable_offset >= end:
                    return found
        if self.client is None:
            # offline: every transaction with records below the end has its marker in the tiered
            # range (the offline end stops before any that has none), and every copy was walked
            return found
        # Every copy past the end walked without proof: the rest is in the local log.  Asked
        # below the LSO (an answer at it is empty), at the last offset of the range read at worst.
        last = self.after[-1][1] if self.after else end
        return found + self._ask(max(end, min(last, pr.latest)) - 1)

    def _ask(self, offset: int) -> list[AbortedTransaction]:
        answered: list = []
        got = broker_aborted(self.client, self.pr, offset, self.iso, self.cost, answered=answered)
        if not answered[0]:
            return self._without(f"the broker's read_committed answer at offset {offset} held no batch, so "
                                 f"its aborted transactions say nothing", asked=True)
        return [a for a in got if a.first_offset < self.pr.end]

    def _without(self, why: str, *, asked: bool = False) -> list[AbortedTransaction]:
        """Nothing left to ask: the producers open at the end, from the batch headers of the
        range.  None open: nothing is missing.  Otherwise fail, naming them."""
        pr = self.pr
        no_broker = ("nothing else can say where their markers are" if asked
                     else "no broker may be asked instead (fetch.remote.fallback=never)" if self.client is not None
                     else "no broker can be asked instead (an offline read)")
        start = max(pr.start, max((x.last_stable_offset for x in self.known()), default=pr.start))
        try:
            open_now = open_producers(self.headers(start, pr.end) if self.headers else None)
        except (RemoteStorageError, BrokerError, ValueError) as again:
            open_now = None
            why += f"; reading the batch headers of offsets [{start}, {pr.end}) failed too ({again})"
        if open_now == {}:
            log.info("%s-%d: %s, but no transaction is open at offset %d: nothing to find past it",
                     pr.topic, pr.partition, why, pr.end)
            return []
        raise UnresolvedTransactionError(
            f"{pr.topic}-{pr.partition}: read_committed cannot tell whether the transactions open at offset "
            f"{pr.end} aborted: " + (", ".join(f"producer {pid} from offset {first}" for pid, first in
                                               sorted(open_now.items(), key=lambda kv: kv[1]))
                                     if open_now else "the producers open there are unknown")
            + f"; {why}, and {no_broker}", topic=pr.topic, partition=pr.partition, offset=pr.end,
            producer_ids=tuple(sorted(open_now)) if open_now else ())


def open_producers(headers: Iterable | None) -> dict[int, int] | None:
    """``{producer id: first offset}`` of the transactions still open after ``headers`` (batch
    headers in log order from a point where none of interest was open); None when unknown."""
    if headers is None:
        return None
    open_first: dict[int, int] = {}
    for h in headers:
        if h.producer_id < 0:
            continue
        if h.is_control:
            open_first.pop(h.producer_id, None)
        elif h.is_transactional:
            open_first.setdefault(h.producer_id, h.base_offset)
    return open_first


def piece_headers(pieces: Sequence, fetcher, client=None) -> Headers:
    """Batch headers of ``[start, end)`` of a partition read through ``pieces`` (tiered slices
    from ``fetcher``, broker ranges read_uncommitted through ``client``)."""
    def headers(start: int, end: int) -> Iterator:
        for piece in pieces:
            lo, hi = max(start, piece.offset_start), min(end, piece.offset_end)
            if lo >= hi:
                continue
            seg = getattr(piece, "segment", None)
            if seg is not None:
                pos = max((p for o, p in getattr(piece, "checkpoints", ()) if o <= lo), default=0)
                data = fetcher.fetch_log_segment(seg, pos, None)
                yield from (h for h in iter_headers(data) if h.last_offset >= lo and h.base_offset < hi)
                continue
            if client is None:
                raise BrokerError(f"offsets [{lo}, {hi}) are the brokers' to serve and there is no broker")
            offset = lo
            while offset < hi:
                res = client.fetch(piece.topic, piece.partition, offset, isolation_level=0)
                last = None
                for h in iter_headers(res.records or b""):
                    if h.base_offset >= hi:
                        return
                    if h.last_offset >= offset:
                        yield h
                    last = h.last_offset
                if last is None or last + 1 <= offset:
                    raise BrokerError(f"no batch at offset {offset}", api="Fetch", topic=piece.topic,
                                      partition=piece.partition)
                offset = last + 1
    return headers
