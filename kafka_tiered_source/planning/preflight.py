"""Before any task is launched: can the executors read remote storage at all?

A read whose storage options are wrong (an endpoint nobody answers, keys the store refuses, a
bucket that does not exist, no private key for an encrypted segment) would otherwise launch its
tasks, fail every direct read, and quietly move the whole backfill through the brokers — the
very traffic the project exists to avoid.  :func:`preflight` makes one cheap request against a
planned object, as the executors will (same fetcher, same options): the Aiven manifest of the
first planned segment (and, when it is encrypted, opens its data key), or one byte of the first
planned range in the other layouts — unless planning read a manifest already, which proves as
much (an encrypted one still has its data key opened).  The manifest the check reads is handed
to the tasks, so it is not read twice; the check's GETs, made by the driver, join the read's
totals through its first task, and :func:`check_gets` counts them for estimates.  A failure that will not heal raises
:class:`~kafka_tiered_source.errors.StoragePreflightError`, naming the backend, the object, the
reason and the two ways on.  A fault that may pass (throttling, 5xx, a slow answer) is logged and
left to the readers' per-range fallback.  A missing object may be retention at work: the next
planned segment is tried, up to :data:`MAX_PROBES`, and only when none exists is it an error
(a wrong prefix or layout).

``fetch.remote.fallback=always`` (nothing is read directly) and plans without tiered ranges skip
the check.
"""
from __future__ import annotations


from ..errors import (RemoteAccessDenied, RemoteConnectionError, RemoteObjectNotFound, RemoteStorageError,
                      RemoteTimeout, SegmentDecryptionError, StoragePreflightError)
from ..logs import get_logger

log = get_logger(__name__)

MAX_PROBES = 3
_BUCKET_GONE = ("NoSuchBucket", "ContainerNotFound", "bucket does not exist", "No such bucket")
_HOW = ("Fix the remote.storage.* options (endpoint, bucket or container, prefix, layout, credentials, "
        "encryption key pairs), or set fetch.remote.fallback=always to read everything through the "
        "brokers on purpose.")


def _reason(exc: RemoteStorageError) -> str:
    return str(exc).split(" (backend ", 1)[0]


def _fail(exc: RemoteStorageError, what: str) -> StoragePreflightError:
    backend = exc.backend or "?"
    where = exc.location or "?"
    reason = _reason(exc)
    return StoragePreflightError(
        f"remote storage check failed before any task was launched: backend {backend}, object "
        f"{where}: {what}: {reason}. {_HOW}", backend=backend, location=where, reason=reason)


def planning_failed(exc: RemoteStorageError) -> StoragePreflightError | None:
    """The error to raise for a storage error that planning itself hit (listing the store
    without a broker, or with ``remote.segment.locator=listing``) when it will not heal, as the
    check would name it; None for one that may pass (it is raised as it is)."""
    if isinstance(exc, RemoteAccessDenied):
        return _fail(exc, "access denied")
    if isinstance(exc, RemoteConnectionError) or (isinstance(exc, RemoteTimeout)
                                                  and _reason(exc).startswith("connect")):
        return _fail(exc, "unreachable")
    if isinstance(exc, RemoteObjectNotFound) and any(m.lower() in str(exc).lower() for m in _BUCKET_GONE):
        return _fail(exc, "no such bucket or container")
    return None


def probe(fetcher, segment, byte_start: int) -> None:
    """One cheap request for ``segment``: its Aiven manifest (and its data key), or one byte."""
    if fetcher.layout.reads_manifests:
        manifest = fetcher.layout.manifest(segment)
        if manifest.encryption is not None:
            fetcher.layout.cipher(manifest.encryption, None)
        return
    fetcher.fetch_log_segment(segment, byte_start, byte_start + 1)


def _checks(options) -> bool:
    """Whether a read is checked at all: not when nothing is read directly."""
    return bool(options.fetch_remote_enabled) and options.fetch_remote_fallback != "always"


def checks_storage(planned, options) -> bool:
    """Whether :func:`preflight` has anything to check for this plan: a tiered range read
    directly."""
    return _checks(options) and bool(planned.remote_ranges)


def check_gets(planned, options) -> int:
    """The GETs :func:`preflight` adds to a read's own, for estimates: one (a byte of the first
    planned range) in the layouts without manifests; none with Aiven's, where the manifest it
    reads is one a task would read and is handed to that task; none when planning read a
    manifest already, when nothing is read directly, or when there is nothing to check."""
    if not _checks(options):
        return 0
    ranges = planned.remote_ranges
    if not ranges or options.storage.layout == "aiven" or \
            any(r.segment.manifest_info is not None for r in ranges):
        return 0
    return 1


