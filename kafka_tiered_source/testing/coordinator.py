"""The embedded broker's transaction coordinator and consumer-group offset store.

One node does everything, so this is the state Kafka keeps in ``__transaction_state`` and
``__consumer_offsets``, held in memory and written to ``coordinator.json`` in the data dir after
every change (atomic replace), so a broker restarted on the same directory keeps producer ids,
epochs, open transactions and committed offsets.

Markers are written by the server (it owns the storage calls and the event loop); this module
only decides what is allowed and what must be written.
"""
from __future__ import annotations

import json
import os
import threading
import time

from ..dataclass import dataclass, field
from ..protocol.errors import code_of

STATE_FILE = "coordinator.json"

# Transaction states (Kafka's TransactionState names)
EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARE_COMMIT = "PrepareCommit"      # markers being written
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"

#: producer epochs are int16; Kafka bumps the producer id when the epoch would overflow
MAX_EPOCH = 32767


def _now_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorError(Exception):
    """A request the coordinator refuses; ``error_code`` is what the broker answers."""

    def __init__(self, error_name: str, message: str):
        self.error_name = error_name
        self.error_code = code_of(error_name)
        super().__init__(f"{error_name}: {message}")


@dataclass
class TxnState:
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: list = field(default_factory=list)     # [[topic, partition], ...] in add order
    started_ms: int = -1                               # when it became Ongoing (for the timeout)

    def to_json(self):
        return {"producer_id": self.producer_id, "epoch": self.epoch, "timeout_ms": self.timeout_ms,
                "state": self.state, "partitions": self.partitions, "started_ms": self.started_ms}


@dataclass(frozen=True)
class EndTxnPlan:
    """What EndTxn must do: write one marker per partition, then :meth:`Coordinator.complete`."""
    transactional_id: str
    producer_id: int
    epoch: int
    commit: bool
    partitions: tuple          # ((topic, partition), ...)
    already_done: bool = False  # a retry of an EndTxn that completed: answer success, write nothing


