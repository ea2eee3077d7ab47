"""Encrypted segments in the backfill benchmark (``python -m benchmarks.backfill --encrypted``).

The largest size is tiered a second time, encrypted as Aiven's plugin does (a fresh AES-256 data
key per segment wrapped with the benchmark's RSA key pair, each 4 MiB chunk AES-GCM), and read
in the same run as the plain copy, the same way:

* ``direct-encrypted``: the direct read through the latency proxy, as ``direct``;
* ``direct-file-encrypted`` (``--store range``): from ``file://``, as ``direct-file`` — no store
  latency, so decryption is the largest share of the read it can be.

The decryption itself is timed apart, on one core: every chunk of every encrypted segment
opened with the reader's own :class:`~kafka_tiered_source.storage.aiven_crypto.ChunkCipher`.
Its share of a read is those seconds over the read's core-seconds (wall × Spark cores); the
wall-time difference to the plain read is shown next to it (noisier: it includes the extra
manifest work and whatever else the machine did).
"""
from __future__ import annotations

import os
import time

KEY_OPTION = "remote.storage.aiven.encryption.key.pairs"
TARGET_SHARE = 0.15


def encrypted_ways(opts: dict, topic: str, encrypt: tuple, root: str | None) -> list[tuple[str, dict]]:
    """The encrypted topic's ways, with the options of the plain ones plus the key pair."""
    key_id, key_file = encrypt
    enc = {**opts, "subscribe": topic, KEY_OPTION: f"{key_id}=file:{key_file}"}
    ways = [("direct-encrypted", enc)]
    if root is not None:
        ways.append(("direct-file-encrypted", {**enc, "remote.storage.fetcher": "fsspec",
                                               "remote.storage.fsspec.url": f"file://{root}"}))
    return ways


def decrypt_seconds(root: str, topic: str, encrypt: tuple) -> tuple[float, int]:
    """One core's seconds to open every chunk of ``topic``'s encrypted segments under ``root``
    (the range store's directory), and the bytes opened."""
    from kafka_tiered_source.options.encryption import KeyPairSource
    from kafka_tiered_source.storage import aiven
    from kafka_tiered_source.storage.aiven_crypto import KeyRing
    ring = KeyRing((KeyPairSource(encrypt[0], "file", encrypt[1]),))
    seconds, nbytes = 0.0, 0
    for dirpath, _, names in os.walk(root):
        if not os.path.basename(os.path.dirname(dirpath)).startswith(f"{topic}-"):
            continue
        for name in names:
            if not name.endswith(".rsm-manifest"):
                continue
            with open(os.path.join(dirpath, name), "rb") as fh:
                manifest = aiven.SegmentManifest.from_json(fh.read())
            with open(os.path.join(dirpath, name[:-len("rsm-manifest")] + "log"), "rb") as fh:
                obj = memoryview(fh.read())
            cipher = ring.cipher(manifest.encryption)      # the RSA unwrap counts too
            ci = manifest.chunk_index
            t0 = time.perf_counter()
            for i in range(ci.chunk_count):
                ch = ci.chunk(i)
                cipher.open_chunk(obj[ch.transformed_position:ch.transformed_position + ch.transformed_size],
                                  ch, manifest.compression)
            seconds += time.perf_counter() - t0
            nbytes += ci.transformed_file_size
    return seconds, nbytes


def evaluate_encryption(result: dict) -> list[dict]:
    """The target rows: decryption under 15 % of the encrypted read's time."""
    rows, out = result["rows"], []
    facts = next((f for k, f in result["data"].items() if str(k).endswith("-encrypted")), None)
    for cores in sorted({r["cores"] for r in rows if r["way"] == "direct-encrypted"}):
        def row(way, cores=cores):
            return next((r for r in rows if r["way"] == way and r["cores"] == cores
                         and r["size"] == max(x["size"] for x in rows)), None)
        de, d, fe, f = row("direct-encrypted"), row("direct"), row("direct-file-encrypted"), row("direct-file")
        parts, share = [], None
        if facts and "decrypt_s" in facts:
            share = facts["decrypt_s"] / (de["wall_s"] * cores)
            parts.append(f"AES-GCM {facts['decrypt_s']:.2f} core-s for {facts['decrypted_bytes'] / 1e6:.0f} MB = "
                         f"{share:.1%} of the read's {de['wall_s']:.1f} s x {cores} cores")
            if fe:
                parts.append(f"{facts['decrypt_s'] / (fe['wall_s'] * cores):.1%} of the file:// read's "
                             f"{fe['wall_s']:.1f} s")
        if d:
            parts.append(f"wall {de['wall_s']:.2f} s vs {d['wall_s']:.2f} s unencrypted "
                         f"({(de['wall_s'] - d['wall_s']) / de['wall_s']:+.1%})")
        if fe and f:
            parts.append(f"file:// {fe['wall_s']:.2f} s vs {f['wall_s']:.2f} s "
                         f"({(fe['wall_s'] - f['wall_s']) / fe['wall_s']:+.1%})")
        if share is None and d:
            share = (de["wall_s"] - d["wall_s"]) / de["wall_s"]
        out.append({"target": f"decryption < 15 % of the read's time (direct-encrypted, local[{cores}], "
                              f"{de['size']}x)",
                    "measured": "; ".join(parts), "met": share is not None and share < TARGET_SHARE})
    return out
