"""Keep secrets out of logs, reprs, plans and exceptions.

Anything that may hold a secret goes through here before it is formatted: presigned URLs lose
their query string (the signature, credential and token live there), option maps lose the
values of secret-bearing keys, and :class:`Secret` wraps a value whose repr/str never show it.
"""
from __future__ import annotations

import re

REDACTED = "***"

# The one rule for which option names hold secrets (case-insensitive, with or without a prefix
# such as "kafka." or "remote.storage.<backend>."), used for every option map, config repr,
# log line and error message (ssl.keystore.type / .location / .certificate.chain and
# ssl.keymanager.algorithm name no secret;
# the keystore's password and key are caught by "password" and "key").  The option table also
# flags its secret options; this rule covers
# the names it cannot know (Kafka client settings passed through, a plugin's own options).
_SECRET_KEY = (
    r"(?i)(password|passwd|secret|jaas|token|credential|(^|[._-])sas([._-]|$)|signature|private|access[._-]?key|"
    r"account[._-]?key|connection[._-]?string|ssl\.key(?!store|manager))"
)
# A bare "key" component (remote.storage.gcs.key, a plugin's api.key) and user-info style names.
_SECRET_COMPONENT = r"(?i)(^|[._-])(key|userinfo|user\.info|auth)([._-]|$)"
# The typed-key options (key.format, key.schema, key.subject.name.strategy, ...) name the
# record key's schema, not a credential.
_RECORD_KEY_OPTION = r"(?i)^key\.(format|schema|subject)([._]|$)"
# (patterns as strings, compiled when first used (re caches them): not at import, issue 36)


def is_secret_key(name: str) -> bool:
    if re.match(_RECORD_KEY_OPTION, name):
        return False
    return bool(re.search(_SECRET_KEY, name) or re.search(_SECRET_COMPONENT, name))


def redact_url(url: str | None) -> str | None:
    """Drop the query string and any user-info from a URL: ``https://h/p?<redacted>``."""
    if url is None:
        return None
    from urllib.parse import urlsplit, urlunsplit   # (with ipaddress) only when a URL is shown
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    query = REDACTED if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class Secret:
    """A string that does not show itself.  ``.get()`` returns the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self):
        return hash(self._value)

    def __reduce__(self):
        return (Secret, (self._value,))
