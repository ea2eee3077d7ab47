"""read_committed: which aborted transactions each read task must know.

A reader that starts at offset F of a partition must apply the aborted transactions whose ABORT
marker is at or after F (an earlier marker was applied before F, by whoever read those offsets)
and that start before the end of what it reads.  That is Kafka's ``collectAbortedTxns`` for one
fetch over the task's span, and it holds whether the list comes from KIP-1248 answers, a broker
fetch, or the ``.txnindex`` files of tiered segments.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from .tasks import AbortedTransaction, PartitionTxnInfo, ReadTask

# (topic, partition, first offset read, end offset read, the task's first range of the
# partition) -> the aborted transactions that reader must apply.
AbortedFor = Callable[[str, int, int, int, object], Iterable[AbortedTransaction]]


def with_txn(task: ReadTask, lso: dict, aborted_for: AbortedFor) -> ReadTask:
    """The task with a :class:`PartitionTxnInfo` per partition it reads: the LSO (nothing at or
    past it is read) and the aborted transactions that reader must apply."""
    infos = []
    for topic, p in task.topic_partitions:
        mine = [r for r in task.ranges if (r.topic, r.partition) == (topic, p)]
        first, end = mine[0].offset_start, max(r.offset_end for r in mine)
        aborted = dict.fromkeys(aborted_for(topic, p, first, end, mine[0]))
        infos.append(PartitionTxnInfo(topic, p, lso[(topic, p)], tuple(aborted)))
    return ReadTask(task.index, task.ranges, tuple(infos))


def aborted_in(entries: Iterable, first: int, end: int) -> Iterator[AbortedTransaction]:
    """Transaction-index entries (``AbortedTxn``) a reader of ``[first, end)`` must apply: the
    marker at or after ``first``, the first offset before ``end``."""
    for e in entries:
        if e.last_offset >= first and e.first_offset < end:
            yield AbortedTransaction(e.producer_id, e.first_offset)
