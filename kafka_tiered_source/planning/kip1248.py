"""The ``kip1248`` locator: ask the partition leader where each offset lives.

The range is walked with Fetch requests that carry the KIP-1248 tags
(``RemoteLogSegmentLocationRequested``).  While the leader answers with a remote location, the
range lies in a tiered segment and the answer gives the segment id, custom metadata, byte hints
and (read_committed) the aborted transactions; the walk jumps past the segment.  The first
ordinary answer means the rest is still on the brokers: it becomes one broker range.

The walk costs one small request per tiered segment.  No record bytes move through the broker
while planning, unless the broker ignores the tags: then the first probe (limited to one byte,
so one batch) is all it sends.
"""
from __future__ import annotations

from ..ids import uuid_to_str
from ..storage.segment import RemoteSegment
from .locate import Located, broker_tail
from .packing import SegmentSlice
from .plan import PartitionRange
from .tasks import AbortedTransaction, RemoteRange

INT32_MAX = 2**31 - 1
# A probe asks for one byte: a broker that ignores the KIP-1248 tags then returns one batch.
_PROBE_BYTES = 1


class Kip1248Locator:
    """``client`` is a :class:`~kafka_tiered_source.protocol.client.BrokerClient`.  Without a
    configured fetcher (``storage_configured`` false) only segments with a presigned URL are
    read directly; the walk hands the rest to the brokers."""

    name = "kip1248"

    def __init__(self, client, *, isolation_level: int, storage_configured: bool):
        self.client = client
        self.iso = isolation_level
        self.storage_configured = storage_configured

    def _locate(self, pr: PartitionRange, offset: int, max_bytes: int):
        return self.client.fetch(pr.topic, pr.partition, offset, max_bytes=max_bytes,
                                 partition_max_bytes=max_bytes, max_wait_ms=0, min_bytes=0,
                                 isolation_level=self.iso, request_remote_location=True)

    def locate(self, pr: PartitionRange) -> Located:
        pieces = []
        # first offset of a slice -> the aborted transactions the leader answered for it
        aborted_at: dict[int, tuple] = {}
        offset = pr.start
        remote_bytes = remote_offsets = 0
        if pr.start < pr.end:
            probe = self._locate(pr, offset, _PROBE_BYTES)
            answer = probe if probe.has_remote_location else None
            while answer is not None and offset < pr.end:
                part = self._locate(pr, offset, INT32_MAX).partition if answer is probe else answer.partition
                if not (part.remote_log_segment_end_position or 0) > (part.remote_log_segment_start_position or 0):
                    break   # an inconsistent hint: the broker serves the rest
                if not self.storage_configured and not part.signed_remote_log_segment_location:
                    break   # nothing to read the segment with: the broker serves the rest
                seg = RemoteSegment(
                    topic=pr.topic, topic_id=pr.topic_id, partition=pr.partition,
                    segment_id=uuid_to_str(bytes(part.remote_log_segment_id)),
                    base_offset=part.remote_log_segment_base_offset,
                    end_offset=part.remote_log_segment_end_offset,
                    size_bytes=part.remote_log_segment_end_position,
                    custom_metadata=(bytes(part.remote_log_segment_custom_metadata)
                                     if part.remote_log_segment_custom_metadata is not None else None),
                    presigned_url=part.signed_remote_log_segment_location,
                    storage_format=part.storage_format_version or "ApacheKafkaV1")
                # the broker may answer a later segment when offset fell in a gap
                first = max(offset, seg.base_offset)
                if first >= pr.end:
                    break
                seg_end = min(pr.end, seg.end_offset + 1)
                aborted_at[first] = _aborted(part)
                pieces.append(SegmentSlice(seg, first, seg_end,
                                           ((first, part.remote_log_segment_start_position),)))
                remote_bytes += seg.size_bytes - part.remote_log_segment_start_position
                remote_offsets += seg_end - first
                offset = seg.end_offset + 1
                if offset >= pr.end:
                    break
                answer = self._locate(pr, offset, INT32_MAX)
                if not answer.has_remote_location:
                    break
        if offset < pr.end:
            pieces.append(broker_tail(pr, offset, remote_bytes, remote_offsets))

        def aborted_for(topic, p, first, end, first_range):
            """The answer for exactly ``first`` (asked now when no slice starts there), plus the
            answers of the slices that start later inside ``[first, end)``.  For contiguous
            slices this is what a broker answers for one fetch over the whole span."""
            if not isinstance(first_range, RemoteRange):   # broker answers carry their own lists
                return ()
            if first not in aborted_at:
                aborted_at[first] = _aborted(self._locate(pr, first, INT32_MAX).partition)
            return [a for start, entries in sorted(aborted_at.items()) if first <= start < end
                    for a in entries]

        return Located(pieces, aborted_for)


def _aborted(part) -> tuple:
    return tuple(AbortedTransaction(a.producer_id, a.first_offset)
                 for a in (part.aborted_transactions or ()))