class Coordinator:
    """Producer ids, transactions and committed group offsets of one broker, persisted in
    ``data_dir/coordinator.json``.  Thread-safe (one lock; every method is short)."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(os.path.abspath(data_dir), STATE_FILE)
        self._lock = threading.RLock()
        self.next_producer_id = 1000
        self.txns: dict[str, TxnState] = {}
        # group -> topic -> partition -> (offset, leader epoch, metadata)
        self.offsets: dict[str, dict[str, dict[int, tuple[int, int, str | None]]]] = {}
        self._load()

    # ------------------------------------------------------------------ persistence
    def _load(self) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.path) as f:
            doc = json.load(f)
        self.next_producer_id = doc["next_producer_id"]
        self.txns = {k: TxnState(**v) for k, v in doc["transactions"].items()}
        self.offsets = {g: {t: {int(p): tuple(v) for p, v in parts.items()} for t, parts in topics.items()}
                        for g, topics in doc["groups"].items()}

    def _save(self) -> None:
        doc = {"version": 1, "next_producer_id": self.next_producer_id,
               "transactions": {k: v.to_json() for k, v in self.txns.items()},
               "groups": {g: {t: {str(p): list(v) for p, v in parts.items()} for t, parts in topics.items()}
                          for g, topics in self.offsets.items()}}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.path)

    def _new_producer_id(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    # ------------------------------------------------------------------ producers
    def init_producer_id(self, transactional_id: str | None, timeout_ms: int,
                         producer_id: int = -1, epoch: int = -1):
        """InitProducerId.  Returns ``(producer_id, epoch, abort_plan)``; ``abort_plan`` is an
        :class:`EndTxnPlan` for a transaction left open by the previous incarnation (Kafka aborts
        it before fencing), to be carried out and then :meth:`complete`\\ d by the caller — the
        new epoch is already in force, so the old producer is fenced either way."""
        with self._lock:
            if transactional_id is None:
                pid = self._new_producer_id()
                self._save()
                return pid, 0, None
            if timeout_ms <= 0:
                raise CoordinatorError("INVALID_TRANSACTION_TIMEOUT",
                                       f"transaction timeout {timeout_ms} ms must be positive")
            st = self.txns.get(transactional_id)
            if st is None:
                st = TxnState(self._new_producer_id(), 0, timeout_ms)
                self.txns[transactional_id] = st
                self._save()
                return st.producer_id, st.epoch, None
            if producer_id >= 0 and (producer_id != st.producer_id or epoch != st.epoch):
                # KIP-360 epoch bump from a producer that is not the current one
                raise CoordinatorError("PRODUCER_FENCED",
                                       f"transactional id {transactional_id!r}: producer {producer_id} "
                                       f"epoch {epoch} is not the current producer")
            if st.state in (PREPARE_COMMIT, PREPARE_ABORT):
                raise CoordinatorError("CONCURRENT_TRANSACTIONS",
                                       f"transactional id {transactional_id!r} is completing a transaction")
            open_parts = tuple((t, p) for t, p in st.partitions) if st.state == ONGOING else ()
            old_pid = st.producer_id
            if st.epoch >= MAX_EPOCH - 1:
                st.producer_id, st.epoch = self._new_producer_id(), 0
            else:
                st.epoch += 1
            st.timeout_ms = timeout_ms
            plan = None
            if open_parts:
                # Kafka writes the ABORT markers with the bumped epoch, which fences the old producer
                # on those partitions too; a new producer id (epoch overflow) needs the old id's markers
                plan = EndTxnPlan(transactional_id, old_pid,
                                  st.epoch if old_pid == st.producer_id else MAX_EPOCH, False, open_parts)
                st.state = PREPARE_ABORT
            else:
                st.state, st.partitions = EMPTY, []
            self._save()
            return st.producer_id, st.epoch, plan

    def _check(self, transactional_id: str, producer_id: int, epoch: int) -> TxnState:
        st = self.txns.get(transactional_id)
        if st is None or st.producer_id != producer_id:
            raise CoordinatorError("INVALID_PRODUCER_ID_MAPPING",
                                   f"transactional id {transactional_id!r} is not mapped to producer {producer_id}")
        if epoch != st.epoch:
            raise CoordinatorError("PRODUCER_FENCED" if epoch < st.epoch else "INVALID_PRODUCER_EPOCH",
                                   f"transactional id {transactional_id!r}: epoch {epoch}, current {st.epoch}")
        return st

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[tuple[str, int]]) -> None:
        with self._lock:
            st = self._check(transactional_id, producer_id, epoch)
            if st.state in (PREPARE_COMMIT, PREPARE_ABORT):
                raise CoordinatorError("CONCURRENT_TRANSACTIONS",
                                       f"transactional id {transactional_id!r} is completing a transaction")
            if st.state != ONGOING:
                st.started_ms = _now_ms()
            have = {(t, p) for t, p in st.partitions}
            for t, p in partitions:
                if (t, p) not in have:
                    st.partitions.append([t, p])
                    have.add((t, p))
            st.state = ONGOING
            self._save()

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> EndTxnPlan:
        with self._lock:
            st = self._check(transactional_id, producer_id, epoch)
            if st.state in (PREPARE_COMMIT, PREPARE_ABORT):
                raise CoordinatorError("CONCURRENT_TRANSACTIONS",
                                       f"transactional id {transactional_id!r} is completing a transaction")
            if st.state in (COMPLETE_COMMIT, COMPLETE_ABORT):
                if (st.state == COMPLETE_COMMIT) != commit:
                    raise CoordinatorError("INVALID_TXN_STATE",
                                           f"transactional id {transactional_id!r} already completed "
                                           f"with {st.state}")
                return EndTxnPlan(transactional_id, producer_id, epoch, commit, (), already_done=True)
            # An Empty transaction (nothing added) ends trivially: there is nothing to mark.
            plan = EndTxnPlan(transactional_id, producer_id, epoch, commit,
                              tuple((t, p) for t, p in st.partitions))
            if st.state == ONGOING:
                st.state = PREPARE_COMMIT if commit else PREPARE_ABORT
                self._save()
            return plan

    def expire(self, now_ms: int | None = None) -> list[EndTxnPlan]:
        """Abort plans for transactions open longer than their timeout.  As Kafka does, the
        epoch is bumped first, which fences the producer that let the transaction run out."""
        now_ms = _now_ms() if now_ms is None else now_ms
        plans = []
        with self._lock:
            for tid, st in self.txns.items():
                if st.state != ONGOING or st.started_ms < 0 or now_ms - st.started_ms <= st.timeout_ms:
                    continue
                old_pid = st.producer_id
                if st.epoch >= MAX_EPOCH - 1:
                    st.producer_id, st.epoch = self._new_producer_id(), 0
                    marker_epoch = MAX_EPOCH
                else:
                    st.epoch += 1
                    marker_epoch = st.epoch
                st.state = PREPARE_ABORT
                plans.append(EndTxnPlan(tid, old_pid, marker_epoch, False,
                                        tuple((t, p) for t, p in st.partitions)))
            if plans:
                self._save()
        return plans

    def pending(self) -> list[EndTxnPlan]:
        """Transactions whose markers were being written when the broker stopped (PrepareCommit /
        PrepareAbort in the state file): what to write again on start-up, as Kafka's coordinator
        does when it loads its state.  A marker written twice only closes an already closed
        transaction, which readers ignore."""
        with self._lock:
            return [EndTxnPlan(tid, st.producer_id, st.epoch, st.state == PREPARE_COMMIT,
                               tuple((t, p) for t, p in st.partitions))
                    for tid, st in self.txns.items() if st.state in (PREPARE_COMMIT, PREPARE_ABORT)]

    def complete(self, plan: EndTxnPlan) -> None:
        """Markers of ``plan`` are written: the transaction is over."""
        with self._lock:
            st = self.txns.get(plan.transactional_id)
            if st is None:
                return
            st.state = COMPLETE_COMMIT if plan.commit else COMPLETE_ABORT
            st.partitions = []
            st.started_ms = -1
            self._save()

    def transaction(self, transactional_id: str) -> TxnState | None:
        with self._lock:
            st = self.txns.get(transactional_id)
            return None if st is None else TxnState(st.producer_id, st.epoch, st.timeout_ms, st.state,
                                                    [list(x) for x in st.partitions], st.started_ms)

    # ------------------------------------------------------------------ group offsets
    def commit_offsets(self, group: str, offsets: list[tuple[str, int, int, int, str | None]]) -> None:
        """``offsets``: (topic, partition, offset, leader epoch, metadata)."""
        with self._lock:
            g = self.offsets.setdefault(group, {})
            for t, p, off, epoch, meta in offsets:
                g.setdefault(t, {})[p] = (off, epoch, meta)
            self._save()

    def committed(self, group: str) -> dict[str, dict[int, tuple[int, int, str | None]]]:
        with self._lock:
            return {t: dict(parts) for t, parts in self.offsets.get(group, {}).items()}
