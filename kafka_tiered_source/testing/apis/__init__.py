"""The embedded broker's APIs, one module per family, as franz-go's kfake lays them out.

:data:`APIS` is the dispatch table, declared as data: API key -> (handler, lowest and highest
version advertised).  A handler is ``async def handler(broker, conn, header, request, version)``
and returns the response (None: no answer, for Produce with acks=0; ``CLOSE``: close the
connection).  The ranges are narrower than the codec's where a higher version would promise
semantics not implemented here: Produce/OffsetFetch/OffsetCommit topic ids (13 / 10 / 10),
AddPartitionsToTxn 4+ (broker-to-broker), EndTxn 5 and InitProducerId 6 (transaction version 2
and two-phase commit).
"""
from __future__ import annotations

from . import admin, configs, fetch, groups, list_offsets, produce, sasl, telemetry, txn

APIS: dict = {
    0: (produce.produce, 3, 12),
    1: (fetch.fetch, 4, 18),
    2: (list_offsets.list_offsets, 1, 11),
    3: (admin.metadata, 1, 13),
    8: (groups.offset_commit, 2, 9),
    9: (groups.offset_fetch, 1, 9),
    10: (groups.find_coordinator, 0, 6),
    17: (sasl.sasl_handshake, 0, 1),
    18: (admin.api_versions, 0, 4),
    22: (txn.init_producer_id, 0, 5),
    23: (list_offsets.offset_for_leader_epoch, 2, 4),
    24: (txn.add_partitions_to_txn, 0, 3),
    26: (txn.end_txn, 0, 4),
    32: (configs.describe_configs, 1, 4),
    36: (sasl.sasl_authenticate, 0, 2),
    71: (telemetry.get_telemetry_subscriptions, 0, 0),
    72: (telemetry.push_telemetry, 0, 0),
}

#: what ApiVersions answers: API key -> (min, max)
ADVERTISED: dict[int, tuple[int, int]] = {key: (lo, hi) for key, (_, lo, hi) in APIS.items()}

__all__ = ["ADVERTISED", "APIS", "admin", "configs", "fetch", "groups", "list_offsets", "produce", "sasl", "telemetry", "txn"]
