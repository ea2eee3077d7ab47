"""The one table of Kafka error codes: code, name, retriable, whether metadata must be refreshed,
and a short message.

Retriable follows Kafka's Java client (an error is retriable when its exception extends
``RetriableException``); ``refresh_metadata`` marks the ``InvalidMetadataException`` family, after
which a client must re-learn leaders before retrying.  Unknown codes (a newer broker) are
reported as non-retriable with their number.
"""
from __future__ import annotations


from ..dataclass import dataclass
from ..errors import BrokerError, InvalidMetadataError


@dataclass(frozen=True)
class KafkaErrorCode:
    code: int
    name: str
    retriable: bool
    refresh_metadata: bool

    @property
    def message(self) -> str:
        return _MESSAGES.get(self.code) or self.name.lower().replace("_", " ")


# (code, NAME, retriable, refresh_metadata)
_TABLE = [
    (-1, 'UNKNOWN', False, False),
    (0, 'NO_ERROR', False, False),
    (1, 'OFFSET_OUT_OF_RANGE', False, False),
    (2, 'CORRUPT_MESSAGE', True, False),
    (3, 'UNKNOWN_TOPIC_OR_PARTITION', True, True),
    (4, 'INVALID_FETCH_SIZE', False, False),
    (5, 'LEADER_NOT_AVAILABLE', True, True),
    (6, 'NOT_LEADER_OR_FOLLOWER', True, True),
    (7, 'REQUEST_TIMED_OUT', True, False),
    (8, 'BROKER_NOT_AVAILABLE', False, False),
    (9, 'REPLICA_NOT_AVAILABLE', True, True),
    (10, 'MESSAGE_SIZE_TOO_LARGE', False, False),
    (11, 'STALE_CONTROLLER_EPOCH', False, False),
    (12, 'OFFSET_METADATA_TOO_LARGE', False, False),
    (13, 'NETWORK_EXCEPTION', True, True),
    (14, 'COORDINATOR_LOAD_IN_PROGRESS', True, False),
    (15, 'COORDINATOR_NOT_AVAILABLE', True, False),
    (16, 'NOT_COORDINATOR', True, False),
    (17, 'INVALID_TOPIC', False, False),
    (18, 'RECORD_LIST_TOO_LARGE', False, False),
    (19, 'NOT_ENOUGH_REPLICAS', True, False),
    (20, 'NOT_ENOUGH_REPLICAS_AFTER_APPEND', True, False),
    (21, 'INVALID_REQUIRED_ACKS', False, False),
    (22, 'ILLEGAL_GENERATION', False, False),
    (23, 'INCONSISTENT_GROUP_PROTOCOL', False, False),
    (24, 'INVALID_GROUP_ID', False, False),
    (25, 'UNKNOWN_MEMBER_ID', False, False),
    (26, 'INVALID_SESSION_TIMEOUT', False, False),
    (27, 'REBALANCE_IN_PROGRESS', False, False),
    (28, 'INVALID_COMMIT_OFFSET_SIZE', False, False),
    (29, 'TOPIC_AUTHORIZATION_FAILED', False, False),
    (30, 'GROUP_AUTHORIZATION_FAILED', False, False),
    (31, 'CLUSTER_AUTHORIZATION_FAILED', False, False),
    (32, 'INVALID_TIMESTAMP', False, False),
    (33, 'UNSUPPORTED_SASL_MECHANISM', False, False),
    (34, 'ILLEGAL_SASL_STATE', False, False),
    (35, 'UNSUPPORTED_VERSION', False, False),
    (36, 'TOPIC_ALREADY_EXISTS', False, False),
    (37, 'INVALID_PARTITIONS', False, False),
    (38, 'INVALID_REPLICATION_FACTOR', False, False),
    (39, 'INVALID_REPLICATION_ASSIGNMENT', False, False),
    (40, 'INVALID_CONFIG', False, False),
    (41, 'NOT_CONTROLLER', True, False),
    (42, 'INVALID_REQUEST', False, False),
    (43, 'UNSUPPORTED_FOR_MESSAGE_FORMAT', False, False),
    (44, 'POLICY_VIOLATION', False, False),
    (45, 'OUT_OF_ORDER_SEQUENCE_NUMBER', False, False),
    (46, 'DUPLICATE_SEQUENCE_NUMBER', False, False),
    (47, 'INVALID_PRODUCER_EPOCH', False, False),
    (48, 'INVALID_TXN_STATE', False, False),
    (49, 'INVALID_PRODUCER_ID_MAPPING', False, False),
    (50, 'INVALID_TRANSACTION_TIMEOUT', False, False),
    (51, 'CONCURRENT_TRANSACTIONS', True, False),
    (52, 'TRANSACTION_COORDINATOR_FENCED', False, False),
    (53, 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', False, False),
    (54, 'SECURITY_DISABLED', False, False),
    (55, 'OPERATION_NOT_ATTEMPTED', False, False),
    (56, 'KAFKA_STORAGE_ERROR', True, True),
    (57, 'LOG_DIR_NOT_FOUND', False, False),
    (58, 'SASL_AUTHENTICATION_FAILED', False, False),
    (59, 'UNKNOWN_PRODUCER_ID', False, False),
    (60, 'REASSIGNMENT_IN_PROGRESS', False, False),
    (61, 'DELEGATION_TOKEN_AUTH_DISABLED', False, False),
    (62, 'DELEGATION_TOKEN_NOT_FOUND', False, False),
    (63, 'DELEGATION_TOKEN_OWNER_MISMATCH', False, False),
    (64, 'DELEGATION_TOKEN_REQUEST_NOT_ALLOWED', False, False),
    (65, 'DELEGATION_TOKEN_AUTHORIZATION_FAILED', False, False),
    (66, 'DELEGATION_TOKEN_EXPIRED', False, False),
    (67, 'INVALID_PRINCIPAL_TYPE', False, False),
    (68, 'NON_EMPTY_GROUP', False, False),
    (69, 'GROUP_ID_NOT_FOUND', False, False),
    (70, 'FETCH_SESSION_ID_NOT_FOUND', True, False),
    (71, 'INVALID_FETCH_SESSION_EPOCH', True, False),
    (72, 'LISTENER_NOT_FOUND', True, True),
    (73, 'TOPIC_DELETION_DISABLED', False, False),
    (74, 'FENCED_LEADER_EPOCH', True, True),
    (75, 'UNKNOWN_LEADER_EPOCH', True, True),
    (76, 'UNSUPPORTED_COMPRESSION_TYPE', False, False),
    (77, 'STALE_BROKER_EPOCH', False, False),
    (78, 'OFFSET_NOT_AVAILABLE', True, False),
    (79, 'MEMBER_ID_REQUIRED', False, False),
    (80, 'PREFERRED_LEADER_NOT_AVAILABLE', True, False),
    (81, 'GROUP_MAX_SIZE_REACHED', False, False),
    (82, 'FENCED_INSTANCE_ID', False, False),
    (83, 'ELIGIBLE_LEADERS_NOT_AVAILABLE', True, False),
    (84, 'ELECTION_NOT_NEEDED', True, False),
    (85, 'NO_REASSIGNMENT_IN_PROGRESS', False, False),
    (86, 'GROUP_SUBSCRIBED_TO_TOPIC', False, False),
    (87, 'INVALID_RECORD', False, False),
    (88, 'UNSTABLE_OFFSET_COMMIT', True, False),
    (89, 'THROTTLING_QUOTA_EXCEEDED', True, False),
    (90, 'PRODUCER_FENCED', False, False),
    (91, 'RESOURCE_NOT_FOUND', False, False),
    (92, 'DUPLICATE_RESOURCE', False, False),
    (93, 'UNACCEPTABLE_CREDENTIAL', False, False),
    (94, 'INCONSISTENT_VOTER_SET', False, False),
    (95, 'INVALID_UPDATE_VERSION', False, False),
    (96, 'FEATURE_UPDATE_FAILED', False, False),
    (97, 'PRINCIPAL_DESERIALIZATION_FAILURE', False, False),
    (98, 'SNAPSHOT_NOT_FOUND', False, False),
    (99, 'POSITION_OUT_OF_RANGE', False, False),
    (100, 'UNKNOWN_TOPIC_ID', True, True),
    (101, 'DUPLICATE_BROKER_REGISTRATION', False, False),
    (102, 'BROKER_ID_NOT_REGISTERED', False, False),
    (103, 'INCONSISTENT_TOPIC_ID', True, True),
    (104, 'INCONSISTENT_CLUSTER_ID', False, False),
    (105, 'TRANSACTIONAL_ID_NOT_FOUND', False, False),
    (106, 'FETCH_SESSION_TOPIC_ID_ERROR', True, False),
    (107, 'INELIGIBLE_REPLICA', False, False),
    (108, 'NEW_LEADER_ELECTED', False, False),
    (109, 'OFFSET_MOVED_TO_TIERED_STORAGE', False, False),
    (110, 'FENCED_MEMBER_EPOCH', False, False),
    (111, 'UNRELEASED_INSTANCE_ID', False, False),
    (112, 'UNSUPPORTED_ASSIGNOR', False, False),
    (113, 'STALE_MEMBER_EPOCH', False, False),
    (114, 'MISMATCHED_ENDPOINT_TYPE', False, False),
    (115, 'UNSUPPORTED_ENDPOINT_TYPE', False, False),
    (116, 'UNKNOWN_CONTROLLER_ID', False, False),
    (117, 'UNKNOWN_SUBSCRIPTION_ID', False, False),
    (118, 'TELEMETRY_TOO_LARGE', False, False),
    (119, 'INVALID_REGISTRATION', False, False),
    (120, 'TRANSACTION_ABORTABLE', False, False),
    (121, 'INVALID_RECORD_STATE', False, False),
    (122, 'SHARE_SESSION_NOT_FOUND', True, False),
    (123, 'INVALID_SHARE_SESSION_EPOCH', True, False),
    (124, 'FENCED_STATE_EPOCH', False, False),
    (125, 'INVALID_VOTER_KEY', False, False),
    (126, 'DUPLICATE_VOTER', False, False),
    (127, 'VOTER_NOT_FOUND', False, False),
]

# Messages that say more than the name does; the rest read the name in words.
_MESSAGES = {
    -1: "the broker hit an unexpected error (UNKNOWN_SERVER_ERROR)",
    1: "the requested offset is outside the range the partition holds",
    3: "the broker does not host this topic or partition",
    6: "this broker is not the leader (or a follower) for the partition; metadata is stale",
    7: "the broker timed out the request",
    35: "the broker does not support this API version",
    33: "the broker does not support this SASL mechanism",
    58: "SASL authentication failed",
    29: "not authorized to access the topic",
    74: "the request's leader epoch is older than the broker's",
    75: "the request's leader epoch is newer than the broker's",
    100: "the broker does not know this topic id",
}

ERRORS: dict[int, KafkaErrorCode] = {}
BY_NAME: dict[str, KafkaErrorCode] = {}
for _code, _name, _retriable, _refresh in _TABLE:
    _e = KafkaErrorCode(_code, _name, _retriable, _refresh)
    ERRORS[_code] = _e
    BY_NAME[_name] = _e
del _code, _name, _retriable, _refresh, _e

NONE = 0
# The codes the client and the planners act on by name.
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NETWORK_EXCEPTION = 13
UNSUPPORTED_VERSION = 35
UNKNOWN_TOPIC_ID = 100


def lookup(code: int) -> KafkaErrorCode:
    """The table entry for ``code``; an unknown code gets a placeholder entry (non-retriable)."""
    e = ERRORS.get(code)
    if e is None:
        return KafkaErrorCode(code, f"UNKNOWN_ERROR_CODE_{code}", False, False)
    return e


def code_of(name: str) -> int:
    return BY_NAME[name].code


def broker_error(code: int, *, broker: str | None = None, api: str | None = None,
                 topic: str | None = None, partition: int | None = None,
                 detail: str | None = None) -> BrokerError:
    """The error the table describes: an :class:`~kafka_tiered_source.errors.InvalidMetadataError`
    for the codes after which metadata must be refreshed, else a plain
    :class:`~kafka_tiered_source.errors.BrokerError`."""
    e = lookup(code)
    msg = f"{e.name} ({e.code}): {e.message}"
    if detail:
        msg = f"{msg}: {detail}"
    cls = InvalidMetadataError if e.refresh_metadata else BrokerError
    return cls(msg, error_code=e.code, error_name=e.name, retriable=e.retriable,
               broker=broker, api=api, topic=topic, partition=partition)
