"""ApiVersions and Metadata."""
from __future__ import annotations

import asyncio
import logging

from ...protocol import kip1248
from ...protocol import messages as m
from ..log import StorageError
from ._shared import NODE_ID, err

log = logging.getLogger(__name__)

def api_list(broker):
    A = m.ApiVersionsResponse.ApiVersion
    return [A(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(broker.advertised.items())]


async def api_versions(broker, conn, hdr, req, v):
    R = m.ApiVersionsResponse
    # A broker that answers the KIP-1248 tags says so as a supported feature (v3+, tagged);
    # as today's Kafka (kip1248=False) it advertises nothing of the kind.
    features = ([R.SupportedFeatureKey(name=kip1248.FEATURE, min_version=kip1248.FEATURE_VERSION,
                                       max_version=kip1248.FEATURE_VERSION)]
                if broker.config.kip1248 else [])
    return R(error_code=0, api_keys=api_list(broker), throttle_time_ms=0, supported_features=features)


def address(broker):
    return broker.config.host, broker.port


async def metadata(broker, conn, hdr, req, v):
    R = m.MetadataResponse
    host, port = address(broker)
    topics_out = []
    if req.topics is None or (v == 0 and not req.topics):
        wanted = [(name, None) for name in sorted(broker.storage.topics)]
    else:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    for name, tid in wanted:
        info = None
        if name is None and v < 12:
            # look-up by id is a v12+ feature (Kafka refuses null names before that)
            topics_out.append(R.MetadataResponseTopic(error_code=err("INVALID_REQUEST"), name=""))
            continue
        if name is None:
            try:
                info = broker.storage.topic_by_id(tid)
            except StorageError:
                topics_out.append(R.MetadataResponseTopic(error_code=err("UNKNOWN_TOPIC_ID"),
                                                          name=None, topic_id=tid))
                continue
        else:
            info = broker.storage.topics.get(name)
            if info is None and broker.config.auto_create_topics and (v < 4 or req.allow_auto_topic_creation):
                try:
                    info = await asyncio.to_thread(broker.storage.create_topic, name,
                                                   broker.config.auto_create_partitions)
                except StorageError as exc:
                    if exc.error_name == "TOPIC_ALREADY_EXISTS":
                        info = broker.storage.topics.get(name)
                    else:
                        topics_out.append(R.MetadataResponseTopic(error_code=exc.error_code, name=name))
                        continue
        if info is None:
            topics_out.append(R.MetadataResponseTopic(error_code=err("UNKNOWN_TOPIC_OR_PARTITION"),
                                                      name=name))
            continue
        topics_out.append(R.MetadataResponseTopic(
            error_code=0, name=info.name, topic_id=info.topic_id_bytes, is_internal=False,
            partitions=[R.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=NODE_ID,
                                                    leader_epoch=broker.storage.leader_epoch(info.name, i),
                                                    replica_nodes=[NODE_ID],
                                                    isr_nodes=[NODE_ID], offline_replicas=[])
                        for i in range(info.partitions)]))
    return R(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(node_id=NODE_ID, host=host, port=port)],
             cluster_id=broker.config.cluster_id, controller_id=NODE_ID, topics=topics_out, error_code=0)
