"""``kafka-tiered broker``: run the embedded broker until SIGINT/SIGTERM.

Secrets stay off the command line (other users can read argv): S3 credentials come from the
usual ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` variables, SASL
users from a JSON file ``{"user": "password"}``, and the listener's security settings from
``--config server.properties`` under Kafka's broker names: ``ssl.keystore.*`` and
``ssl.truststore.*`` (JKS, PKCS12 or PEM), ``ssl.client.auth`` (mutual TLS),
``sasl.enabled.mechanisms``, the OAUTHBEARER validator's ``sasl.oauthbearer.jwks.endpoint.url``,
``...expected.issuer``, ``...expected.audience``, and ``connections.max.reauth.ms``
(``listener.name.<listener>.[<mechanism>.]`` prefixes are accepted and dropped).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading

from . import command, examples

# kafka-topics --config names --topic-config takes, and create_topic's argument for each
TOPIC_CONFIGS = {"retention.ms": "retention_ms", "retention.bytes": "retention_bytes",
                 "local.retention.ms": "local_retention_ms", "local.retention.bytes": "local_retention_bytes",
                 "segment.ms": "segment_ms", "segment.jitter.ms": "segment_jitter_ms"}


@command("broker", "Run an embedded Kafka-protocol broker with tiered storage (tests, demos).")
def _broker_setup(p: argparse.ArgumentParser):
    from ..testing.logconfig import DEFAULT_SEGMENT_MS, DEFAULT_TASK_INTERVAL_MS
    p.add_argument("--data-dir", required=True, help="directory holding logs, metadata and coordinator state")
    p.add_argument("--host", default="127.0.0.1", help="address to bind and advertise (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9092, help="Kafka listener port (0 = any free port)")
    p.add_argument("--remote-storage", help="file:///dir, memory://name or s3://bucket/prefix")
    p.add_argument("--layout", default="aiven", choices=["aiven", "kafka-local-tiered"])
    p.add_argument("--segment-bytes", type=int, default=1 << 30, help="segment.bytes: roll at this size")
    p.add_argument("--segment-ms", type=int, default=DEFAULT_SEGMENT_MS,
                   help="segment.ms: roll once the records span this long (default 7 days, as Kafka)")
    p.add_argument("--segment-jitter-ms", type=int, default=0, help="segment.jitter.ms: roll up to this much sooner")
    p.add_argument("--local-retention-bytes", type=int, default=None,
                   help="log.local.retention.bytes for tiered segments (-2: retention.bytes, -1: no limit)")
    p.add_argument("--local-retention-ms", type=int, default=None,
                   help="log.local.retention.ms for tiered segments (-2: retention.ms, -1: no limit); "
                        "without either, a segment's local copy goes once it is tiered")
    p.add_argument("--remote-log-manager-task-interval-ms", type=int, default=DEFAULT_TASK_INTERVAL_MS,
                   help="remote.log.manager.task.interval.ms: how often closed segments are copied to "
                        "remote storage, then local and remote retention applied (default 30000, as Kafka)")
    p.add_argument("--chunk-compression", action="store_true", help="Aiven layout: zstd-compress chunks")
    p.add_argument("--chunk-size", type=int, default=4 * 1024 * 1024)
    p.add_argument("--key-prefix", default="")
    p.add_argument("--presign", action="store_true", help="hand out presigned URLs in KIP-1248 answers")
    p.add_argument("--presign-expiry-s", type=int, default=3600)
    p.add_argument("--s3-endpoint-url")
    p.add_argument("--s3-region")
    p.add_argument("--sasl-mechanism", action="append",
                   choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
                   help="require SASL with this mechanism (repeatable; OAUTHBEARER needs "
                        "sasl.oauthbearer.jwks.endpoint.url in --config)")
    p.add_argument("--sasl-users-file", help='JSON file {"user": "password", ...}')
    p.add_argument("--ssl-certfile", help="the listener's certificate chain (PEM); or ssl.keystore.* in --config")
    p.add_argument("--ssl-keyfile")
    p.add_argument("--config", metavar="FILE",
                   help="Kafka broker properties for the listener's security (ssl.keystore.*, "
                        "ssl.truststore.*, ssl.client.auth, sasl.enabled.mechanisms, sasl.oauthbearer.*, "
                        "connections.max.reauth.ms)")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus text at /metrics")
    p.add_argument("--auto-create-topics", action="store_true")
    p.add_argument("--no-kip1248", dest="kip1248", action="store_false",
                   help="answer Fetch as Apache Kafka 4.1 does: no KIP-1248 locations, tiered data "
                        "through the broker (readers find segments through __remote_log_metadata)")
    p.add_argument("--remote-log-metadata-partitions", type=int, default=50,
                   help="partitions of __remote_log_metadata (default 50, as Kafka)")
    p.add_argument("--topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
                   help="create this topic at start-up unless it exists (repeatable)")
    p.add_argument("--topic-config", action="append", default=[], metavar="KEY=VALUE",
                   help=f"a topic config of the topics --topic creates, as kafka-topics --config "
                        f"(repeatable): {', '.join(TOPIC_CONFIGS)}")
    p.add_argument("--encryption-key-pair", action="append", default=[], metavar="ID=PRIVATE_KEY_PEM",
                   help="Aiven layout: a key pair (its PKCS#8 private key file; the plugin's "
                        "encryption.key.pairs) to read segments of (repeatable)")
    p.add_argument("--encryption-key-pair-id", metavar="ID",
                   help="encrypt what is tiered with this key pair, as the plugin's encryption.key.pair.id")
    p.add_argument("--schema-registry-port", type=int, default=None, metavar="PORT",
                   help="also serve a Schema Registry REST API (Confluent's, the subset its serializers use) on "
                        "this port (0 = any), its schemas kept in --data-dir")
    p.add_argument("--log-level", default="INFO")
    p.epilog = examples(
        "kafka-tiered broker --data-dir /tmp/kt --remote-storage file:///tmp/kt-remote --topic orders:4",
        "kafka-tiered broker --data-dir /tmp/kt --remote-storage file:///tmp/r --topic t --segment-bytes 65536 \\",
        "    --topic-config local.retention.ms=600000 --remote-log-manager-task-interval-ms 5000",
        "kafka-tiered broker --data-dir /tmp/kt --port 0 --no-kip1248 --metrics-port 0   # as Kafka 4.1",
        "kafka-tiered broker --data-dir /tmp/kt --topic orders --schema-registry-port 8081   # typed values",
        "AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... kafka-tiered broker --data-dir /tmp/kt \\",
        "    --remote-storage s3://tiered/kt --s3-endpoint-url http://127.0.0.1:5000 --chunk-compression",
        "kafka-tiered broker --data-dir /tmp/kt --remote-storage file:///tmp/r \\",
        "    --encryption-key-pair k1=/etc/kafka/k1.pem --encryption-key-pair-id k1   # encrypted segments",
        "kafka-tiered broker --data-dir /tmp/kt --config mtls.properties   # ssl.keystore.location=broker.p12, "
        "ssl.client.auth=required, ...")
    return _broker_run


def _broker_run(args) -> int:
    from ..testing.cluster import EmbeddedCluster

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ssl, sasl = _security(args)
    cluster = EmbeddedCluster(
        args.data_dir, remote_storage=args.remote_storage, layout=args.layout,
        segment_bytes=args.segment_bytes, local_retention_bytes=args.local_retention_bytes,
        local_retention_ms=args.local_retention_ms, chunk_compression=args.chunk_compression,
        chunk_size=args.chunk_size, key_prefix=args.key_prefix, presign=args.presign,
        presign_expiry_s=args.presign_expiry_s, s3_endpoint_url=args.s3_endpoint_url,
        s3_region=args.s3_region, s3_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
        s3_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
        s3_session_token=os.environ.get("AWS_SESSION_TOKEN"), sasl=sasl, ssl=ssl, host=args.host,
        port=args.port, metrics_port=args.metrics_port, auto_create_topics=args.auto_create_topics,
        kip1248=args.kip1248, remote_log_metadata_partitions=args.remote_log_metadata_partitions,
        encryption_key_pair_id=args.encryption_key_pair_id, encryption_key_pairs=_key_pairs(args),
        segment_ms=args.segment_ms, segment_jitter_ms=args.segment_jitter_ms,
        remote_log_manager_task_interval_ms=args.remote_log_manager_task_interval_ms,
        schema_registry_port=args.schema_registry_port)
    configs = _topic_configs(args)
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if name not in cluster.topics:
            cluster.create_topic(name, int(parts or 1), **configs)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    import signal
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    cluster.start()
    try:
        print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
        if cluster.metrics_url:
            print(f"metrics: {cluster.metrics_url}", flush=True)
        if cluster.schema_registry is not None:
            print(f"schema registry: {cluster.schema_registry_url}", flush=True)
        while not done.wait(1.0):
            pass
    finally:
        cluster.stop()
        for s, h in old.items():
            signal.signal(s, h)
    print("broker stopped", file=sys.stderr, flush=True)
    return 0


def _topic_configs(args) -> dict:
    from ..errors import ConfigError
    out = {}
    for spec in args.topic_config:
        key, eq, value = spec.partition("=")
        if key.strip() not in TOPIC_CONFIGS:
            raise ConfigError(f"--topic-config {spec!r}: the embedded broker's topics take "
                              f"{', '.join(TOPIC_CONFIGS)}", option="--topic-config")
        try:
            out[TOPIC_CONFIGS[key.strip()]] = int(value)
        except ValueError:
            raise ConfigError(f"--topic-config {spec!r}: {key.strip()} takes a whole number",
                              option="--topic-config") from None
    return out


def _key_pairs(args) -> dict:
    from ..errors import ConfigError
    pairs = {}
    for spec in args.encryption_key_pair:
        key_id, eq, path = spec.partition("=")
        if not eq or not key_id or not path:
            raise ConfigError(f"--encryption-key-pair takes ID=PRIVATE_KEY_PEM, got {spec!r}",
                              option="--encryption-key-pair")
        pairs[key_id] = path
    return pairs


OAUTH_VALIDATOR_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")


def _broker_properties(path: str) -> dict:
    """``--config``: Kafka broker properties, listener prefixes dropped."""
    import re

    from .properties import read_properties
    out = {}
    for key, value in read_properties(path, "--config").items():
        key = re.sub(r"^listener\.name\.[^.]+\.(?:(?:plain|scram-sha-256|scram-sha-512|oauthbearer)\.)?", "",
                     key.strip())
        out[key] = value
    return out


def _security(args) -> tuple:
    """The listener's TLS and SASL settings from the flags and ``--config``."""
    from ..errors import ConfigError
    from ..testing.oauth_validator import OAuthValidatorConfig
    from ..testing.server import SSL_KEYS
    props = _broker_properties(args.config) if args.config else {}
    ssl: dict = {k: v for k, v in props.items() if k in SSL_KEYS}
    if args.ssl_certfile:
        if "ssl.keystore.location" in ssl or "ssl.keystore.key" in ssl:
            raise ConfigError("give --ssl-certfile or ssl.keystore.* in --config, not both", option="--ssl-certfile")
        ssl.update(certfile=args.ssl_certfile, keyfile=args.ssl_keyfile)
    mechanisms = list(args.sasl_mechanism or [])
    mechanisms += [x.strip().upper() for x in props.get("sasl.enabled.mechanisms", "").split(",")
                   if x.strip() and x.strip().upper() not in mechanisms]
    sasl: dict = {k: v for k, v in props.items() if k in OAuthValidatorConfig.KEYS}
    if "connections.max.reauth.ms" in props:
        sasl["connections.max.reauth.ms"] = props["connections.max.reauth.ms"]
    handler = props.get("sasl.server.callback.handler.class")
    if handler is not None and handler.strip() not in OAUTH_VALIDATOR_HANDLERS:
        raise ConfigError(f"sasl.server.callback.handler.class {handler.strip()!r}: the embedded broker validates "
                          f"OAUTHBEARER tokens as Kafka's {OAUTH_VALIDATOR_HANDLERS[0]} does, and runs no other "
                          f"handler", option="sasl.server.callback.handler.class")
    known = set(SSL_KEYS) | set(OAuthValidatorConfig.KEYS) | {"sasl.enabled.mechanisms", "connections.max.reauth.ms",
                                                               "sasl.server.callback.handler.class"}
    unknown = sorted(set(props) - known)
    if unknown:
        raise ConfigError(f"--config {args.config}: {unknown[0]!r} is not a listener security setting the embedded "
                          f"broker takes ({', '.join(sorted(known))})", option=unknown[0])
    if not mechanisms:
        if sasl:
            raise ConfigError("--config has SASL settings but no mechanism is enabled (sasl.enabled.mechanisms)",
                              option="sasl.enabled.mechanisms")
        return ssl or None, None
    sasl["mechanisms"] = mechanisms
    if set(mechanisms) - {"OAUTHBEARER"}:
        if not args.sasl_users_file:
            raise ConfigError("PLAIN and SCRAM need --sasl-users-file", option="--sasl-users-file")
        with open(args.sasl_users_file) as f:
            sasl["users"] = json.load(f)
    return ssl or None, sasl
