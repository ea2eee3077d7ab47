"""How every task's totals reach the caller's :func:`last_read_stats` / :func:`read_history`.

Classic Spark (a SparkContext in this process): a Spark accumulator.  Spark 4.3 runs a Python
data source's ``__init__``/``schema()`` and ``partitions()`` in worker processes, never in the
driver's Python process, so the data source itself cannot create one (there is no SparkContext
there).  :func:`~.registration.install` (called by ``kafka_tiered_source.register(spark)``) creates it on the
driver and registers the data source with the session's :class:`SessionContext` (the
accumulator, the application name, the default ``client.id``, and id), which travels inside the
registered class (``datasource.for_session``).  Tasks add their
:class:`~kafka_tiered_source.metrics.reader.ReadTotals` to it; ``kafka_tiered_source.read()``
captures the same accumulator in its task function.  The accumulators are held by weak
reference to their SparkContext: a stopped context is not kept alive here.

Spark Connect (no SparkContext, no accumulators, and the client may run on another machine
than the driver and the executors): a metrics directory
(:mod:`kafka_tiered_source.metrics.directory`).  Every task writes one file under
``<dir>/<read id>/``; :func:`read_history` runs a one-task Spark job that reads the session's
directory *on the cluster* and returns the files' contents, so the client needs no access to
the location, only the executors do.  The directory is ``<metrics_dir>/<session id>`` when
:func:`~.registration.install` was given one (a shared location: ``s3://...``, ``/Volumes/...``,
``/dbfs/...``), else ``<temp dir>/kafka-tiered-metrics/<session id>`` on each machine, which
serves local mode and single-machine clusters.  A read with fewer task files than planned tasks
is logged (files on other machines' local disks cannot be seen: give a shared ``metrics_dir``).

Reads through the automatically registered source (``pyspark_kafka_tiered``) still work, but
their totals reach the caller only if :func:`~.registration.install` ran first (or, anywhere, when the read
sets ``metrics.dir`` and :func:`read_history` is given the same directory).
"""
from __future__ import annotations

import logging
import threading
import weakref

from ..dataclass import dataclass
from ..metrics.reader import ReadHistory
from .session import app_id, is_connect, session_id

log = logging.getLogger(__name__)

_lock = threading.Lock()
# SparkContext -> its accumulator; weak keys: a stopped and dropped context goes with its entry
_accumulators: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_connect_dirs: dict = {}     # Connect session id -> the session's metrics directory, or None


@dataclass(frozen=True)
class SessionContext:
    """What ``register(spark)`` tells the data source of its session: where task totals go
    (``accumulator`` on classic sessions; ``metrics_dir`` / ``session`` on Connect), the
    application name (the default ``client.id``) and id.  Small and picklable: it travels
    inside the registered class."""
    accumulator: object = None
    app_name: str | None = None
    app_id: str | None = None
    metrics_dir: str | None = None
    session: str | None = None


def _param():
    from pyspark.accumulators import AccumulatorParam

    class ReadHistoryParam(AccumulatorParam):
        """Merges :class:`ReadHistory` values and the :class:`ReadTotals` tasks add."""

        def zero(self, value):
            return ReadHistory()

        def addInPlace(self, value1, value2):
            if not isinstance(value1, ReadHistory):
                value1 = ReadHistory().add(value1)
            return value1.add(value2)

    return ReadHistoryParam()


def accumulator(spark):
    """The session's accumulator (created on first use, on the driver); classic sessions only."""
    sc = spark.sparkContext
    with _lock:
        acc = _accumulators.get(sc)
        if acc is None:
            acc = _accumulators[sc] = sc.accumulator(ReadHistory(), _param())
        return acc


class MetricsSink:
    """Where a read's tasks send their totals, as it travels to the executors: the classic
    accumulator, or a metrics directory (given, or the session's default resolved on the
    machine that runs the task).  Small and picklable."""

    def __init__(self, accumulator=None, directory: str | None = None, session: str | None = None,
                 app_id: str | None = None):
        self.accumulator = accumulator
        self.directory = directory
        self.session = session
        self.app_id = app_id

    @classmethod
    def of(cls, spark) -> "MetricsSink":
        """The sink of ``spark``'s reads: its accumulator (classic) or its directory (Connect)."""
        if is_connect(spark):
            sid = session_id(spark)
            return cls(directory=_connect_dirs.get(sid), session=sid, app_id=app_id(spark))
        return cls(accumulator=accumulator(spark), app_id=app_id(spark))

    def resolved_dir(self, options=None) -> str | None:
        """The directory a task writes to (the read's ``metrics.dir`` wins); None for none."""
        if options is not None and options.metrics_dir:
            return options.metrics_dir
        if self.directory or self.session:
            from ..metrics.directory import resolve
            return resolve(self.directory, self.session)
        return None


def with_metrics_dir(options, directory: str | None, session: str | None):
    """``options`` with ``metrics_dir`` set to the session's directory, unless the read set
    ``metrics.dir`` itself; resolved here (the data source runs on the cluster's driver)."""
    if options.metrics_dir or not (directory or session):
        return options
    from ..metrics.directory import resolve
    return options.replace(metrics_dir=resolve(directory, session))


def set_connect_dir(session: str, directory: str | None) -> None:
    """Where the tasks of Spark Connect session ``session`` write their metrics (None: each
    machine's temp directory), as :func:`~.registration.install` set it up."""
    _connect_dirs[session] = directory


def read_history(spark, metrics_dir: str | None = None) -> ReadHistory:
    """Every read's totals in this session so far (reads since :func:`~.registration.install`, and
    ``kafka_tiered_source.read()`` reads).  ``metrics_dir``: read that directory instead (a
    read's own ``metrics.dir``), on the cluster."""
    if metrics_dir is not None:
        return collect(spark, metrics_dir, None)
    if is_connect(spark):
        sid = session_id(spark)
        return collect(spark, _connect_dirs.get(sid), sid)
    return accumulator(spark).value


def last_read_stats(spark, metrics_dir: str | None = None):
    """The :class:`~kafka_tiered_source.metrics.reader.ReadTotals` of the latest read (the
    latest Spark action over a ``kafka-tiered`` DataFrame) whose tasks reported; None before
    any."""
    return read_history(spark, metrics_dir).last()


def collect(spark, directory: str | None, session: str | None) -> ReadHistory:
    """The reads recorded under a metrics directory, read by a one-task Spark job on the
    cluster (where the tasks wrote them)."""
    from ..metrics.directory import history, incomplete, parse_records
    rows = spark.range(0, 1, 1, 1).mapInArrow(_directory_reader(directory, session),
                                              "path STRING, content BINARY").collect()
    hist = history(parse_records((r.path, bytes(r.content)) for r in rows))
    for read_id, found, planned in incomplete(hist):
        log.warning("kafka-tiered: the metrics of %d of the %d tasks of read %s were found; the others "
                    "are still running or were written where the collecting task cannot see them "
                    "(several machines' local disks: give register(spark, metrics_dir=...) a shared "
                    "location)", found, planned, read_id)
    return hist


def _directory_reader(directory: str | None, session: str | None):
    def read(batches):
        import pyarrow as pa
        from kafka_tiered_source.metrics.directory import read_files, resolve
        for _ in batches:
            pass
        files = read_files(resolve(directory, session))
        yield pa.RecordBatch.from_arrays([pa.array([p for p, _ in files], pa.string()),
                                          pa.array([c for _, c in files], pa.binary())],
                                         names=["path", "content"])
    return read
