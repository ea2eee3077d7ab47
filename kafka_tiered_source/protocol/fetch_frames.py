"""Fetch requests of a walk's rounds, encoded from parts made once (:class:`FetchFrames`).

A walk (:func:`~.rounds.fetch_rounds`) asks the same thousands of partitions round after round;
only their offsets change.  The codec made each round's request anew (a ``FetchPartition`` per
partition, written field by field): a fifth of the KIP-1248 planner's time.  Here the request
header and the body's fields before and after ``Topics`` are encoded once by the codec, each
partition is one ``struct`` pack (its layout checked against the codec's own encoding of the
same values when the frames are made: where they differ, e.g. a version whose partition has
fields this layout lacks, every request goes through the codec), and a request that asks the
same partitions as the last one of its group is that request with the offsets patched in.
"""
from __future__ import annotations

import struct
from typing import Any, Sequence

from . import codec, messages as m
from . import primitives as P
from .fetch import FetchAsk, FetchBuilder

# FetchPartition in flexible versions: partition, current leader epoch, fetch offset, last
# fetched epoch, log start offset, partition max bytes, an empty tagged-field section
# (ReplicaDirectoryId v17+ and HighWatermark v18+ are tagged and left at their defaults).
_PARTITION = struct.Struct(">iiqiqiB")
_OFFSET_AT = 8                       # the fetch offset's place in it
_OFFSET = struct.Struct(">qiqi")     # fetch offset .. partition max bytes, patched together
_CID = struct.Struct(">i")
_CID_AT = 8                          # size, api key, api version, then the correlation id


class EncodedFetch:
    """One encoded FetchRequest (size prefix and header included; the correlation id is set
    when it is sent): ``keys`` the partitions it asks, in order."""

    __slots__ = ("frame", "keys", "starts")
    API_KEY = 1                      # Fetch (what a connection names in its errors)

    def __init__(self, frame: bytearray, keys: Sequence, starts: list[int]):
        self.frame, self.keys, self.starts = frame, keys, starts


def encode(req: Any, version: int, cid: int, client_id: str | None) -> Any:
    """The frame :meth:`~.connection.BrokerConnection.exchange` sends (its ``encode``)."""
    if isinstance(req, EncodedFetch):
        _CID.pack_into(req.frame, _CID_AT, cid)
        return req.frame
    return codec.encode_request(req, version, cid, client_id)


class FetchFrames:
    """The requests of one walk to one broker (``builder``'s version and topics), with the
    request-level values fixed for the walk."""

    def __init__(self, builder: FetchBuilder, client_id: str | None, *, max_wait_ms: int, min_bytes: int,
                 max_bytes: int, isolation_level: int):
        self.builder = builder
        self.version = v = builder.version
        self._fixed = dict(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                           isolation_level=isolation_level)
        self._client_id = client_id
        self._last: dict[int, EncodedFetch] = {}      # group -> its last request
        self._head = self._tail = b""
        self._topic_heads: dict[str, bytes] = {}
        self.fast = v >= 12 and self._check_layout()
        if self.fast:
            empty = builder.request([], **self._fixed)
            frame = codec.encode_request(empty, v, 0, client_id)
            body = codec.encode_body(empty, v)
            before = bytearray()
            plan = codec.plan_of(m.FetchRequest, v, True)
            for attr, _, wr in plan.regular:
                if attr == "topics":
                    break
                wr(before, getattr(empty, attr))
            header = len(frame) - len(body)
            cut = header + len(before)
            if frame[cut] != 1:                     # an empty compact array: uvarint 1
                self.fast = False
            self._head, self._tail = frame[:cut], frame[cut + 1:]

    def _check_layout(self) -> bool:
        F = m.FetchRequest
        sample = F.FetchPartition(partition=0x01020304, fetch_offset=0x0102030405060708, current_leader_epoch=-1,
                                  partition_max_bytes=0x0A0B0C0D)
        out = bytearray()
        codec.plan_of(F.FetchPartition, self.version, True).write(out, sample)
        return bytes(out) == _PARTITION.pack(0x01020304, -1, 0x0102030405060708, -1, -1, 0x0A0B0C0D, 0)

    def _topic_head(self, topic: str) -> bytes:
        head = self._topic_heads.get(topic)
        if head is None:
            out = bytearray()
            if self.version >= 13:
                out += self.builder.topics[topic].topic_id
            else:
                P.write_string(out, topic, True)
            head = self._topic_heads[topic] = bytes(out)
        return head

    def request(self, group: int, asks: Sequence[tuple[tuple[str, int], int, int]]) -> Any:
        """The request of ``group`` for ``asks`` (``((topic, partition), offset, max bytes)``)."""
        if not self.fast:
            return self.builder.request([FetchAsk(t, p, o, mb) for (t, p), o, mb in asks], **self._fixed)
        keys = [a[0] for a in asks]
        last = self._last.get(group)
        if last is not None and last.keys == keys:
            frame = bytearray(last.frame)             # the last request, the offsets patched
            pack = _OFFSET.pack_into
            for at, (_, offset, max_bytes) in zip(last.starts, asks, strict=True):
                pack(frame, at, offset, -1, -1, max_bytes)
            req = EncodedFetch(frame, keys, last.starts)
        else:
            req = self._build(keys, asks)
        self._last[group] = req
        return req

    def _build(self, keys: list, asks: Sequence) -> EncodedFetch:
        by_topic: dict[str, list] = {}
        for a in asks:
            by_topic.setdefault(a[0][0], []).append(a)
        frame = bytearray(self._head)
        P.write_uvarint(frame, len(by_topic) + 1)
        pack = _PARTITION.pack
        order: list = []
        starts: list[int] = []
        for topic, parts in by_topic.items():
            frame += self._topic_head(topic)
            P.write_uvarint(frame, len(parts) + 1)
            at = len(frame) + _OFFSET_AT
            starts.extend(range(at, at + len(parts) * _PARTITION.size, _PARTITION.size))
            frame += b"".join([pack(p, -1, offset, -1, -1, max_bytes, 0) for (_, p), offset, max_bytes in parts])
            frame.append(0)                           # the topic's tagged fields
            order.extend(a[0] for a in parts)
        frame += self._tail
        _CID.pack_into(frame, 0, len(frame) - 4)
        # the keys in the order written (topics grouped), which is the order the starts follow
        return EncodedFetch(frame, order if order != keys else keys, starts)
