"""Fetch many partitions in rounds, as Kafka's consumer does: one request per leader carries
every partition that leader leads, and each partition's next offset depends on its last answer.

Planning walks tiered segments this way (one KIP-1248 location per partition per round): 32
partitions of 200 segments cost 200 requests per leader instead of 6,400.  Each leader's
partitions are split into ``depth`` groups whose requests are pipelined on the one connection
(:meth:`~.connection.BrokerConnection.exchange`), so the broker answers one group while this
side decodes the other; leaders are walked concurrently.

Retriable errors (a partition's leader moved, a lost connection) refresh the metadata and carry
on from the offsets the caller's ``advance`` has recorded; any other partition error raises.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

from ..errors import BrokerError
from . import kip1248, messages as m
from .connection import ConnectionLost
from .errors import broker_error

Key = tuple[str, int]                        # (topic, partition)
Ask = tuple[int, int]                        # (fetch offset, partition max bytes)
INT32_MAX = 2**31 - 1


def fetch_rounds(client, starts: dict[Key, Ask], advance: Callable[[Key, object], Optional[Ask]], *,
                 isolation_level: int, request_remote_location: bool = False, depth: int = 2) -> None:
    """Fetch ``starts`` (``{(topic, partition): (offset, partition max bytes)}``); for each
    answer call ``advance(key, FetchResult)``, which returns what to ask that partition next or
    None when it is done.  Returns when every partition is done."""
    from .client import FetchResult
    pending: dict[Key, Ask] = dict(starts)
    attempt = 0
    while pending:
        retry: dict[Key, Ask] = {}
        try:
            by_leader: dict = {}
            for key in pending:
                by_leader.setdefault(client.leader(*key), []).append(key)
        except BrokerError as exc:
            if not exc.retriable or attempt >= client.config.retries:
                raise
            attempt = _again(client, attempt)
            continue

        def walk(conn, keys):
            try:
                _walk_leader(client, conn, keys, pending, advance, retry, isolation_level,
                             request_remote_location, depth, FetchResult)
            except ConnectionLost:
                retry.update({k: pending[k] for k in keys if k in pending})
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                retry.update({k: pending[k] for k in keys if k in pending})

        if len(by_leader) == 1:
            walk(*next(iter(by_leader.items())))
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(by_leader))) as pool:
                for f in [pool.submit(walk, c, ks) for c, ks in by_leader.items()]:
                    f.result()
        if retry:
            if attempt >= client.config.retries:
                raise BrokerError(f"no answer for partitions {sorted(retry)} after {attempt} retries",
                                  api="Fetch", retriable=True)
            attempt = _again(client, attempt)
        pending = retry


def _again(client, attempt: int) -> int:
    client._backoff(attempt)
    client._metadata_at = 0.0          # route with fresh metadata
    return attempt + 1


def _walk_leader(client, conn, keys, pending, advance, retry, iso, remote, depth, FetchResult):
    conn.ensure_connected()
    infos = {topic: client.topic(topic) for topic, _ in keys}
    version = min(client._fetch_version(conn, info) for info in infos.values())
    send_tags = remote and version >= kip1248.MIN_FETCH_VERSION
    F = m.FetchRequest

    def request(group):
        topics: dict = {}
        for topic, p in group:
            offset, limit = pending[(topic, p)]
            topics.setdefault(topic, []).append(F.FetchPartition(
                partition=p, fetch_offset=offset, current_leader_epoch=-1, partition_max_bytes=limit))
        ftopics = []
        for topic, parts in topics.items():
            ft = F.FetchTopic(partitions=parts)
            if version >= 13:
                ft.topic_id = infos[topic].topic_id
            else:
                ft.topic = topic
            ftopics.append(ft)
        req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=INT32_MAX, isolation_level=iso,
                session_id=0, session_epoch=-1, topics=ftopics, rack_id=client.config.client_rack)
        if send_tags:
            req.remote_log_segment_location_requested = True
            req.supported_storage_format_versions = [kip1248.STORAGE_FORMAT_APACHE_KAFKA_V1]
        groups_of[id(req)] = group
        return req

    by_id = {info.topic_id: name for name, info in infos.items()}
    groups_of: dict = {}                 # id(request) -> the partitions it asks for
    misses: dict = {}

    def step(resp, req):
        if resp.error_code:
            raise broker_error(resp.error_code, broker=conn.address, api="Fetch")
        again = []
        for t in resp.responses:
            topic = by_id.get(t.topic_id) if version >= 13 else t.topic
            for p in t.partitions:
                key = (topic, p.partition_index)
                if key not in pending:
                    continue
                if p.error_code:
                    err = broker_error(p.error_code, broker=conn.address, api="Fetch", topic=topic,
                                       partition=p.partition_index)
                    if not err.retriable:
                        raise err
                    retry[key] = pending.pop(key)
                    continue
                nxt = advance(key, FetchResult(topic, p.partition_index, p, version, conn.address, send_tags,
                                               resp.throttle_time_ms or 0))
                if nxt is None:
                    del pending[key]
                else:
                    pending[key] = nxt
                    again.append(key)
        for key in groups_of.pop(id(req)):
            if key in pending and key not in again and key not in retry:
                # the answer left the partition out: ask again, but not forever
                misses[key] = misses.get(key, 0) + 1
                if misses[key] > 3:
                    raise BrokerError("the fetch response does not contain the partition",
                                      broker=conn.address, api="Fetch", topic=key[0], partition=key[1])
                again.append(key)
        return [request(again)] if again else []

    groups = [keys[i::depth] for i in range(min(depth, len(keys)))]
    conn.exchange([request(g) for g in groups], step, version,
                  timeout_ms=client.config.request_timeout_ms)
