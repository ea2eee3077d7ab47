"""The fetchers' configuration: ``remote.storage.*`` (where and how to reach objects) and
``fetch.remote.*`` (how hard to try), parsed once into a frozen :class:`FetcherConfig`.

Options are matched case-insensitively (Spark hands them over that way).  Unknown
``remote.storage.*`` keys are refused with the list of valid ones; two families pass through
untouched for plugins: ``remote.storage.custom.*`` (for a ``remote.storage.fetcher.class``) and
``remote.storage.<name>.*`` for a third-party fetcher registered under ``<name>``.
Options of other prefixes are ignored (they belong to other parts of the reader).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import ConfigError
from ..option_parsing import parse_bool
from ..redact import Secret, is_secret_key

MiB = 1024 * 1024

# Declared once: option -> help.  Secret-bearing ones are wrapped in Secret when parsed.
REMOTE_STORAGE_OPTIONS: dict[str, str] = {
    "remote.storage.fetcher": "fetcher name: s3, gcs, azure, fsspec, presigned, or one registered "
                              "under the entry-point group kafka_tiered_source.fetchers",
    "remote.storage.fetcher.class": "dotted path (pkg.mod:Class or pkg.mod.Class) of your own "
                                    "RemoteStorageFetcher subclass; wins over remote.storage.fetcher",
    "remote.storage.layout": "aiven (default), kafka-local-tiered or template",
    "remote.storage.layout.template": "format string for the template layout, fields {prefix} {topic} "
                                      "{topic_id} {partition} {base_offset} {end_offset} {segment_id} {suffix}",
    "remote.storage.layout.padded.offsets": "kafka-local-tiered: zero-pad offsets to 20 digits (default true)",
    "remote.storage.prefix": "key prefix (Aiven key.prefix; root directory for kafka-local-tiered)",
    "remote.storage.s3.bucket": "S3 bucket",
    "remote.storage.s3.endpoint": "S3 endpoint URL (MinIO, moto, ...); default AWS",
    "remote.storage.s3.region": "S3 region (default: the standard chain, else us-east-1)",
    "remote.storage.s3.access.key.id": "S3 access key id (default: the standard credential chain)",
    "remote.storage.s3.secret.access.key": "S3 secret access key",
    "remote.storage.s3.session.token": "S3 session token",
    "remote.storage.s3.path.style.access": "true to use path-style addressing (default: true with an endpoint)",
    "remote.storage.gcs.bucket": "GCS bucket",
    "remote.storage.gcs.endpoint": "GCS endpoint URL (emulator); default Google",
    "remote.storage.gcs.project": "GCS project",
    "remote.storage.gcs.credentials": "gcsfs token: path to a service-account JSON, 'anon', "
                                      "'google_default' (default), 'cloud', 'browser'",
    "remote.storage.azure.container": "Azure blob container",
    "remote.storage.azure.account.name": "Azure storage account name",
    "remote.storage.azure.account.key": "Azure storage account key",
    "remote.storage.azure.connection.string": "Azure connection string (wins over account name/key)",
    "remote.storage.azure.sas.token": "Azure SAS token",
    "remote.storage.azure.endpoint": "Azure blob endpoint URL (Azurite: http://127.0.0.1:port/account)",
    "remote.storage.fsspec.url": "root URL for the fsspec fetcher (file:///data, memory://root, ...)",
    "remote.storage.uri": "shortcut for the fetcher, bucket/container and prefix: s3://bucket/prefix, "
                          "gs://bucket/prefix, az://container/prefix, "
                          "abfs://container@account.dfs.core.windows.net/prefix, file:///path, memory://path",
}

FETCH_OPTIONS: dict[str, tuple[int, str]] = {
    "fetch.remote.connect.timeout.ms": (1000, "connect timeout of one GET"),
    "fetch.remote.read.timeout.ms": (5000, "socket read timeout of one GET"),
    "fetch.remote.part.size.bytes": (8 * MiB, "large ranges are split into GETs of this size"),
    "fetch.remote.concurrency": (4, "parts fetched at once by one fetcher"),
    "fetch.remote.coalesce.gap.bytes": (1 * MiB, "ranges closer than this are read in one GET"),
    "fetch.remote.retry.max.attempts": (5, "attempts per GET on throttling / 5xx / connection errors"),
    "fetch.remote.retry.backoff.ms": (100, "first back-off; doubles per attempt, with jitter"),
    "fetch.remote.retry.backoff.max.ms": (5000, "back-off cap"),
    "fetch.remote.manifest.cache.size": (1024, "Aiven manifests kept per fetcher"),
}

LAYOUTS = ("aiven", "kafka-local-tiered", "template")
_PASSTHROUGH = "remote.storage.custom."


@dataclass(frozen=True)
class FetcherConfig:
    fetcher: str | None = None
    fetcher_class: str | None = None
    layout: str = "aiven"
    template: str | None = None
    padded_offsets: bool = True
    prefix: str = ""
    # remote.storage.<backend>.* and remote.storage.custom.*, full keys; secrets wrapped in Secret.
    backend_options: tuple[tuple[str, object], ...] = ()
    connect_timeout_ms: int = 1000
    read_timeout_ms: int = 5000
    part_size: int = 8 * MiB
    concurrency: int = 4
    coalesce_gap: int = 1 * MiB
    retry_max_attempts: int = 5
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 5000
    manifest_cache_size: int = 1024

    @property
    def configured(self) -> bool:
        """A fetcher is named (by name or class): tiered segments can be read directly."""
        return bool(self.fetcher or self.fetcher_class)

    def option(self, key: str, default=None):
        """A ``remote.storage.*`` backend option by full key; Secrets are unwrapped."""
        for k, v in self.backend_options:
            if k == key:
                return v.get() if isinstance(v, Secret) else v
        return default

    def require(self, key: str) -> str:
        v = self.option(key)
        if v in (None, ""):
            raise ConfigError(f"option {key} is required for fetcher {self.fetcher_class or self.fetcher!r}",
                              option=key)
        return v

    def replace(self, **changes) -> "FetcherConfig":
        from dataclasses import replace
        return replace(self, **changes)

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, extra_names: tuple[str, ...] = ()) -> "FetcherConfig":
        """Parse the ``remote.storage.*`` / ``fetch.remote.*`` options of a (case-insensitive)
        option map.  ``extra_names`` are third-party fetcher names whose
        ``remote.storage.<name>.*`` options pass through."""
        opts = {str(k).lower(): v for k, v in options.items()}
        kw: dict = {}
        backend: list[tuple[str, object]] = []
        passthrough = tuple(f"remote.storage.{n.lower()}." for n in extra_names)
        for key in sorted(opts):
            value = opts[key]
            if key.startswith("remote.storage."):
                if key not in REMOTE_STORAGE_OPTIONS and not key.startswith(_PASSTHROUGH) \
                        and not key.startswith(passthrough):
                    raise ConfigError(
                        f"unknown option {key}; valid remote.storage options: "
                        f"{', '.join(sorted(REMOTE_STORAGE_OPTIONS))}, remote.storage.custom.*",
                        option=key)
                if key == "remote.storage.fetcher":
                    kw["fetcher"] = str(value).strip().lower()
                elif key == "remote.storage.fetcher.class":
                    kw["fetcher_class"] = str(value).strip()
                elif key == "remote.storage.layout":
                    layout = str(value).strip().lower()
                    if layout not in LAYOUTS:
                        raise ConfigError(f"option remote.storage.layout must be one of "
                                          f"{', '.join(LAYOUTS)}, got {value!r}", option=key)
                    kw["layout"] = layout
                elif key == "remote.storage.layout.template":
                    kw["template"] = str(value)
                elif key == "remote.storage.layout.padded.offsets":
                    kw["padded_offsets"] = parse_bool(key, value, label=f"option {key}")
                elif key == "remote.storage.prefix":
                    kw["prefix"] = str(value)
                else:
                    if isinstance(value, Secret):
                        backend.append((key, value))
                    else:
                        backend.append((key, Secret(str(value)) if is_secret_key(key) else str(value)))
            elif key.startswith("fetch.remote."):
                if key not in FETCH_OPTIONS:
                    # Other fetch.remote.* keys may belong to the reader; only ours are typed here.
                    continue
                try:
                    n = int(str(value).strip())
                except ValueError:
                    raise ConfigError(f"option {key} must be an integer, got {value!r}", option=key) from None
                minimum = 0 if key in ("fetch.remote.coalesce.gap.bytes", "fetch.remote.manifest.cache.size") else 1
                if n < minimum:
                    raise ConfigError(f"option {key} must be >= {minimum}, got {n}", option=key)
                attr = {"fetch.remote.connect.timeout.ms": "connect_timeout_ms",
                        "fetch.remote.read.timeout.ms": "read_timeout_ms",
                        "fetch.remote.part.size.bytes": "part_size",
                        "fetch.remote.concurrency": "concurrency",
                        "fetch.remote.coalesce.gap.bytes": "coalesce_gap",
                        "fetch.remote.retry.max.attempts": "retry_max_attempts",
                        "fetch.remote.retry.backoff.ms": "retry_backoff_ms",
                        "fetch.remote.retry.backoff.max.ms": "retry_backoff_max_ms",
                        "fetch.remote.manifest.cache.size": "manifest_cache_size"}[key]
                kw[attr] = n
        if "remote.storage.uri" in opts:
            _apply_uri(str(opts["remote.storage.uri"]), kw, backend)
        if kw.get("layout") == "template" and not kw.get("template"):
            raise ConfigError("remote.storage.layout=template needs remote.storage.layout.template",
                              option="remote.storage.layout.template")
        kw["backend_options"] = tuple(backend)
        return cls(**kw)


# remote.storage.uri scheme -> (fetcher, option naming the bucket / container)
_URI_SCHEMES = {"s3": ("s3", "remote.storage.s3.bucket"), "s3a": ("s3", "remote.storage.s3.bucket"),
                "gs": ("gcs", "remote.storage.gcs.bucket"), "gcs": ("gcs", "remote.storage.gcs.bucket"),
                "az": ("azure", "remote.storage.azure.container"),
                "abfs": ("azure", "remote.storage.azure.container"),
                "abfss": ("azure", "remote.storage.azure.container"),
                "file": ("fsspec", None), "memory": ("fsspec", None)}


def _apply_uri(uri: str, kw: dict, backend: list) -> None:
    """Expand ``remote.storage.uri`` into the options it stands for.

    The URI's path is the key prefix, taken as a directory (``s3://b/tiered`` and
    ``s3://b/tiered/`` both mean prefix ``tiered/``); a prefix that is not a directory (Aiven's
    ``key.prefix=kafka-``) is given with ``remote.storage.prefix`` next to a URI without a path.
    For ``file://`` and ``memory://`` the whole URI is the fsspec root and the prefix stays empty.
    An explicit option that the URI also sets must agree with it: a difference is an error
    naming both (silently preferring one would read the wrong bucket).
    """
    from urllib.parse import urlsplit
    name = "remote.storage.uri"
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    if scheme not in _URI_SCHEMES:
        raise ConfigError(f"option {name} has scheme {parts.scheme!r}; valid: "
                          f"{', '.join(sorted(_URI_SCHEMES))}", option=name)
    if parts.query or parts.fragment or parts.password or (
            "@" in parts.netloc and scheme not in ("abfs", "abfss")):
        raise ConfigError(f"option {name} must not carry a query, fragment or credentials; give "
                          f"them with the remote.storage.<backend>.* options", option=name)
    fetcher, bucket_key = _URI_SCHEMES[scheme]
    derived: dict[str, str] = {}
    prefix = ""
    if bucket_key is None:
        if scheme == "file" and parts.netloc not in ("", "localhost"):
            raise ConfigError(f"option {name}: file URIs name a local path (file:///path), got "
                              f"host {parts.netloc!r}", option=name)
        derived["remote.storage.fsspec.url"] = uri.strip().rstrip("/")
    else:
        container = parts.netloc
        if scheme in ("abfs", "abfss"):
            container, at, host = container.partition("@")
            account = host.split(".", 1)[0] if at else ""
            if not account:
                raise ConfigError(f"option {name}: abfs URIs look like "
                                  f"abfs://container@account.dfs.core.windows.net/prefix", option=name)
            derived["remote.storage.azure.account.name"] = account
        if not container:
            raise ConfigError(f"option {name} names no bucket or container: {uri!r}", option=name)
        derived[bucket_key] = container
        path = parts.path.strip("/")
        prefix = f"{path}/" if path else ""
    given = dict(backend)
    for key, value in derived.items():
        if key in given and str(given[key]) != value:
            raise ConfigError(f"options {name} and {key} disagree ({value!r} from the URI, "
                              f"{given[key]!r} given); give one of them", option=key)
        if key not in given:
            backend.append((key, value))
    checks = (("remote.storage.fetcher", "fetcher", fetcher), ("remote.storage.prefix", "prefix", prefix))
    for key, attr, value in checks:
        if attr in kw and kw[attr] != value and (attr != "prefix" or prefix):
            raise ConfigError(f"options {name} and {key} disagree ({value!r} from the URI, "
                              f"{kw[attr]!r} given); give one of them", option=key)
        kw.setdefault(attr, value)
