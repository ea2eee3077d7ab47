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

from typing import TYPE_CHECKING, Callable, Optional

from ..errors import BrokerError
from .connection import BrokerConnection, ConnectionLost
from .errors import broker_error
from .fetch_answers import P_ERROR, P_INDEX, FetchAnswers, check, decode
from .fetch_frames import FetchFrames, encode

if TYPE_CHECKING:
    from .client import BrokerClient

Key = tuple[str, int]                        # (topic, partition)
Ask = tuple[int, int]                        # (fetch offset, partition max bytes)
Advance = Callable[[Key, tuple], Optional[Ask]]   # a partition's answer: protocol.fetch_answers
INT32_MAX = 2**31 - 1


def fetch_rounds(client: "BrokerClient", starts: dict[Key, Ask], advance: Advance, *,
                 isolation_level: int, request_remote_location: bool = False, depth: int = 2) -> None:
    """Fetch ``starts`` (``{(topic, partition): (offset, partition max bytes)}``); for each
    answer call ``advance(key, partition)`` (the partition's tuple, :mod:`.fetch_answers`), which
    returns what to ask that partition next or None when it is done.  Returns when every
    partition is done."""
    pending: dict[Key, Ask] = dict(starts)
    attempt = 0
    while pending:
        try:
            by_leader: dict[BrokerConnection, list[Key]] = {}
            for key in pending:
                by_leader.setdefault(client.leader(*key), []).append(key)
        except BrokerError as exc:
            if not exc.retriable or attempt >= client.config.retries:
                raise
            attempt = _again(client, attempt)
            continue
        walk = _Walk(client, pending, advance, isolation_level, request_remote_location, depth)
        if len(by_leader) == 1:
            walk(*next(iter(by_leader.items())))
        else:
            from concurrent.futures import ThreadPoolExecutor   # a cluster's rounds, not one broker's
            with ThreadPoolExecutor(max_workers=min(8, len(by_leader))) as pool:
                for f in [pool.submit(walk, c, ks) for c, ks in by_leader.items()]:
                    f.result()
        if walk.retry:
            if attempt >= client.config.retries:
                raise BrokerError(f"no answer for partitions {sorted(walk.retry)} after {attempt} retries",
                                  api="Fetch", retriable=True)
            attempt = _again(client, attempt)
        pending = walk.retry


def _again(client: "BrokerClient", attempt: int) -> int:
    client.backoff(attempt)
    client.invalidate_metadata()          # route with fresh metadata
    return attempt + 1


class _Walk:
    """One round over every leader: what is still pending, and what must be asked again (a
    leader that moved, a lost connection) once the metadata is fresh."""

    def __init__(self, client: "BrokerClient", pending: dict[Key, Ask], advance: Advance, iso: int,
                 remote: bool, depth: int):
        self.client, self.pending, self.advance = client, pending, advance
        self.iso, self.remote, self.depth = iso, remote, depth
        self.retry: dict[Key, Ask] = {}

    def __call__(self, conn: BrokerConnection, keys: list[Key]) -> None:
        try:
            self._leader(conn, keys)
        except ConnectionLost:
            self.retry.update({k: self.pending[k] for k in keys if k in self.pending})
        except BrokerError as exc:
            if not exc.retriable:
                raise
            self.retry.update({k: self.pending[k] for k in keys if k in self.pending})

    def _leader(self, conn: BrokerConnection, keys: list[Key]) -> None:
        client, pending, retry = self.client, self.pending, self.retry
        conn.ensure_connected()
        builder = client.fetch_builder(conn, sorted({topic for topic, _ in keys}),
                                       request_remote_location=self.remote)
        frames = FetchFrames(builder, conn.config.client_id, max_wait_ms=0, min_bytes=0, max_bytes=INT32_MAX,
                             isolation_level=self.iso)
        v13 = builder.version >= 13
        names, wanted = builder.name_of, builder.topics
        groups_of: dict[int, tuple[int, list[Key]]] = {}     # id(request) -> its group, its partitions
        misses: dict[Key, int] = {}

        def request(group: int, asks: list[Key]):
            req = frames.request(group, [(key, *pending[key]) for key in asks])
            groups_of[id(req)] = (group, asks)
            return req

        def step(resp: FetchAnswers, req) -> list:
            check(resp, builder.broker)
            # the keys to ask again, in order; a dict, for the look-ups below (10k keys a request)
            again: dict[Key, None] = {}
            advance = self.advance
            for name, topic_id, parts in resp.topics:
                topic = names(topic_id) if v13 else name
                if topic is None or topic not in wanted:
                    continue
                for part in parts:
                    key = (topic, part[P_INDEX])
                    if key not in pending:
                        continue
                    code = part[P_ERROR]
                    if code:
                        err = broker_error(code, broker=builder.broker, api="Fetch", topic=topic, partition=key[1])
                        if not err.retriable:
                            raise err
                        retry[key] = pending.pop(key)
                        continue
                    nxt = advance(key, part)
                    if nxt is None:
                        del pending[key]
                    else:
                        pending[key] = nxt
                        again[key] = None
            group, asked = groups_of.pop(id(req))
            for key in asked:
                if key in pending and key not in again and key not in retry:
                    # the answer left the partition out: ask again, but not forever
                    misses[key] = misses.get(key, 0) + 1
                    if misses[key] > 3:
                        raise BrokerError("the fetch response does not contain the partition",
                                          broker=conn.address, api="Fetch", topic=key[0], partition=key[1])
                    again[key] = None
            return [request(group, list(again))] if again else []

        groups = [keys[i::self.depth] for i in range(min(self.depth, len(keys)))]
        conn.exchange([request(i, g) for i, g in enumerate(groups)], step, builder.version,
                      timeout_ms=client.config.request_timeout_ms, encode=encode, decode=decode)
