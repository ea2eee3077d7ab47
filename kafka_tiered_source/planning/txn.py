"""read_committed: which aborted transactions each read task must know.

A task's reader of a partition keeps one filter from the partition's first tiered range in the
task (:class:`~.tasks.RemoteRange`) to the task's end, and feeds it the batches of the broker
ranges in between too; the brokers' own answers decide those.  So it must apply the aborted
transactions whose ABORT marker is at or after the first tiered offset ``F`` it reads (an
earlier marker was applied before ``F``, by whoever read those offsets) and that start before
the task's end ``E``.  That is Kafka's ``collectAbortedTxns`` for one fetch over the task's
span, and it holds whether the list comes from KIP-1248 answers, a broker fetch, or the
``.txnindex`` files of tiered segments.  The markers may lie past ``E``: past the task, and
past the partition's end (:mod:`.txn_ends`).  A task that reads a partition through the
brokers only needs no list: each Fetch answer carries its own.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from .tasks import AbortedTransaction, PartitionTxnInfo, ReadTask, RemoteRange

# (topic, partition, first tiered offset read, end offset read, the task's first tiered range
# of the partition) -> the aborted transactions that reader must apply.
AbortedFor = Callable[[str, int, int, int, object], Iterable[AbortedTransaction]]
# (topic, partition) -> the aborted transactions whose markers lie at or past the partition's end
PastEndFor = Callable[[str, int], Iterable[AbortedTransaction]]


def with_txn(task: ReadTask, lso: dict, aborted_for: AbortedFor,
             past_end: PastEndFor = lambda topic, p: ()) -> ReadTask:
    """The task with a :class:`PartitionTxnInfo` per partition it reads: the LSO (nothing at or
    past it is read) and the aborted transactions that reader must apply."""
    infos = []
    for topic, p in task.topic_partitions:
        mine = [r for r in task.ranges if (r.topic, r.partition) == (topic, p)]
        tiered = [r for r in mine if isinstance(r, RemoteRange)]
        aborted: tuple = ()
        if tiered:
            first, end = tiered[0].offset_start, max(r.offset_end for r in mine)
            found = [*aborted_for(topic, p, first, end, tiered[0]),
                     *(a for a in past_end(topic, p) if a.first_offset < end)]
            aborted = tuple(dict.fromkeys(found))
        infos.append(PartitionTxnInfo(topic, p, lso[(topic, p)], aborted))
    return ReadTask(task.index, task.ranges, tuple(infos))


def aborted_in(entries: Iterable, first: int, end: int) -> Iterator[AbortedTransaction]:
    """Transaction-index entries (``AbortedTxn``) a reader of ``[first, end)`` must apply: the
    marker at or after ``first``, the first offset before ``end``."""
    for e in entries:
        if e.last_offset >= first and e.first_offset < end:
            yield AbortedTransaction(e.producer_id, e.first_offset)


def with_txn_all(tasks: list[ReadTask], ranges: Iterable, located: dict) -> tuple[list[ReadTask], dict]:
    """:func:`with_txn` for every task of a plan (``located``: each partition's
    :class:`~.locate.Located`), and what finding the markers past each partition's end cost
    (``{(topic, partition): MarkerCost}``, only where something was spent)."""
    lso = {(r.topic, r.partition): r.latest for r in ranges}

    def past_end(topic, p):
        pe = located[(topic, p)].past_end
        return pe.aborted if pe is not None else ()

    out = [with_txn(t, lso, lambda topic, p, *rest: located[(topic, p)].aborted_for(topic, p, *rest), past_end)
           for t in tasks]
    costs = {key: loc.past_end.cost for key, loc in located.items()
             if loc.past_end is not None and loc.past_end.cost}
    return out, costs