def preflight(planned, options, fetcher=None, observer=None) -> list:
    """Check storage access for a plan (see the module doc); raises
    :class:`StoragePreflightError` when direct reads cannot work.  Returns the plan's tasks,
    with the manifest the check read attached to its segment (so no executor GETs it again).

    No GET at all when planning itself read a manifest with these options (a segment carries
    ``manifest_info``): storage answered; an encrypted one still has its data key opened.
    ``observer``: a :class:`~kafka_tiered_source.metrics.reader.ReaderMetrics` the check's GETs
    are counted in (scoped to the partition of the segment tried), so they can join the read's
    totals."""
    tasks = planned.tasks
    if not _checks(options):
        return tasks
    read = next((r.segment for r in planned.remote_ranges if r.segment.manifest_info is not None), None)
    if read is not None:
        info = read.manifest_info
        if info.encryption is not None:
            with _fetcher(options, fetcher, observer) as f:
                try:
                    f.layout.cipher(info.encryption, None)
                except SegmentDecryptionError as exc:
                    raise _fail(exc, f"cannot open segments of key pair {exc.key_id!r}") from None
        return tasks
    seen, candidates = set(), []
    for r in planned.remote_ranges:
        key = (r.topic, r.partition, r.segment.segment_id)
        if key not in seen:
            seen.add(key)
            candidates.append(r)
        if len(candidates) >= MAX_PROBES:
            break
    if not candidates:
        return tasks
    missing = []
    with _fetcher(options, fetcher, observer) as fetcher:
        for r in candidates:
            if observer is not None:
                observer.scope(r.topic, r.partition)
            try:
                probe(fetcher, r.segment, r.byte_start)
                return _with_manifest(tasks, r.segment, fetcher)
            except SegmentDecryptionError as exc:
                raise _fail(exc, f"cannot open segments of key pair {exc.key_id!r}") from None
            except RemoteAccessDenied as exc:
                raise _fail(exc, "access denied") from None
            except RemoteConnectionError as exc:
                raise _fail(exc, "unreachable") from None
            except RemoteTimeout as exc:
                if _reason(exc).startswith("connect"):
                    raise _fail(exc, "unreachable") from None
                log.warning("remote storage answered slowly before the read (%s); going on", exc)
                return tasks
            except RemoteObjectNotFound as exc:
                if any(m.lower() in str(exc).lower() for m in _BUCKET_GONE):
                    raise _fail(exc, "no such bucket or container") from None
                missing.append(exc)
            except RemoteStorageError as exc:   # throttled, 5xx, an odd manifest: may pass
                log.warning("remote storage check before the read hit %s; going on, the readers fall "
                            "back per range (fetch.remote.fallback=%s)", exc, options.fetch_remote_fallback)
                return tasks
        last = missing[-1]
        raise _fail(last, f"not found, nor any of the {len(missing)} planned segments tried (a wrong "
                         f"remote.storage.prefix or layout?)") from None


class _fetcher:
    """The given fetcher, or one of the executors' kind made (and closed) here."""

    def __init__(self, options, fetcher, observer=None):
        self.given, self.options, self.observer, self.own = fetcher, options, observer, None

    def __enter__(self):
        if self.given is not None:
            return self.given
        from ..storage.registry import create_fetcher
        storage = self.options.storage
        self.own = create_fetcher(storage if storage.configured else storage.replace(fetcher="presigned"),
                                  observer=self.observer)
        return self.own

    def __exit__(self, *exc):
        if self.own is not None:
            self.own.close()


def _with_manifest(tasks: list, segment, fetcher) -> list:
    """``tasks`` with the manifest the check read attached to ``segment`` wherever it is read."""
    from ..dataclass import replace

    from ..storage import aiven
    from .tasks import ReadTask, RemoteRange
    manifest = fetcher.layout.cached_manifest(segment)
    info = aiven.ManifestInfo.of(manifest) if manifest is not None else None
    if info is None:
        return tasks
    moved = replace(segment, manifest_info=info)
    key = (segment.topic, segment.partition, segment.segment_id)
    return [ReadTask(t.index, tuple(replace(r, segment=moved)
                                    if isinstance(r, RemoteRange) and (r.topic, r.partition, r.segment.segment_id) == key
                                    else r for r in t.ranges), t.txn) for t in tasks]
