"""What every byte-range store must do, as a check a store's author runs against a real server
(the project runs it for each built-in backend in tests/test_storage_conformance.py)::

    from kafka_tiered_source.testing.store_conformance import check_store

    def test_my_store_conforms(my_server):
        check_store(MyStore, {"remote.storage.fetcher.class": "my_pkg:MyStore", ...},
                    put=my_server.put, prefix="conformance/")

``put(key, data)`` writes an object the store can then read; ``prefix`` is a fresh key prefix
for the check's objects.  Each check raises ``AssertionError`` naming the contract it saw
broken.  Covered: exact ranged reads (open-ended, past the end, empty), missing objects,
``stat``, ``list`` (when the store says ``can_list``), pickling (a store travels as its
config), secret-free locations, and reading a segment through the fetcher in each layout,
Aiven's chunked, compressed one included (the layouts above the store are the project's, the
bytes below them the store's).
"""
from __future__ import annotations

import pickle
import random
from typing import Callable, Mapping

from ..errors import ListingNotSupported, RemoteObjectNotFound, RemoteStorageError
from ..ids import random_uuid, uuid_to_str
from ..options.storage import FetcherConfig
from ..storage import aiven
from ..storage.fetcher import ObjectStoreFetcher
from ..storage.layouts import local_tiered_key
from ..storage.segment import RemoteSegment
from ..storage.store import ByteRangeStore
from . import aiven_writer

KiB = 1024


def _payload(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _compressible(n: int) -> bytes:
    rnd = random.Random(3)
    out = bytearray()
    while len(out) < n:
        out += f"order-{rnd.randrange(10**6):06d},amount={rnd.randrange(1000)};".encode()
    return bytes(out[:n])


def check_store(store_class: type[ByteRangeStore], options: Mapping[str, str], *,
                put: Callable[[str, bytes], None], prefix: str, secrets: tuple[str, ...] = (),
                stat: bool = True) -> list[str]:
    """Run every check; returns their names.  ``options``: the store's options (what
    ``create_fetcher`` is given, without a layout); ``secrets``: option values that must never
    show in a location, repr or error; ``stat``: whether the store implements :meth:`stat`."""
    store = store_class(FetcherConfig.from_options(options))
    done = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        if not ok:
            raise AssertionError(f"{store_class.__name__}: {name}" + (f": {detail}" if detail else ""))
        if name not in done:
            done.append(name)

    data = _payload(70 * KiB + 13, 1)
    key = f"{prefix}object.bin"
    put(key, data)
    n = len(data)
    for s, e in [(0, n), (0, 1), (5, 5 + 4096), (n - 1, n), (1000, None), (n - 10, n + 100)]:
        got = bytes(store.get_range(key, s, e))
        check("get_range returns exactly [start, end) (end None: to the end; past the end: what exists)",
              got == data[s:e if e is not None else None], f"[{s}, {e}) gave {len(got)} bytes")
    for s, e in [(n, n + 10), (n + 5, None)]:
        got = bytes(store.get_range(key, s, e))
        check("get_range past the end returns b''", got == b"", f"[{s}, {e}) gave {len(got)} bytes")

    missing = f"{prefix}no-such-object.bin"
    try:
        store.get_range(missing, 0, 10)
    except RemoteObjectNotFound as exc:
        check("a missing object is RemoteObjectNotFound naming it", "no-such-object.bin" in str(exc), str(exc))
    else:
        check("a missing object is RemoteObjectNotFound naming it", False, "no error")

    if stat:
        check("stat gives the object's size", store.stat(key) == n)
        try:
            store.stat(missing)
        except RemoteObjectNotFound:
            check("stat of a missing object is RemoteObjectNotFound", True)
        else:
            check("stat of a missing object is RemoteObjectNotFound", False, "no error")

    if store.can_list:
        put(f"{prefix}sub/a.log", b"a" * 3)
        put(f"{prefix}sub/b.log", b"b" * 5)
        put(f"{prefix}subway.log", b"c" * 7)
        listed = dict(store.list(f"{prefix}sub/"))
        check("list yields (key, size) of exactly the objects under the prefix",
              listed == {f"{prefix}sub/a.log": 3, f"{prefix}sub/b.log": 5}, repr(listed))
        listed = dict(store.list(f"{prefix}sub"))
        check("a listing prefix need not end at a directory", f"{prefix}subway.log" in listed, repr(listed))
    else:
        try:
            list(store.list(prefix))
        except ListingNotSupported:
            check("a store that cannot list says so (ListingNotSupported)", True)
        else:
            check("a store that cannot list says so (ListingNotSupported)", False, "it listed")

    clone = pickle.loads(pickle.dumps(store))
    check("a store pickles as its config and works after unpickling",
          type(clone) is store_class and bytes(clone.get_range(key, 100, 200)) == data[100:200])

    shown = [store.location(key), repr(store)]
    try:
        store.get_range(missing, 0, 1)
    except RemoteStorageError as exc:
        shown += [str(exc), repr(exc)]
    for secret in secrets:
        check("no secret in a location, repr or error", not any(secret in t for t in shown))

    _check_layouts(store_class, options, put, prefix, check)
    store.close()
    clone.close()
    return done


def _check_layouts(store_class, options, put, prefix, check) -> None:
    """A segment written in each layout reads back byte for byte through the fetcher."""
    topic_id, seg_id = uuid_to_str(random_uuid()), uuid_to_str(random_uuid())
    seg = RemoteSegment("orders", topic_id, 3, seg_id, 1000, 1999)
    data = _compressible(300 * KiB + 11)
    cases = {}
    root = f"{prefix}aiven/"
    log_obj, ci = aiven_writer.transform_chunks(data, 32 * KiB, True)
    blob, si = aiven_writer.build_indexes(b"O" * 16, b"T" * 24, b"P" * 5, b"0\n0\n", None)
    for suffix, body in (("log", log_obj), ("indexes", blob),
                         ("rsm-manifest", aiven.SegmentManifest(ci, si, True).to_json())):
        put(aiven.segment_object_key(seg, suffix, root), body)
    cases["aiven"] = {"remote.storage.layout": "aiven", "remote.storage.prefix": root}
    root = f"{prefix}local"
    put(local_tiered_key(root, seg.topic, topic_id, seg.partition, seg.base_offset, seg_id, "log"), data)
    put(local_tiered_key(root, seg.topic, topic_id, seg.partition, seg.base_offset, seg_id, "index"), b"O" * 16)
    cases["kafka-local-tiered"] = {"remote.storage.layout": "kafka-local-tiered", "remote.storage.prefix": root}
    for layout, extra in cases.items():
        config = FetcherConfig.from_options({**options, **extra, "fetch.remote.part.size.bytes": str(64 * KiB)})
        with ObjectStoreFetcher(config, store=store_class) as fetcher:
            got = b"".join(bytes(p) for p in fetcher.iter_log_segment(seg, 100, None))
            check(f"the {layout} layout reads a segment back byte for byte", got == data[100:])
            check(f"the {layout} layout reads the segment's indexes", fetcher.fetch_index(seg, "offset") == b"O" * 16)
