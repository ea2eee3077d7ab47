"""Every Kafka message this project speaks, declared once as data.

Transcribed from Apache Kafka's ``clients/src/main/resources/common/message/*.json`` (4.x line:
field names, types, version ranges, nullability, tags, defaults; the prose is left out), plus the
provisional KIP-1248 tagged fields on Fetch (numbers in :mod:`.kip1248`).  Classes are generated
on first use (``FetchRequest``, ``FetchResponse.PartitionData``, ...: :mod:`.structs`).

Version ranges follow upstream 4.x (KIP-896 removed the oldest versions; Produce is 3-13 and
InitProducerId 0-6 upstream).  A broker built on this may advertise narrower ranges.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import kip1248 as K
from .schema import Field as F, Message
from .structs import MessageClasses

API_VERSIONS_REQUEST = Message('ApiVersionsRequest', 18, 'request', valid='0-4', flexible='3+', fields=[
    F('ClientSoftwareName', 'string', '3+'),
    F('ClientSoftwareVersion', 'string', '3+'),
])

API_VERSIONS_RESPONSE = Message('ApiVersionsResponse', 18, 'response', valid='0-4', flexible='3+', fields=[
    F('ErrorCode', 'int16', '0+'),
    F('ApiKeys', '[]ApiVersion', '0+', fields=[
        F('ApiKey', 'int16', '0+'),
        F('MinVersion', 'int16', '0+'),
        F('MaxVersion', 'int16', '0+'),
    ]),
    F('ThrottleTimeMs', 'int32', '1+'),
    F('SupportedFeatures', '[]SupportedFeatureKey', '3+', tag=0, tagged='3+', fields=[
        F('Name', 'string', '3+'),
        F('MinVersion', 'int16', '3+'),
        F('MaxVersion', 'int16', '3+'),
    ]),
    F('FinalizedFeaturesEpoch', 'int64', '3+', default=-1, tag=1, tagged='3+'),
    F('FinalizedFeatures', '[]FinalizedFeatureKey', '3+', tag=2, tagged='3+', fields=[
        F('Name', 'string', '3+'),
        F('MaxVersionLevel', 'int16', '3+'),
        F('MinVersionLevel', 'int16', '3+'),
    ]),
    F('ZkMigrationReady', 'bool', '3+', default=False, tag=3, tagged='3+'),
])

METADATA_REQUEST = Message('MetadataRequest', 3, 'request', valid='0-13', flexible='9+', fields=[
    F('Topics', '[]MetadataRequestTopic', '0+', nullable='1+', fields=[
        F('TopicId', 'uuid', '10+'),
        F('Name', 'string', '0+', nullable='10+'),
    ]),
    F('AllowAutoTopicCreation', 'bool', '4+', default=True),
    F('IncludeClusterAuthorizedOperations', 'bool', '8-10'),
    F('IncludeTopicAuthorizedOperations', 'bool', '8+'),
])

METADATA_RESPONSE = Message('MetadataResponse', 3, 'response', valid='0-13', flexible='9+', fields=[
    F('ThrottleTimeMs', 'int32', '3+'),
    F('Brokers', '[]MetadataResponseBroker', '0+', fields=[
        F('NodeId', 'int32', '0+'),
        F('Host', 'string', '0+'),
        F('Port', 'int32', '0+'),
        F('Rack', 'string', '1+', nullable='1+', default=None),
    ]),
    F('ClusterId', 'string', '2+', nullable='2+', default=None),
    F('ControllerId', 'int32', '1+', default=-1),
    F('Topics', '[]MetadataResponseTopic', '0+', fields=[
        F('ErrorCode', 'int16', '0+'),
        F('Name', 'string', '0+', nullable='12+'),
        F('TopicId', 'uuid', '10+'),
        F('IsInternal', 'bool', '1+', default=False),
        F('Partitions', '[]MetadataResponsePartition', '0+', fields=[
            F('ErrorCode', 'int16', '0+'),
            F('PartitionIndex', 'int32', '0+'),
            F('LeaderId', 'int32', '0+'),
            F('LeaderEpoch', 'int32', '7+', default=-1),
            F('ReplicaNodes', '[]int32', '0+'),
            F('IsrNodes', '[]int32', '0+'),
            F('OfflineReplicas', '[]int32', '5+'),
        ]),
        F('TopicAuthorizedOperations', 'int32', '8+', default=-2147483648),
    ]),
    F('ClusterAuthorizedOperations', 'int32', '8-10', default=-2147483648),
    F('ErrorCode', 'int16', '13+'),
])

LIST_OFFSETS_REQUEST = Message('ListOffsetsRequest', 2, 'request', valid='1-11', flexible='6+', fields=[
    F('ReplicaId', 'int32', '0+'),
    F('IsolationLevel', 'int8', '2+'),
    F('Topics', '[]ListOffsetsTopic', '0+', fields=[
        F('Name', 'string', '0+'),
        F('Partitions', '[]ListOffsetsPartition', '0+', fields=[
            F('PartitionIndex', 'int32', '0+'),
            F('CurrentLeaderEpoch', 'int32', '4+', default=-1),
            F('Timestamp', 'int64', '0+'),
            F('MaxNumOffsets', 'int32', '0', default=1),
        ]),
    ]),
    F('TimeoutMs', 'int32', '10+'),
])

LIST_OFFSETS_RESPONSE = Message('ListOffsetsResponse', 2, 'response', valid='1-11', flexible='6+', fields=[
    F('ThrottleTimeMs', 'int32', '2+'),
    F('Topics', '[]ListOffsetsTopicResponse', '0+', fields=[
        F('Name', 'string', '0+'),
        F('Partitions', '[]ListOffsetsPartitionResponse', '0+', fields=[
            F('PartitionIndex', 'int32', '0+'),
            F('ErrorCode', 'int16', '0+'),
            F('OldStyleOffsets', '[]int64', '0'),
            F('Timestamp', 'int64', '1+', default=-1),
            F('Offset', 'int64', '1+', default=-1),
            F('LeaderEpoch', 'int32', '4+', default=-1),
        ]),
    ]),
])

FETCH_REQUEST = Message('FetchRequest', 1, 'request', valid='4-18', flexible='12+', fields=[
    F('ClusterId', 'string', '12+', nullable='12+', default=None, tag=0, tagged='12+'),
    F('ReplicaId', 'int32', '0-14', default=-1),
    F('ReplicaState', 'ReplicaState', '15+', tag=1, tagged='15+', fields=[
        F('ReplicaId', 'int32', '15+', default=-1),
        F('ReplicaEpoch', 'int64', '15+', default=-1),
    ]),
    F('MaxWaitMs', 'int32', '0+'),
    F('MinBytes', 'int32', '0+'),
    F('MaxBytes', 'int32', '3+', default=2147483647),
    F('IsolationLevel', 'int8', '4+', default=0),
    F('SessionId', 'int32', '7+', default=0),
    F('SessionEpoch', 'int32', '7+', default=-1),
    F('Topics', '[]FetchTopic', '0+', fields=[
        F('Topic', 'string', '0-12'),
        F('TopicId', 'uuid', '13+'),
        F('Partitions', '[]FetchPartition', '0+', fields=[
            F('Partition', 'int32', '0+'),
            F('CurrentLeaderEpoch', 'int32', '9+', default=-1),
            F('FetchOffset', 'int64', '0+'),
            F('LastFetchedEpoch', 'int32', '12+', default=-1),
            F('LogStartOffset', 'int64', '5+', default=-1),
            F('PartitionMaxBytes', 'int32', '0+'),
            F('ReplicaDirectoryId', 'uuid', '17+', tag=0, tagged='17+'),
            F('HighWatermark', 'int64', '18+', default=9223372036854775807, tag=1, tagged='18+'),
        ]),
    ]),
    F('ForgottenTopicsData', '[]ForgottenTopic', '7+', fields=[
        F('Topic', 'string', '7-12'),
        F('TopicId', 'uuid', '13+'),
        F('Partitions', '[]int32', '7+'),
    ]),
    F('RackId', 'string', '11+', default=''),
    # KIP-1248 (provisional tags, see kip1248.py and docs/kip-1248.md)
    F('RemoteLogSegmentLocationRequested', 'bool', '12+', default=False,
      tag=K.TAG_REMOTE_LOG_SEGMENT_LOCATION_REQUESTED, tagged='12+'),
    F('SupportedStorageFormatVersions', '[]string', '12+',
      tag=K.TAG_SUPPORTED_STORAGE_FORMAT_VERSIONS, tagged='12+'),
])

FETCH_RESPONSE = Message('FetchResponse', 1, 'response', valid='4-18', flexible='12+', fields=[
    F('ThrottleTimeMs', 'int32', '1+'),
    F('ErrorCode', 'int16', '7+'),
    F('SessionId', 'int32', '7+', default=0),
    F('Responses', '[]FetchableTopicResponse', '0+', fields=[
        F('Topic', 'string', '0-12'),
        F('TopicId', 'uuid', '13+'),
        F('Partitions', '[]PartitionData', '0+', fields=[
            F('PartitionIndex', 'int32', '0+'),
            F('ErrorCode', 'int16', '0+'),
            F('HighWatermark', 'int64', '0+'),
            F('LastStableOffset', 'int64', '4+', default=-1),
            F('LogStartOffset', 'int64', '5+', default=-1),
            F('DivergingEpoch', 'EpochEndOffset', '12+', tag=0, tagged='12+', fields=[
                F('Epoch', 'int32', '12+', default=-1),
                F('EndOffset', 'int64', '12+', default=-1),
            ]),
            F('CurrentLeader', 'LeaderIdAndEpoch', '12+', tag=1, tagged='12+', fields=[
                F('LeaderId', 'int32', '12+', default=-1),
                F('LeaderEpoch', 'int32', '12+', default=-1),
            ]),
            F('SnapshotId', 'SnapshotId', '12+', tag=2, tagged='12+', fields=[
                F('EndOffset', 'int64', '0+', default=-1),
                F('Epoch', 'int32', '0+', default=-1),
            ]),
            F('AbortedTransactions', '[]AbortedTransaction', '4+', nullable='4+', fields=[
                F('ProducerId', 'int64', '4+'),
                F('FirstOffset', 'int64', '4+'),
            ]),
            F('PreferredReadReplica', 'int32', '11+', default=-1),
            F('Records', 'records', '0+', nullable='0+'),
            # KIP-1248 (provisional tags): where the partition's data sits in tiered storage.
            F('RemoteLogSegmentId', 'uuid', '12+', tag=K.TAG_REMOTE_LOG_SEGMENT_ID, tagged='12+'),
            F('RemoteLogSegmentCustomMetadata', 'bytes', '12+', nullable='12+', default=None,
              tag=K.TAG_REMOTE_LOG_SEGMENT_CUSTOM_METADATA, tagged='12+'),
            F('RemoteLogSegmentStartPosition', 'int32', '12+', default=-1,
              tag=K.TAG_REMOTE_LOG_SEGMENT_START_POSITION, tagged='12+'),
            F('RemoteLogSegmentEndPosition', 'int32', '12+', default=-1,
              tag=K.TAG_REMOTE_LOG_SEGMENT_END_POSITION, tagged='12+'),
            F('RemoteLogSegmentBaseOffset', 'int64', '12+', default=-1,
              tag=K.TAG_REMOTE_LOG_SEGMENT_BASE_OFFSET, tagged='12+'),
            F('RemoteLogSegmentEndOffset', 'int64', '12+', default=-1,
              tag=K.TAG_REMOTE_LOG_SEGMENT_END_OFFSET, tagged='12+'),
            F('StorageFormatVersion', 'string', '12+', default='',
              tag=K.TAG_STORAGE_FORMAT_VERSION, tagged='12+'),
            F('SignedRemoteLogSegmentLocation', 'string', '12+', nullable='12+', default=None,
              tag=K.TAG_SIGNED_REMOTE_LOG_SEGMENT_LOCATION, tagged='12+', sensitive=True),
        ]),
    ]),
    F('NodeEndpoints', '[]NodeEndpoint', '16+', tag=0, tagged='16+', fields=[
        F('NodeId', 'int32', '16+'),
        F('Host', 'string', '16+'),
        F('Port', 'int32', '16+'),
        F('Rack', 'string', '16+', nullable='16+', default=None),
    ]),
])

PRODUCE_REQUEST = Message('ProduceRequest', 0, 'request', valid='3-13', flexible='9+', fields=[
    F('TransactionalId', 'string', '3+', nullable='3+', default=None),
    F('Acks', 'int16', '0+'),
    F('TimeoutMs', 'int32', '0+'),
    F('TopicData', '[]TopicProduceData', '0+', fields=[
        F('Name', 'string', '0-12'),
        F('TopicId', 'uuid', '13+'),
        F('PartitionData', '[]PartitionProduceData', '0+', fields=[
            F('Index', 'int32', '0+'),
            F('Records', 'records', '0+', nullable='0+'),
        ]),
    ]),
])

PRODUCE_RESPONSE = Message('ProduceResponse', 0, 'response', valid='3-13', flexible='9+', fields=[
    F('Responses', '[]TopicProduceResponse', '0+', fields=[
        F('Name', 'string', '0-12'),
        F('TopicId', 'uuid', '13+'),
        F('PartitionResponses', '[]PartitionProduceResponse', '0+', fields=[
            F('Index', 'int32', '0+'),
            F('ErrorCode', 'int16', '0+'),
            F('BaseOffset', 'int64', '0+'),
            F('LogAppendTimeMs', 'int64', '2+', default=-1),
            F('LogStartOffset', 'int64', '5+', default=-1),
            F('RecordErrors', '[]BatchIndexAndErrorMessage', '8+', fields=[
                F('BatchIndex', 'int32', '8+'),
                F('BatchIndexErrorMessage', 'string', '8+', nullable='8+', default=None),
            ]),
            F('ErrorMessage', 'string', '8+', nullable='8+', default=None),
            F('CurrentLeader', 'LeaderIdAndEpoch', '10+', tag=0, tagged='10+', fields=[
                F('LeaderId', 'int32', '10+', default=-1),
                F('LeaderEpoch', 'int32', '10+', default=-1),
            ]),
        ]),
    ]),
    F('ThrottleTimeMs', 'int32', '1+', default=0),
    F('NodeEndpoints', '[]NodeEndpoint', '10+', tag=0, tagged='10+', fields=[
        F('NodeId', 'int32', '10+'),
        F('Host', 'string', '10+'),
        F('Port', 'int32', '10+'),
        F('Rack', 'string', '10+', nullable='10+', default=None),
    ]),
])

SASL_HANDSHAKE_REQUEST = Message('SaslHandshakeRequest', 17, 'request', valid='0-1', flexible='none', fields=[
    F('Mechanism', 'string', '0+'),
])

SASL_HANDSHAKE_RESPONSE = Message('SaslHandshakeResponse', 17, 'response', valid='0-1', flexible='none', fields=[
    F('ErrorCode', 'int16', '0+'),
    F('Mechanisms', '[]string', '0+'),
])

SASL_AUTHENTICATE_REQUEST = Message('SaslAuthenticateRequest', 36, 'request', valid='0-2', flexible='2+', fields=[
    F('AuthBytes', 'bytes', '0+', sensitive=True),
])

SASL_AUTHENTICATE_RESPONSE = Message('SaslAuthenticateResponse', 36, 'response', valid='0-2', flexible='2+', fields=[
    F('ErrorCode', 'int16', '0+'),
    F('ErrorMessage', 'string', '0+', nullable='0+'),
    F('AuthBytes', 'bytes', '0+', sensitive=True),
    F('SessionLifetimeMs', 'int64', '1+', default=0),
])

FIND_COORDINATOR_REQUEST = Message('FindCoordinatorRequest', 10, 'request', valid='0-6', flexible='3+', fields=[
    F('Key', 'string', '0-3'),
    F('KeyType', 'int8', '1+', default=0),
    F('CoordinatorKeys', '[]string', '4+'),
])

FIND_COORDINATOR_RESPONSE = Message('FindCoordinatorResponse', 10, 'response', valid='0-6', flexible='3+', fields=[
    F('ThrottleTimeMs', 'int32', '1+'),
    F('ErrorCode', 'int16', '0-3'),
    F('ErrorMessage', 'string', '1-3', nullable='1-3'),
    F('NodeId', 'int32', '0-3'),
    F('Host', 'string', '0-3'),
    F('Port', 'int32', '0-3'),
    F('Coordinators', '[]Coordinator', '4+', fields=[
        F('Key', 'string', '4+'),
        F('NodeId', 'int32', '4+'),
        F('Host', 'string', '4+'),
        F('Port', 'int32', '4+'),
        F('ErrorCode', 'int16', '4+'),
        F('ErrorMessage', 'string', '4+', nullable='4+'),
    ]),
])

INIT_PRODUCER_ID_REQUEST = Message('InitProducerIdRequest', 22, 'request', valid='0-6', flexible='2+', fields=[
    F('TransactionalId', 'string', '0+', nullable='0+'),
    F('TransactionTimeoutMs', 'int32', '0+'),
    F('ProducerId', 'int64', '3+', default=-1),
    F('ProducerEpoch', 'int16', '3+', default=-1),
    F('Enable2Pc', 'bool', '6+', default=False),
    F('KeepPreparedTxn', 'bool', '6+', default=False),
])

INIT_PRODUCER_ID_RESPONSE = Message('InitProducerIdResponse', 22, 'response', valid='0-6', flexible='2+', fields=[
    F('ThrottleTimeMs', 'int32', '0+'),
    F('ErrorCode', 'int16', '0+'),
    F('ProducerId', 'int64', '0+', default=-1),
    F('ProducerEpoch', 'int16', '0+'),
    F('OngoingTxnProducerId', 'int64', '6+', default=-1),
    F('OngoingTxnProducerEpoch', 'int16', '6+', default=-1),
])

ADD_PARTITIONS_TO_TXN_REQUEST = Message('AddPartitionsToTxnRequest', 24, 'request', valid='0-5', flexible='3+', fields=[
    F('Transactions', '[]AddPartitionsToTxnTransaction', '4+', fields=[
        F('TransactionalId', 'string', '4+'),
        F('ProducerId', 'int64', '4+'),
        F('ProducerEpoch', 'int16', '4+'),
        F('VerifyOnly', 'bool', '4+', default=False),
        F('Topics', '[]AddPartitionsToTxnTopic', '4+', fields=[
            F('Name', 'string', '0+'),
            F('Partitions', '[]int32', '0+'),
        ]),
    ]),
    F('V3AndBelowTransactionalId', 'string', '0-3'),
    F('V3AndBelowProducerId', 'int64', '0-3'),
    F('V3AndBelowProducerEpoch', 'int16', '0-3'),
    F('V3AndBelowTopics', '[]AddPartitionsToTxnTopic', '0-3', fields=[
        F('Name', 'string', '0+'),
        F('Partitions', '[]int32', '0+'),
    ]),
])

ADD_PARTITIONS_TO_TXN_RESPONSE = Message('AddPartitionsToTxnResponse', 24, 'response', valid='0-5', flexible='3+', fields=[
    F('ThrottleTimeMs', 'int32', '0+'),
    F('ErrorCode', 'int16', '4+'),
    F('ResultsByTransaction', '[]AddPartitionsToTxnResult', '4+', fields=[
        F('TransactionalId', 'string', '4+'),
        F('TopicResults', '[]AddPartitionsToTxnTopicResult', '4+', fields=[
            F('Name', 'string', '0+'),
            F('ResultsByPartition', '[]AddPartitionsToTxnPartitionResult', '0+', fields=[
                F('PartitionIndex', 'int32', '0+'),
                F('PartitionErrorCode', 'int16', '0+'),
            ]),
        ]),
    ]),
    F('ResultsByTopicV3AndBelow', '[]AddPartitionsToTxnTopicResult', '0-3', fields=[
        F('Name', 'string', '0+'),
        F('ResultsByPartition', '[]AddPartitionsToTxnPartitionResult', '0+', fields=[
            F('PartitionIndex', 'int32', '0+'),
            F('PartitionErrorCode', 'int16', '0+'),
        ]),
    ]),
])

END_TXN_REQUEST = Message('EndTxnRequest', 26, 'request', valid='0-5', flexible='3+', fields=[
    F('TransactionalId', 'string', '0+'),
    F('ProducerId', 'int64', '0+'),
    F('ProducerEpoch', 'int16', '0+'),
    F('Committed', 'bool', '0+'),
])

END_TXN_RESPONSE = Message('EndTxnResponse', 26, 'response', valid='0-5', flexible='3+', fields=[
    F('ThrottleTimeMs', 'int32', '0+'),
    F('ErrorCode', 'int16', '0+'),
    F('ProducerId', 'int64', '5+', default=-1),
    F('ProducerEpoch', 'int16', '5+', default=-1),
])

OFFSET_FETCH_REQUEST = Message('OffsetFetchRequest', 9, 'request', valid='1-10', flexible='6+', fields=[
    F('GroupId', 'string', '0-7'),
    F('Topics', '[]OffsetFetchRequestTopic', '0-7', nullable='2-7', fields=[
        F('Name', 'string', '0-7'),
        F('PartitionIndexes', '[]int32', '0-7'),
    ]),
    F('Groups', '[]OffsetFetchRequestGroup', '8+', fields=[
        F('GroupId', 'string', '8+'),
        F('MemberId', 'string', '9+', nullable='9+', default=None),
        F('MemberEpoch', 'int32', '9+', default=-1),
        F('Topics', '[]OffsetFetchRequestTopics', '8+', nullable='8+', fields=[
            F('Name', 'string', '8-9'),
            F('TopicId', 'uuid', '10+'),
            F('PartitionIndexes', '[]int32', '8+'),
        ]),
    ]),
    F('RequireStable', 'bool', '7+', default=False),
])

OFFSET_FETCH_RESPONSE = Message('OffsetFetchResponse', 9, 'response', valid='1-10', flexible='6+', fields=[
    F('ThrottleTimeMs', 'int32', '3+'),
    F('Topics', '[]OffsetFetchResponseTopic', '0-7', fields=[
        F('Name', 'string', '0-7'),
        F('Partitions', '[]OffsetFetchResponsePartition', '0-7', fields=[
            F('PartitionIndex', 'int32', '0-7'),
            F('CommittedOffset', 'int64', '0-7'),
            F('CommittedLeaderEpoch', 'int32', '5-7', default=-1),
            F('Metadata', 'string', '0-7', nullable='0-7'),
            F('ErrorCode', 'int16', '0-7'),
        ]),
    ]),
    F('ErrorCode', 'int16', '2-7', default=0),
    F('Groups', '[]OffsetFetchResponseGroup', '8+', fields=[
        F('GroupId', 'string', '8+'),
        F('Topics', '[]OffsetFetchResponseTopics', '8+', fields=[
            F('Name', 'string', '8-9'),
            F('TopicId', 'uuid', '10+'),
            F('Partitions', '[]OffsetFetchResponsePartitions', '8+', fields=[
                F('PartitionIndex', 'int32', '8+'),
                F('CommittedOffset', 'int64', '8+'),
                F('CommittedLeaderEpoch', 'int32', '8+', default=-1),
                F('Metadata', 'string', '8+', nullable='8+'),
                F('ErrorCode', 'int16', '8+'),
            ]),
        ]),
        F('ErrorCode', 'int16', '8+', default=0),
    ]),
])

OFFSET_COMMIT_REQUEST = Message('OffsetCommitRequest', 8, 'request', valid='2-10', flexible='8+', fields=[
    F('GroupId', 'string', '0+'),
    F('GenerationIdOrMemberEpoch', 'int32', '1+', default=-1),
    F('MemberId', 'string', '1+'),
    F('GroupInstanceId', 'string', '7+', nullable='7+', default=None),
    F('RetentionTimeMs', 'int64', '2-4', default=-1),
    F('Topics', '[]OffsetCommitRequestTopic', '0+', fields=[
        F('Name', 'string', '0-9'),
        F('TopicId', 'uuid', '10+'),
        F('Partitions', '[]OffsetCommitRequestPartition', '0+', fields=[
            F('PartitionIndex', 'int32', '0+'),
            F('CommittedOffset', 'int64', '0+'),
            F('CommittedLeaderEpoch', 'int32', '6+', default=-1),
            F('CommitTimestamp', 'int64', '1', default=-1),
            F('CommittedMetadata', 'string', '0+', nullable='0+'),
        ]),
    ]),
])

OFFSET_COMMIT_RESPONSE = Message('OffsetCommitResponse', 8, 'response', valid='2-10', flexible='8+', fields=[
    F('ThrottleTimeMs', 'int32', '3+'),
    F('Topics', '[]OffsetCommitResponseTopic', '0+', fields=[
        F('Name', 'string', '0-9'),
        F('TopicId', 'uuid', '10+'),
        F('Partitions', '[]OffsetCommitResponsePartition', '0+', fields=[
            F('PartitionIndex', 'int32', '0+'),
            F('ErrorCode', 'int16', '0+'),
        ]),
    ]),
])

GET_TELEMETRY_SUBSCRIPTIONS_REQUEST = Message('GetTelemetrySubscriptionsRequest', 71, 'request', valid='0', flexible='0+', fields=[
    F('ClientInstanceId', 'uuid', '0+'),
])

GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE = Message('GetTelemetrySubscriptionsResponse', 71, 'response', valid='0', flexible='0+', fields=[
    F('ThrottleTimeMs', 'int32', '0+'),
    F('ErrorCode', 'int16', '0+'),
    F('ClientInstanceId', 'uuid', '0+'),
    F('SubscriptionId', 'int32', '0+'),
    F('AcceptedCompressionTypes', '[]int8', '0+'),
    F('PushIntervalMs', 'int32', '0+'),
    F('TelemetryMaxBytes', 'int32', '0+'),
    F('DeltaTemporality', 'bool', '0+'),
    F('RequestedMetrics', '[]string', '0+'),
])

PUSH_TELEMETRY_REQUEST = Message('PushTelemetryRequest', 72, 'request', valid='0', flexible='0+', fields=[
    F('ClientInstanceId', 'uuid', '0+'),
    F('SubscriptionId', 'int32', '0+'),
    F('Terminating', 'bool', '0+'),
    F('CompressionType', 'int8', '0+'),
    F('Metrics', 'bytes', '0+'),
])

PUSH_TELEMETRY_RESPONSE = Message('PushTelemetryResponse', 72, 'response', valid='0', flexible='0+', fields=[
    F('ThrottleTimeMs', 'int32', '0+'),
    F('ErrorCode', 'int16', '0+'),
])

# OffsetForLeaderEpoch: the end offset of a leader epoch on the leader's lineage (which copy of a
# tiered segment is live).  Versions 0-1 were removed in 4.0 (KIP-896); the response's are
# narrowed to the request's 2-4 to match.
OFFSET_FOR_LEADER_EPOCH_REQUEST = Message('OffsetForLeaderEpochRequest', 23, 'request', valid='2-4', flexible='4+', fields=[
    F('ReplicaId', 'int32', '3+', default=-2),
    F('Topics', '[]OffsetForLeaderTopic', '0+', fields=[
        F('Topic', 'string', '0+'),
        F('Partitions', '[]OffsetForLeaderPartition', '0+', fields=[
            F('Partition', 'int32', '0+'),
            F('CurrentLeaderEpoch', 'int32', '2+', default=-1),
            F('LeaderEpoch', 'int32', '0+'),
        ]),
    ]),
])

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message('OffsetForLeaderEpochResponse', 23, 'response', valid='2-4', flexible='4+', fields=[
    F('ThrottleTimeMs', 'int32', '2+'),
    F('Topics', '[]OffsetForLeaderTopicResult', '0+', fields=[
        F('Topic', 'string', '0+'),
        F('Partitions', '[]OffsetForLeaderPartitionResult', '0+', fields=[
            F('ErrorCode', 'int16', '0+'),
            F('Partition', 'int32', '0+'),
            F('LeaderEpoch', 'int32', '1+', default=-1),
            F('EndOffset', 'int64', '0+'),
        ]),
    ]),
])

# DescribeConfigs (v0 removed in 4.0, KIP-896): the catalog reads the metadata topic's delete.retention.ms
DESCRIBE_CONFIGS_REQUEST = Message('DescribeConfigsRequest', 32, 'request', valid='1-4', flexible='4+', fields=[
    F('Resources', '[]DescribeConfigsResource', '0+', fields=[
        F('ResourceType', 'int8', '0+'),
        F('ResourceName', 'string', '0+'),
        F('ConfigurationKeys', '[]string', '0+', nullable='0+'),
    ]),
    F('IncludeSynonyms', 'bool', '1+', default=False),
    F('IncludeDocumentation', 'bool', '3+', default=False),
])
DESCRIBE_CONFIGS_RESPONSE = Message('DescribeConfigsResponse', 32, 'response', valid='1-4', flexible='4+', fields=[
    F('ThrottleTimeMs', 'int32', '0+'),
    F('Results', '[]DescribeConfigsResult', '0+', fields=[
        F('ErrorCode', 'int16', '0+'),
        F('ErrorMessage', 'string', '0+', nullable='0+'),
        F('ResourceType', 'int8', '0+'),
        F('ResourceName', 'string', '0+'),
        F('Configs', '[]DescribeConfigsResourceResult', '0+', fields=[
            F('Name', 'string', '0+'),
            F('Value', 'string', '0+', nullable='0+'),
            F('ReadOnly', 'bool', '0+'),
            F('IsDefault', 'bool', '0'),
            F('ConfigSource', 'int8', '1+', default=-1),
            F('IsSensitive', 'bool', '0+'),
            F('Synonyms', '[]DescribeConfigsSynonym', '1+', fields=[  # each: a source's value
                F('Name', 'string', '1+'), F('Value', 'string', '1+', nullable='0+'), F('Source', 'int8', '1+')]),
            F('ConfigType', 'int8', '3+', default=0),
            F('Documentation', 'string', '3+', nullable='0+'),
        ]),
    ]),
])

DECLARATIONS = [v for v in list(globals().values()) if isinstance(v, Message)]
_BY_NAME = {d.name: d for d in DECLARATIONS}

for _decl in DECLARATIONS:
    _peer = _BY_NAME[_decl.name[: -len(_decl.kind)] + ("Response" if _decl.kind == "request" else "Request")]
    if (_decl.valid, _decl.flexible) != (_peer.valid, _peer.flexible):
        raise ImportError(f"{_decl.name}/{_peer.name}: request and response version ranges differ")
del _decl, _peer

API_NAMES = {d.api_key: d.name[: -len("Request")] for d in DECLARATIONS if d.kind == "request"}  # 1 -> "Fetch"

# The classes are built on first use (a process that only plans builds the few it uses, not all):
# REQUESTS / RESPONSES and the module's attributes (FetchRequest, ...) build them.
CLASSES = MessageClasses(DECLARATIONS, __name__)
REQUESTS: Mapping[int, Any] = CLASSES.by_api_key("request")    # api key -> request class
RESPONSES: Mapping[int, Any] = CLASSES.by_api_key("response")  # api key -> response class


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"api key {api_key}")


def __getattr__(name: str) -> Any:
    """``messages.FetchRequest`` (and ``from .messages import FetchRequest``): built on first use."""
    if name in _BY_NAME:
        cls = globals()[name] = CLASSES[name]
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:   # the generated classes, by name (spelled out so readers and tools can find them)
    ApiVersionsRequest: Any; ApiVersionsResponse: Any
    MetadataRequest: Any; MetadataResponse: Any
    ListOffsetsRequest: Any; ListOffsetsResponse: Any
    FetchRequest: Any; FetchResponse: Any
    ProduceRequest: Any; ProduceResponse: Any
    SaslHandshakeRequest: Any; SaslHandshakeResponse: Any
    SaslAuthenticateRequest: Any; SaslAuthenticateResponse: Any
    FindCoordinatorRequest: Any; FindCoordinatorResponse: Any
    InitProducerIdRequest: Any; InitProducerIdResponse: Any
    AddPartitionsToTxnRequest: Any; AddPartitionsToTxnResponse: Any
    EndTxnRequest: Any; EndTxnResponse: Any
    OffsetFetchRequest: Any; OffsetFetchResponse: Any
    OffsetCommitRequest: Any; OffsetCommitResponse: Any
    GetTelemetrySubscriptionsRequest: Any; GetTelemetrySubscriptionsResponse: Any
    PushTelemetryRequest: Any; PushTelemetryResponse: Any
    OffsetForLeaderEpochRequest: Any; OffsetForLeaderEpochResponse: Any
    DescribeConfigsRequest: Any; DescribeConfigsResponse: Any
