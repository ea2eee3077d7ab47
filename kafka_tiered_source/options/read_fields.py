"""The fields of :class:`.read.ReadOptions`: one per row of the option table for it, then the
others (the other configs among them).
Generated from :mod:`.table` by ``python -m kafka_tiered_source.options.codegen``: edit the table
(or the codegen's EXTRAS), not this file."""
from __future__ import annotations

from typing import ClassVar

from ..model import EarliestOffsets, LatestOffsets, OffsetBound, Strategy
from .fields import Fallback, IsolationLevel, Locator
from .frozen import Frozen
from .option_map import OptionMap
from .pricing import CostModel
from .quotas import QuotaConfig
from .storage import FetcherConfig
from .typed_values import ValuesConfig

_DEFAULT_STARTING_OFFSETS = EarliestOffsets()
_DEFAULT_ENDING_OFFSETS = LatestOffsets()
_DEFAULT_KAFKA = OptionMap()
_DEFAULT_STORAGE = FetcherConfig()
_DEFAULT_COST = CostModel()
_DEFAULT_QUOTA = QuotaConfig()
_DEFAULT_VALUES = ValuesConfig()


class ReadOptionsFields(Frozen):
    """The fields of :class:`ReadOptions`: one per option of the table, then the rest."""
    __slots__ = FIELDS = ("fail_on_data_loss", "min_partitions", "max_records_per_partition",
                        "include_headers", "poll_timeout_ms", "fetch_offset_num_retries",
                        "fetch_offset_retry_interval_ms", "max_offsets_per_trigger",
                        "min_offsets_per_trigger", "max_trigger_delay_ms", "max_bytes_per_trigger",
                        "partition_target_bytes", "fetch_remote_enabled", "segment_locator",
                        "metadata_topic", "metadata_cache_dir", "fetch_remote_fallback",
                        "fetch_remote_fallback_max_bytes", "metrics_jsonl_path", "metrics_dir",
                        "telemetry_push", "strategy", "bootstrap_servers", "starting_offsets",
                        "ending_offsets", "isolation_level", "client_id", "kafka", "storage", "ignored",
                        "cost", "quota", "streaming", "values")
    #: those that are one option each
    OPTION_FIELDS: ClassVar[tuple[str, ...]] = FIELDS[:21]
    __match_args__ = ("fail_on_data_loss", "min_partitions", "max_records_per_partition", "include_headers",
                      "poll_timeout_ms", "fetch_offset_num_retries", "fetch_offset_retry_interval_ms",
                      "max_offsets_per_trigger", "min_offsets_per_trigger", "max_trigger_delay_ms",
                      "max_bytes_per_trigger", "partition_target_bytes", "fetch_remote_enabled",
                      "segment_locator", "metadata_topic", "metadata_cache_dir", "fetch_remote_fallback",
                      "fetch_remote_fallback_max_bytes", "metrics_jsonl_path", "metrics_dir",
                      "telemetry_push")
    #: ``failOnDataLoss``: fail when offsets were deleted by retention
    fail_on_data_loss: bool
    #: ``minPartitions``: at least this many Spark partitions
    min_partitions: int | None
    #: ``maxRecordsPerPartition``: at most this many offsets per Spark partition
    max_records_per_partition: int | None
    #: ``includeHeaders``: add the `headers` column
    include_headers: bool
    #: ``kafkaConsumer.pollTimeoutMs``: the longest a fetch of broker records (ms) may take, retries included, before the task fails (Spark: spark.network.timeout)
    poll_timeout_ms: int
    #: ``fetchOffset.numRetries``: attempts of each offset look-up (ListOffsets) before the read fails, as Spark counts them
    fetch_offset_num_retries: int
    #: ``fetchOffset.retryIntervalMs``: wait between those attempts (ms)
    fetch_offset_retry_interval_ms: int
    #: ``maxOffsetsPerTrigger``: at most this many offsets per micro-batch, split over the partitions by lag
    max_offsets_per_trigger: int | None
    #: ``minOffsetsPerTrigger``: wait for this many new offsets (or maxTriggerDelay) before a micro-batch
    min_offsets_per_trigger: int | None
    #: ``maxTriggerDelay``: the longest a micro-batch waits for minOffsetsPerTrigger
    max_trigger_delay_ms: int
    #: ``maxBytesPerTrigger``: at most this many log bytes per micro-batch (kafka-tiered's own)
    max_bytes_per_trigger: int | None
    #: ``partition.target.bytes``: bytes per Spark partition
    partition_target_bytes: int
    #: ``fetch.remote.enabled``: read tiered segments directly; `false` reads everything through brokers
    fetch_remote_enabled: bool
    #: ``remote.segment.locator``: how tiered segments are found: `auto` (KIP-1248 answers, then `__remote_log_metadata`, then listing the store), `kip1248`, `metadata-topic` or `listing`
    segment_locator: Locator
    #: ``remote.log.metadata.topic``: the topic today's brokers keep tiered segments in (TopicBasedRemoteLogMetadataManager)
    metadata_topic: str
    #: ``remote.log.metadata.cache.dir``: where the catalog of that topic is kept between processes, so a plan reads only what was written since the last one: a path, or an fsspec URL several drivers share (s3://bucket/kt-cache); `none` keeps it in the process only (default: $KAFKA_TIERED_CACHE_DIR, else the user's cache directory)
    metadata_cache_dir: str | None
    #: ``fetch.remote.fallback``: when tiered ranges go through the brokers: `auto` (a range whose direct read fails on a storage fault), `never` (the task fails; Spark retries it) or `always` (all of them, on purpose)
    fetch_remote_fallback: Fallback
    #: ``fetch.remote.fallback.max.bytes``: a task fails once more than this many bytes came through the brokers because direct reads failed
    fetch_remote_fallback_max_bytes: int | None
    #: ``metrics.jsonl.path``: each task appends its metrics here as a JSON line
    metrics_jsonl_path: str | None
    #: ``metrics.dir``: each task writes its metrics under `<dir>/<read id>/`, where `last_read_stats` finds them without an accumulator (Spark Connect): a path or fsspec URL every executor can write (default on Connect after `register()`: each machine's temp directory)
    metrics_dir: str | None
    #: ``telemetry.push.enabled``: push task metrics to the broker (KIP-714) when it asks
    telemetry_push: bool
    # not one option each
    strategy: Strategy
    bootstrap_servers: tuple[str, ...]
    starting_offsets: OffsetBound
    ending_offsets: OffsetBound
    isolation_level: IsolationLevel
    client_id: str
    kafka: OptionMap
    storage: FetcherConfig
    ignored: tuple[str, ...]
    cost: CostModel
    quota: QuotaConfig
    streaming: bool
    values: ValuesConfig

    def __init__(self, fail_on_data_loss: bool = True, min_partitions: int | None = None,
                 max_records_per_partition: int | None = None, include_headers: bool = False,
                 poll_timeout_ms: int = 120000, fetch_offset_num_retries: int = 3,
                 fetch_offset_retry_interval_ms: int = 10, max_offsets_per_trigger: int | None = None,
                 min_offsets_per_trigger: int | None = None, max_trigger_delay_ms: int = 900000,
                 max_bytes_per_trigger: int | None = None, partition_target_bytes: int = 134217728,
                 fetch_remote_enabled: bool = True, segment_locator: Locator = "auto",
                 metadata_topic: str = "__remote_log_metadata", metadata_cache_dir: str | None = None,
                 fetch_remote_fallback: Fallback = "auto",
                 fetch_remote_fallback_max_bytes: int | None = None, metrics_jsonl_path: str | None = None,
                 metrics_dir: str | None = None, telemetry_push: bool = True, *, strategy: Strategy,
                 bootstrap_servers: tuple[str, ...] = (),
                 starting_offsets: OffsetBound = _DEFAULT_STARTING_OFFSETS,
                 ending_offsets: OffsetBound = _DEFAULT_ENDING_OFFSETS,
                 isolation_level: IsolationLevel = "read_uncommitted", client_id: str = "kafka-tiered",
                 kafka: OptionMap = _DEFAULT_KAFKA, storage: FetcherConfig = _DEFAULT_STORAGE,
                 ignored: tuple[str, ...] = (), cost: CostModel = _DEFAULT_COST,
                 quota: QuotaConfig = _DEFAULT_QUOTA, streaming: bool = False,
                 values: ValuesConfig = _DEFAULT_VALUES) -> None:
        _set = object.__setattr__
        _set(self, "fail_on_data_loss", fail_on_data_loss)
        _set(self, "min_partitions", min_partitions)
        _set(self, "max_records_per_partition", max_records_per_partition)
        _set(self, "include_headers", include_headers)
        _set(self, "poll_timeout_ms", poll_timeout_ms)
        _set(self, "fetch_offset_num_retries", fetch_offset_num_retries)
        _set(self, "fetch_offset_retry_interval_ms", fetch_offset_retry_interval_ms)
        _set(self, "max_offsets_per_trigger", max_offsets_per_trigger)
        _set(self, "min_offsets_per_trigger", min_offsets_per_trigger)
        _set(self, "max_trigger_delay_ms", max_trigger_delay_ms)
        _set(self, "max_bytes_per_trigger", max_bytes_per_trigger)
        _set(self, "partition_target_bytes", partition_target_bytes)
        _set(self, "fetch_remote_enabled", fetch_remote_enabled)
        _set(self, "segment_locator", segment_locator)
        _set(self, "metadata_topic", metadata_topic)
        _set(self, "metadata_cache_dir", metadata_cache_dir)
        _set(self, "fetch_remote_fallback", fetch_remote_fallback)
        _set(self, "fetch_remote_fallback_max_bytes", fetch_remote_fallback_max_bytes)
        _set(self, "metrics_jsonl_path", metrics_jsonl_path)
        _set(self, "metrics_dir", metrics_dir)
        _set(self, "telemetry_push", telemetry_push)
        _set(self, "strategy", strategy)
        _set(self, "bootstrap_servers", bootstrap_servers)
        _set(self, "starting_offsets", starting_offsets)
        _set(self, "ending_offsets", ending_offsets)
        _set(self, "isolation_level", isolation_level)
        _set(self, "client_id", client_id)
        _set(self, "kafka", kafka)
        _set(self, "storage", storage)
        _set(self, "ignored", ignored)
        _set(self, "cost", cost)
        _set(self, "quota", quota)
        _set(self, "streaming", streaming)
        _set(self, "values", values)
        self.__post_init__()

    def __post_init__(self) -> None:
        """Checks of the whole config, run by ``__init__`` (as a dataclass runs its own)."""

    def _values(self) -> tuple:
        return (self.fail_on_data_loss, self.min_partitions, self.max_records_per_partition,
                self.include_headers, self.poll_timeout_ms, self.fetch_offset_num_retries,
                self.fetch_offset_retry_interval_ms, self.max_offsets_per_trigger,
                self.min_offsets_per_trigger, self.max_trigger_delay_ms, self.max_bytes_per_trigger,
                self.partition_target_bytes, self.fetch_remote_enabled, self.segment_locator,
                self.metadata_topic, self.metadata_cache_dir, self.fetch_remote_fallback,
                self.fetch_remote_fallback_max_bytes, self.metrics_jsonl_path, self.metrics_dir,
                self.telemetry_push, self.strategy, self.bootstrap_servers, self.starting_offsets,
                self.ending_offsets, self.isolation_level, self.client_id, self.kafka, self.storage,
                self.ignored, self.cost, self.quota, self.streaming, self.values)

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                f"fail_on_data_loss={self.fail_on_data_loss!r}, "
                f"min_partitions={self.min_partitions!r}, "
                f"max_records_per_partition={self.max_records_per_partition!r}, "
                f"include_headers={self.include_headers!r}, "
                f"poll_timeout_ms={self.poll_timeout_ms!r}, "
                f"fetch_offset_num_retries={self.fetch_offset_num_retries!r}, "
                f"fetch_offset_retry_interval_ms={self.fetch_offset_retry_interval_ms!r}, "
                f"max_offsets_per_trigger={self.max_offsets_per_trigger!r}, "
                f"min_offsets_per_trigger={self.min_offsets_per_trigger!r}, "
                f"max_trigger_delay_ms={self.max_trigger_delay_ms!r}, "
                f"max_bytes_per_trigger={self.max_bytes_per_trigger!r}, "
                f"partition_target_bytes={self.partition_target_bytes!r}, "
                f"fetch_remote_enabled={self.fetch_remote_enabled!r}, "
                f"segment_locator={self.segment_locator!r}, "
                f"metadata_topic={self.metadata_topic!r}, "
                f"metadata_cache_dir={self.metadata_cache_dir!r}, "
                f"fetch_remote_fallback={self.fetch_remote_fallback!r}, "
                f"fetch_remote_fallback_max_bytes={self.fetch_remote_fallback_max_bytes!r}, "
                f"metrics_jsonl_path={self.metrics_jsonl_path!r}, "
                f"metrics_dir={self.metrics_dir!r}, "
                f"telemetry_push={self.telemetry_push!r}, "
                f"strategy={self.strategy!r}, "
                f"bootstrap_servers={self.bootstrap_servers!r}, "
                f"starting_offsets={self.starting_offsets!r}, "
                f"ending_offsets={self.ending_offsets!r}, "
                f"isolation_level={self.isolation_level!r}, "
                f"client_id={self.client_id!r}, "
                f"kafka={self.kafka!r}, "
                f"storage={self.storage!r}, "
                f"ignored={self.ignored!r}, "
                f"cost={self.cost!r}, "
                f"quota={self.quota!r}, "
                f"streaming={self.streaming!r}, "
                f"values={self.values!r})")
