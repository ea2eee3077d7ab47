"""KIP-1248 (direct reads of tiered segments): the provisional tag numbers, in one place.

PROVISIONAL until the KIP is accepted: the fields ride as *tagged fields* on Fetch's flexible
versions (12+) because Fetch v18 is already taken upstream (KIP-1166).  A broker that does not
know these tags skips them and answers an ordinary fetch, which is the fallback the KIP asks
for.  The numbers sit well clear of the upstream tags in use today (request top level 0-1,
request partition 0-1, response partition 0-2, response top level 0).  See docs/kip-1248.md.
"""
from __future__ import annotations

PROVISIONAL = True

#: Fetch versions on which the tags can travel (tagged fields need a flexible version).
MIN_FETCH_VERSION = 12

#: The feature a broker that answers the location tags advertises in ApiVersions
#: (``SupportedFeatures``, version 1).  A reader can tell such a broker from today's Kafka
#: without a Fetch: on today's Kafka, a probe with the tags would make the broker read tiered
#: data itself (RemoteLogManager) only for the reader to throw it away.
FEATURE = "kip1248.remote.log.segment.location"
FEATURE_VERSION = 1

#: The storage format this reader understands: Apache Kafka's segment files, byte for byte.
STORAGE_FORMAT_APACHE_KAFKA_V1 = "ApacheKafkaV1"

# FetchRequest, top level
TAG_REMOTE_LOG_SEGMENT_LOCATION_REQUESTED = 100     # bool
TAG_SUPPORTED_STORAGE_FORMAT_VERSIONS = 101         # []string

# FetchResponse, per partition (PartitionData)
TAG_REMOTE_LOG_SEGMENT_ID = 100                     # uuid
TAG_REMOTE_LOG_SEGMENT_CUSTOM_METADATA = 101        # nullable bytes
TAG_REMOTE_LOG_SEGMENT_START_POSITION = 102         # int32, half-open [start, end) byte hint
TAG_REMOTE_LOG_SEGMENT_END_POSITION = 103           # int32
TAG_REMOTE_LOG_SEGMENT_BASE_OFFSET = 104            # int64
TAG_REMOTE_LOG_SEGMENT_END_OFFSET = 105             # int64
TAG_STORAGE_FORMAT_VERSION = 106                    # string
TAG_SIGNED_REMOTE_LOG_SEGMENT_LOCATION = 107        # nullable string (presigned URL: secret)

REQUEST_TAGS = (TAG_REMOTE_LOG_SEGMENT_LOCATION_REQUESTED, TAG_SUPPORTED_STORAGE_FORMAT_VERSIONS)
RESPONSE_PARTITION_TAGS = (
    TAG_REMOTE_LOG_SEGMENT_ID, TAG_REMOTE_LOG_SEGMENT_CUSTOM_METADATA,
    TAG_REMOTE_LOG_SEGMENT_START_POSITION, TAG_REMOTE_LOG_SEGMENT_END_POSITION,
    TAG_REMOTE_LOG_SEGMENT_BASE_OFFSET, TAG_REMOTE_LOG_SEGMENT_END_OFFSET,
    TAG_STORAGE_FORMAT_VERSION, TAG_SIGNED_REMOTE_LOG_SEGMENT_LOCATION,
)


def has_remote_location(partition) -> bool:
    """True when a decoded FetchResponse partition carries a KIP-1248 segment location."""
    return partition.remote_log_segment_id != bytes(16)
