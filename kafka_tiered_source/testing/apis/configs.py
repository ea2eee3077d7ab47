"""DescribeConfigs: a topic's configuration, and the broker's own (:mod:`..topic_configs`), as
Kafka's ConfigHelper.describeConfigs answers them: every key, or the keys asked (unknown ones
left out); synonyms and documentation when asked for.  Other resource types are refused."""
from __future__ import annotations

from ...protocol import messages as m
from .. import topic_configs
from ._shared import NODE_ID, err

TOPIC = 2          # ConfigResource.Type.TOPIC
BROKER = 4         # ConfigResource.Type.BROKER


async def describe_configs(broker, conn, hdr, req, v):
    R = m.DescribeConfigsResponse
    results = []
    for res in req.resources:
        out = R.DescribeConfigsResult(error_code=0, error_message=None, resource_type=res.resource_type,
                                      resource_name=res.resource_name, configs=[])
        results.append(out)
        entries = []
        if res.resource_type == BROKER:
            # ConfigHelper: this broker's own configuration, or with an empty name the cluster's
            # dynamic defaults (none set here); another broker's id is an invalid request
            if res.resource_name == str(NODE_ID):
                entries = topic_configs.describe_broker(broker.storage, broker.config.remote_fetch_max_wait_ms)
            elif res.resource_name:
                out.error_code = err("INVALID_REQUEST")
                out.error_message = (f"Unexpected broker id, expected {NODE_ID} or empty string, but received "
                                     f"{res.resource_name}")
                continue
        elif res.resource_type != TOPIC:
            out.error_code = err("INVALID_REQUEST")
            out.error_message = f"the embedded broker describes topics and itself only, not resource type {res.resource_type}"
            continue
        else:
            info = broker.storage.topics.get(res.resource_name)
            if info is None:
                out.error_code = err("UNKNOWN_TOPIC_OR_PARTITION")
                out.error_message = f"topic {res.resource_name!r} does not exist"
                continue
            entries = topic_configs.describe(broker.storage, info)
        keys = None if res.configuration_keys is None else set(res.configuration_keys)
        for e in entries:
            if keys is not None and e.name not in keys:
                continue
            synonyms = ([R.DescribeConfigsSynonym(name=e.name, value=e.value, source=e.source)]
                        if v >= 1 and req.include_synonyms else [])
            out.configs.append(R.DescribeConfigsResourceResult(
                name=e.name, value=e.value, read_only=False,
                is_default=e.source == topic_configs.DEFAULT_CONFIG, config_source=e.source, is_sensitive=False,
                synonyms=synonyms, config_type=e.type,
                documentation=e.doc if v >= 3 and req.include_documentation else None))
    return R(throttle_time_ms=0, results=results)
