"""The catalog's snapshot form of a replayed state (planning/remote_log_columns.py): what was
replayed comes back whole through JSON, and a document that does not hold a state is refused."""
from __future__ import annotations

import json

import pytest

from kafka_tiered_source.planning import remote_log_columns as columns
from kafka_tiered_source.planning.remote_log_state import RemoteLogState

TID, OTHER = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"


def sid(i: int) -> str:
    return f"{i:022d}"


def replayed() -> RemoteLogState:
    """Copies of two partitions in every state, with custom metadata, several leader epochs, an
    overlapping new leader's copy and a partition delete; rows as native/rlm_rows.c gives them."""
    s = RemoteLogState()
    made = [(0, 0, TID, 0, "orders", sid(1), 0, 99, 1000, 4096, ((0, 0),), None, True, 0, 0),
            (0, 1, TID, 0, "orders", sid(2), 100, 199, 2000, 4096, ((0, 100), (3, 150)), b"\x01cm", False, 0, 3),
            (1, 2, TID, 0, sid(1), 1, None, -1),
            (1, 3, TID, 0, sid(2), 1, b"\x02new", 188),
            (0, 4, TID, 0, "orders", sid(3), 150, 249, 3000, 8192, ((3, 150),), None, False, 0, 3),
            (1, 5, TID, 0, sid(3), 1, None, -1),          # a superset of sid(2) in epoch 3
            (0, 6, TID, 0, "orders", sid(4), 250, 299, 3000, 100, ((3, 250),), None, False, 0, 3),
            (0, 7, OTHER, 4, "payments", sid(5), 0, 9, 5, 10, ((1, 0),), None, False, 0, 1),
            (2, 8, OTHER, 4)]
    for row in made:
        s.apply_row(row, 7)
    s.positions[7] = 9
    return s


def test_a_replayed_state_comes_back_whole():
    state = replayed()
    back = columns.from_doc(json.loads(json.dumps(columns.to_doc(state))))
    assert back.to_dict() == state.to_dict()
    p = back.partition(TID, 0)
    assert [c.segment_id for c in p.readable()] == [sid(1), sid(2), sid(3)]
    assert p.copies[sid(2)].custom_metadata == b"\x02new" and p.copies[sid(2)].end_offset == 188
    assert p.copies[sid(2)].leader_epochs == ((0, 100), (3, 150)) and p.copies[sid(1)].txn_index_empty
    assert p.copies[sid(4)].state == 0 and p.copies[sid(3)].order == (7, 5)
    assert (p.epochs[3].keys, p.epochs[3].ids) == ([150], [sid(3)])
    assert back.partition(OTHER, 4).deleted and back.positions == {7: 9}


@pytest.mark.parametrize("damage", ["ids", "ints", "epochs", "pairs"])
def test_a_document_that_holds_no_state_is_refused(damage):
    doc = json.loads(json.dumps(columns.to_doc(replayed())))
    part = doc["partitions"][0]
    if damage == "ids":
        part["ids"] = part["ids"][:-1]
    elif damage == "ints":
        part["ints"] = part["ints"][:-12]
    elif damage == "epochs":
        part["epochs"]["3"]["ids"] += "x" * 22
    else:
        part["leader_epochs"] = part["leader_epochs"][:-12]
    with pytest.raises(ValueError):
        columns.from_doc(doc)


def test_the_native_columns_are_the_pure_ones(monkeypatch):
    """A partition's columns made in C (native/rlm_replay.c ``rlm_columns``) are the document the
    pure-Python path writes, byte for byte; copies it does not take as usual (custom metadata,
    another topic name) go the pure way.  The expected document: the pure path, fed copies made
    by hand with every int column distinct."""
    from kafka_tiered_source.planning.remote_log_state import CopyMeta, EpochState, PartitionState
    if columns._columns_native() is None:
        pytest.fail("the native extension is built but rlm_columns is not used")
    usual = PartitionState()
    for i in range(5):
        usual.copies[sid(i)] = CopyMeta(sid(i), "orders", TID, 3, 10 * i, 10 * i + 9, 4096 + i, 1_000 + i,
                                        tuple((e, 10 * i + e) for e in range(i % 3 + 1)), None, i % 2 == 0,
                                        i % 4, (7, 2 * i + 1), i - 1)
    usual.epochs[0] = EpochState([0, 10], [sid(0), sid(1)], 19)
    odd = PartitionState()
    odd.copies[sid(9)] = CopyMeta(sid(9), "orders", TID, 3, 0, 9, 1, 2, ((0, 0),), b"\x01", True, 1, (7, 1), -1)
    renamed = PartitionState()
    renamed.copies[sid(8)] = CopyMeta(sid(8), "orders", TID, 3, 0, 9, 1, 2, ((0, 0),), None, True, 1, (7, 1), -1)
    renamed.copies[sid(7)] = CopyMeta(sid(7), "orders-old", TID, 3, 10, 19, 1, 2, ((0, 10),), None, True, 1, (7, 3), -1)
    docs = {}
    for way in ("native", "pure"):
        if way == "pure":
            monkeypatch.setattr(columns, "_native_columns", None)
        docs[way] = [columns.partition_to_doc(TID, 3, s) for s in (usual, odd, renamed)]
    assert json.dumps(docs["native"]) == json.dumps(docs["pure"])
    assert docs["pure"][1]["custom"] == {"0": "AQ=="} and docs["pure"][2]["names"] == {"1": "orders-old"}
    back = columns.partition_from_doc(json.loads(json.dumps(docs["native"][0])))[1]
    assert [c for c in back.copies.values()] == list(usual.copies.values())
