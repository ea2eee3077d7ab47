"""The typed-values options, frozen: how record keys and values are written (``key.format``,
``value.format``), where their reader schemas come from, the schema registry and how to reach it,
and what a record that cannot be decoded does (``mode``).

The fields that are one option each come from the option table
(:class:`.fields.ValuesConfigFields`); :attr:`ValuesConfig.readers` is what the driver resolved
from the registry before any task (``kafka_tiered_source.values.readers``), shipped with the
options so executors never ask for a reader schema themselves.
"""
from __future__ import annotations

from typing import Mapping

from ..dataclass import dataclass
from ..errors import ConfigError
from ..redact import redact_url
from .fields import ValuesConfigFields
from .table import OPTIONS

SIDES = ("key", "value")
REGISTRY_FORMATS = ("avro", "protobuf", "json")


@dataclass(frozen=True)
class SideConfig:
    """What one of ``key`` / ``value`` says: its format and how its reader schema is found."""
    side: str
    format: str
    subject_strategy: str
    record_name: str | None
    subject: str | None
    version: int | None
    schema: str | None

    @property
    def typed(self) -> bool:
        return self.format != "binary"

    @property
    def registry(self) -> bool:
        """Written by a schema registry's serializer (magic byte, schema id, payload)."""
        return self.format in REGISTRY_FORMATS


class ValuesConfig(ValuesConfigFields):
    """The typed-values options (:class:`.fields.ValuesConfigFields`) and the reader schemas the
    driver resolved for them (``readers``: None until then)."""
    __slots__ = ()

    def side(self, name: str) -> SideConfig:
        if name == "key":
            return SideConfig("key", self.key_format, self.key_subject_strategy, self.key_record_name,
                              self.key_subject, self.key_schema_version, self.key_schema)
        return SideConfig("value", self.value_format, self.value_subject_strategy, self.value_record_name,
                          self.value_subject, self.value_schema_version, self.value_schema)

    @property
    def typed(self) -> bool:
        """A key or value is decoded (else the columns are Spark's Kafka source's, unchanged)."""
        return self.key_format != "binary" or self.value_format != "binary"

    @property
    def permissive(self) -> bool:
        return self.mode == "PERMISSIVE"

    @property
    def registry_urls(self) -> tuple[str, ...]:
        return tuple(u.strip() for u in (self.registry_url or "").split(",") if u.strip())

    def __repr__(self) -> str:
        shown = []
        for name in self.FIELDS:
            value = getattr(self, name)
            if name == "registry_url" and value is not None:
                value = ",".join(str(redact_url(u)) for u in self.registry_urls)
            shown.append(f"{name}={value!r}")
        return f"ValuesConfig({', '.join(shown)})"

    __str__ = __repr__

    @classmethod
    def from_options(cls, opts: Mapping[str, str]) -> "ValuesConfig":
        """The ``values`` rows of lower-cased ``opts``, checked for what goes together."""
        kw = {str(o.field): o.value(opts[o.key]) for o in _ROWS if o.key in opts}
        config = cls(**kw)
        config.check({o.key for o in _ROWS if o.key in opts})
        return config

    def check(self, given: set[str]) -> None:
        for name in SIDES:
            s = self.side(name)
            own = [k for k in given if k.startswith(f"{name}.") and k != f"{name}.format"]
            if not s.registry:
                if own:
                    raise ConfigError(f"Option '{sorted(own)[0]}' is set but {name}.format is '{s.format}': only "
                                      f"avro, protobuf and json {name}s have schemas", option=sorted(own)[0])
                continue
            if not self.registry_urls:
                raise ConfigError(f"Option '{name}.format' is '{s.format}' but no 'schema.registry.url' is given: "
                                  f"every {s.format} {name} names its writer schema by a registry id",
                                  option="schema.registry.url")
            if s.schema is not None and (s.version is not None or s.subject is not None
                                         or f"{name}.subject.name.strategy" in given):
                raise ConfigError(f"Option '{name}.schema' gives the {name} reader schema outright: leave out "
                                  f"{name}.schema.subject, {name}.schema.version and {name}.subject.name.strategy",
                                  option=f"{name}.schema")
            if s.subject is not None and f"{name}.subject.name.strategy" in given:
                raise ConfigError(f"Options '{name}.schema.subject' and '{name}.subject.name.strategy' both name the "
                                  f"{name} reader schema's subject; give one", option=f"{name}.schema.subject")
            if (s.schema is None and s.subject is None and s.subject_strategy != "TopicNameStrategy"
                    and s.record_name is None):
                raise ConfigError(f"Option '{name}.subject.name.strategy' is {s.subject_strategy}: the subject "
                                  f"holds the record's full name, so give it as '{name}.schema.record.name'",
                                  option=f"{name}.schema.record.name")
        auth = self.basic_auth_credentials_source
        if auth == "USER_INFO" and self.basic_auth_user_info is not None and ":" not in self.basic_auth_user_info.get():
            raise ConfigError("Option 'basic.auth.user.info' must be user:password", option="basic.auth.user.info")
        if auth == "URL" and not any("@" in u for u in self.registry_urls):
            raise ConfigError("Option 'basic.auth.credentials.source' is URL but 'schema.registry.url' holds no "
                              "user info (https://user:password@host)", option="basic.auth.credentials.source")
        if self.bearer_auth_credentials_source is not None:
            if self.bearer_auth_token is None:
                raise ConfigError("Option 'bearer.auth.credentials.source' is STATIC_TOKEN but no "
                                  "'bearer.auth.token' is given", option="bearer.auth.token")
            if self.basic_auth_user_info is not None or "basic.auth.credentials.source" in given:
                raise ConfigError("Give the registry basic auth or a bearer token, not both",
                                  option="bearer.auth.credentials.source")
        elif self.bearer_auth_token is not None:
            raise ConfigError("Option 'bearer.auth.token' needs 'bearer.auth.credentials.source' = STATIC_TOKEN",
                              option="bearer.auth.credentials.source")
        if self.ssl_key_location and not self.ssl_certificate_location:
            raise ConfigError("Option 'schema.registry.ssl.key.location' is given but "
                              "'schema.registry.ssl.certificate.location' is not",
                              option="schema.registry.ssl.certificate.location")
        if self.registry_urls and not any(self.side(n).registry for n in SIDES):
            raise ConfigError("Option 'schema.registry.url' is given but neither key.format nor value.format "
                              "uses it (avro, protobuf or json)", option="schema.registry.url")
        for url in self.registry_urls:
            if not url.lower().startswith(("http://", "https://")):
                raise ConfigError(f"Option 'schema.registry.url': {redact_url(url)!r} is not an http:// or "
                                  f"https:// URL", option="schema.registry.url")


#: the rows of the option table that are fields of ValuesConfig
_ROWS = tuple(o for o in OPTIONS if o.config == "ValuesConfig")
