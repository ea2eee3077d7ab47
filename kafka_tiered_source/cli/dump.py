"""``kafka-tiered dump``: a segment's record batches, like Kafka's ``kafka-dump-log``."""
from __future__ import annotations

import argparse
import base64
import json
import struct
import sys

from . import command, examples

@command("dump", "Print the record batches of a segment file (.log), like kafka-dump-log.")
def _dump_setup(p: argparse.ArgumentParser):
    p.add_argument("file", help="segment file (.log) or any file of consecutive v2 batches")
    p.add_argument("--records", action="store_true", help="print every record too")
    p.add_argument("--json", action="store_true", help="one JSON object per batch")
    p.add_argument("--no-verify-crc", dest="verify_crc", action="store_false",
                   help="decode records even when the batch CRC does not match")
    p.epilog = examples(
        "kafka-tiered dump /var/kafka/orders-0/00000000000000000000.log",
        "kafka-tiered dump 00000000000000001081.log --records | head -40",
        "kafka-tiered dump segment.log --json | jq -c 'select(.isTransactional)'")
    return _dump


def _dump(args) -> int:
    import mmap   # here: every kafka-tiered command imports this module to build its parser
    data: mmap.mmap | bytes
    with open(args.file, "rb") as f:
        try:
            # mapped, not read: segments are up to a GiB; the map is unmapped when collected
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:   # an empty file cannot be mapped
            data = b""
    return dump(memoryview(data), args.file, records=args.records, as_json=args.json,
                verify_crc=args.verify_crc, out=sys.stdout)


def _crc_valid(buf, h) -> bool:
    from ..records.header import ATTRIBUTES_OFFSET
    import crc32c

    return crc32c.crc32c(buf[h.position + ATTRIBUTES_OFFSET:h.end]) == h.crc


def dump(buf, name: str, *, records: bool = False, as_json: bool = False,
         verify_crc: bool = True, out=sys.stdout) -> int:
    """Write a description of every batch in ``buf``; 0 when the file is sound, 1 otherwise."""
    from ..errors import CorruptRecordError
    from ..records import decode_batches
    from ..records.header import CODEC_NAMES, HEADER_SIZE, LOG_OVERHEAD, read_header
    from ..records.transactions import control_type

    status = 0
    if not as_json:
        print(f"Dumping {name}", file=out)
    pos, n = 0, len(buf)
    while n - pos >= LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            _problem(out, as_json, pos, f"invalid batch length {length}")
            return 1
        if n - pos < length + LOG_OVERHEAD:
            _problem(out, as_json, pos, f"truncated batch: {n - pos} of {length + LOG_OVERHEAD} "
                                        f"bytes present")
            return 1
        h = read_header(buf, pos)
        crc_ok = h.magic == 2 and _crc_valid(buf, h)
        status |= not crc_ok
        info = {
            "position": h.position, "baseOffset": h.base_offset, "lastOffset": h.last_offset,
            "count": h.record_count, "size": h.size, "magic": h.magic,
            "compresscodec": CODEC_NAMES.get(h.codec, f"unknown({h.codec})"),
            "producerId": h.producer_id, "producerEpoch": h.producer_epoch,
            "baseSequence": h.base_sequence, "partitionLeaderEpoch": h.partition_leader_epoch,
            "isTransactional": h.is_transactional, "isControl": h.is_control,
            "timestampType": "LogAppendTime" if h.log_append_time else "CreateTime",
            "baseTimestamp": h.base_timestamp, "maxTimestamp": h.max_timestamp,
            "crc": h.crc, "crcValid": crc_ok,
        }
        rows, error = [], None
        if records and h.magic == 2 and (crc_ok or not verify_crc):
            try:
                if h.is_control:
                    from ..records.decoder import batch_records
                    body, origin, dec = batch_records(buf, h, pos, h.size, 0, 1 << 20)
                    ctype = control_type(body, h, origin, dec)
                    info["controlType"] = None if ctype is None else {0: "ABORT", 1: "COMMIT"}.get(ctype, ctype)
                else:
                    table = decode_batches(buf[pos:h.end], position=pos,
                                           verify_crc=False).table()
                    # integer milliseconds: Kafka timestamps may lie outside datetime's range
                    ms = [us // 1000 for us in
                          table.column("timestamp").cast("int64").to_pylist()]
                    rows = table.drop_columns(["timestamp"]).to_pylist()
                    for r, t in zip(rows, ms, strict=True):
                        r["timestamp"] = t
            except CorruptRecordError as exc:
                error = str(exc)
                status = 1
        elif records and not crc_ok:
            error = "CRC mismatch: records not decoded (use --no-verify-crc)"
        _print_batch(out, as_json, info, rows if records else None, error)
        pos = h.end
    if pos < n:
        _problem(out, as_json, pos, f"{n - pos} trailing bytes (a cut-off batch)")
        status = 1
    return status


def _problem(out, as_json, pos, message):
    if as_json:
        print(json.dumps({"position": pos, "error": message}), file=out)
    else:
        print(f"position: {pos} error: {message}", file=out)


def _b64(v):
    return None if v is None else base64.b64encode(v).decode("ascii")


def _print_batch(out, as_json, info, rows, error):
    if as_json:
        if rows is not None:
            info["records"] = [{
                "offset": r["offset"],
                "timestamp": r["timestamp"],
                "timestampType": r["timestampType"], "key": _b64(r["key"]),
                "value": _b64(r["value"]),
                "headers": [[h["key"], _b64(h["value"])] for h in r["headers"] or []],
            } for r in rows]
        if error:
            info["error"] = error
        print(json.dumps(info), file=out)
        return
    flags = " ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
                     for k, v in info.items())
    print(flags, file=out)
    for r in rows or ():
        ts_kind = "LogAppendTime" if r["timestampType"] == 1 else "CreateTime"
        ts = r["timestamp"]
        hdrs = ",".join(h["key"] for h in r["headers"] or [])
        print(f"| offset: {r['offset']} {ts_kind}: {ts} "
              f"keySize: {-1 if r['key'] is None else len(r['key'])} "
              f"valueSize: {-1 if r['value'] is None else len(r['value'])} "
              f"headerKeys: [{hdrs}]", file=out)
    if error:
        print(f"| error: {error}", file=out)
