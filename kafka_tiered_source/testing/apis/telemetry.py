"""KIP-714: GetTelemetrySubscriptions and PushTelemetry."""
from __future__ import annotations

import logging
import time

from ...dataclass import dataclass
from ...ids import random_uuid, uuid_to_str
from ...protocol import messages as m
from ._shared import ZERO_UUID, err

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TelemetryPush:
    """The latest PushTelemetry payload of one client instance (OTLP protobuf bytes)."""
    client_instance_id: str
    client_id: str | None
    subscription_id: int
    compression_type: int
    metrics: bytes
    terminating: bool
    received_at: float


async def get_telemetry_subscriptions(broker, conn, hdr, req, v):
    cid = req.client_instance_id if req.client_instance_id != ZERO_UUID else random_uuid()
    return m.GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=0, client_instance_id=cid,
        subscription_id=broker.telemetry_subscription, accepted_compression_types=[0],
        push_interval_ms=broker.config.telemetry_push_interval_ms, telemetry_max_bytes=1 << 20,
        # cumulative values: the latest push alone then tells the totals
        delta_temporality=False, requested_metrics=list(broker.config.telemetry_metrics))


async def push_telemetry(broker, conn, hdr, req, v):
    R = m.PushTelemetryResponse
    if req.client_instance_id == ZERO_UUID:
        return R(throttle_time_ms=0, error_code=err("INVALID_REQUEST"))
    if req.subscription_id != broker.telemetry_subscription:
        return R(throttle_time_ms=0, error_code=err("UNKNOWN_SUBSCRIPTION_ID"))
    if req.compression_type != 0:
        return R(throttle_time_ms=0, error_code=err("UNSUPPORTED_COMPRESSION_TYPE"))
    iid = uuid_to_str(req.client_instance_id)
    broker.telemetry[iid] = TelemetryPush(iid, hdr.client_id, req.subscription_id, req.compression_type,
                                        bytes(req.metrics), bool(req.terminating), time.time())
    return R(throttle_time_ms=0, error_code=0)
