"""The fetchers' configuration: ``remote.storage.*`` (where and how to reach objects) and
``fetch.remote.*`` (how hard to try), parsed through the option table into a frozen
:class:`FetcherConfig`.

Options are matched case-insensitively (Spark hands them over that way).  Every
``remote.storage.*`` name must be a row of the table (the built-in backends' options included,
whichever fetcher is configured), ``remote.storage.custom.*`` (for a
``remote.storage.fetcher.class``), or a third-party fetcher's own option
(:func:`~.fetchers.plugin_options`).  Options of other prefixes are left to the other parts.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from ..redact import Secret, is_secret_key
from .fetchers import plugin_options
from .fields import FetcherConfigFields
from .table import BY_KEY, TEXT, unknown

#: the rows that are fields of FetcherConfig, by key
_FIELDS = {o.key: o for o in BY_KEY.values() if o.config == "FetcherConfig"}


class FetcherConfig(FetcherConfigFields):
    """The fetchers' configuration: the option-backed fields (:class:`.fields.FetcherConfigFields`:
    fetcher, layout, prefix, timeouts, part size, retries...) and the backend's own options
    (``backend_options``: remote.storage.<backend>.* and remote.storage.custom.*, full keys;
    secrets wrapped in Secret).  ``replace(**changes)`` is the generated base's."""
    __slots__ = ()

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

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "FetcherConfig":
        """Parse the ``remote.storage.*`` / ``fetch.remote.*`` options of a (case-insensitive)
        option map; other options are ignored."""
        opts = {str(k).lower(): v for k, v in options.items()}
        plugin = plugin_options(str(opts.get("remote.storage.fetcher", "")).strip().lower())
        kw: dict[str, Any] = {}
        backend: list[tuple[str, Any]] = []
        for key in sorted(opts):
            value = opts[key]
            if key.startswith("remote.storage."):
                passes = plugin is not None and key.startswith(plugin[0]) and (
                    plugin[1] is None or key in plugin[1])
                refusal = None if passes else unknown(key, declared=(plugin[1] or ()) if plugin else ())
                if refusal is not None:
                    raise refusal
                if key in _FIELDS:
                    kw[str(_FIELDS[key].field)] = _FIELDS[key].value(value)
                elif key != "remote.storage.uri":
                    declared = BY_KEY.get(key)
                    if declared is not None and declared.parse is not TEXT:
                        declared.value(value.get() if isinstance(value, Secret) else value)   # checked here
                    kept: Any = value
                    if not isinstance(kept, Secret):
                        kept = Secret(str(kept)) if is_secret_key(key) else str(kept)
                    backend.append((key, kept))
            elif key in _FIELDS:
                kw[str(_FIELDS[key].field)] = _FIELDS[key].value(value)
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
