"""The s3 fetcher's process-wide boto3 clients: bounded under rotating credentials, and
``remote.storage.s3.path.style.access`` read by the option table's boolean rule."""
from __future__ import annotations

import pytest

from kafka_tiered_source.errors import ConfigError
from kafka_tiered_source.storage import create_fetcher, s3

BASE = {"remote.storage.fetcher": "s3", "remote.storage.s3.bucket": "b",
        "remote.storage.s3.endpoint": "http://127.0.0.1:9", "remote.storage.s3.region": "us-east-1",
        "remote.storage.s3.access.key.id": "AKIA-rotating"}


def _client(token: str, **extra):
    return create_fetcher({**BASE, "remote.storage.s3.secret.access.key": f"secret-{token}",
                           "remote.storage.s3.session.token": f"token-{token}", **extra}).store._client()


def test_rotating_credentials_do_not_grow_the_client_cache(monkeypatch):
    monkeypatch.setattr(s3, "CLIENT_CACHE_SIZE", 4)     # the bound, small: a client takes ~0.1 s to build
    s3._clients.clear()
    hourly = [_client(f"hour-{i}") for i in range(s3.CLIENT_CACHE_SIZE + 3)]
    assert len(s3._clients) == s3.CLIENT_CACHE_SIZE
    # the current credentials' client is shared by every fetcher made with them
    assert _client(f"hour-{s3.CLIENT_CACHE_SIZE + 2}") is hourly[-1]
    # the oldest left the cache: the same credentials again get a client of their own
    again = _client("hour-0")
    assert again is not hourly[0]
    assert again.meta.config.connect_timeout == hourly[0].meta.config.connect_timeout
    assert len(s3._clients) == s3.CLIENT_CACHE_SIZE


@pytest.mark.parametrize("text, style", [("yes", "path"), ("TRUE", "path"), ("no", "auto"), ("0", "auto")])
def test_path_style_follows_the_boolean_rule(text, style):
    client = _client("style", **{"remote.storage.s3.path.style.access": text})
    assert client.meta.config.s3["addressing_style"] == style


def test_path_style_defaults_to_on_with_an_endpoint_and_refuses_other_words():
    assert _client("dflt").meta.config.s3["addressing_style"] == "path"
    without = {k: v for k, v in BASE.items() if k != "remote.storage.s3.endpoint"}
    f = create_fetcher({**without, "remote.storage.s3.secret.access.key": "x"})
    assert f.store._client().meta.config.s3["addressing_style"] == "auto"
    with pytest.raises(ConfigError) as ei:
        create_fetcher({**BASE, "remote.storage.s3.path.style.access": "maybe"})
    assert ei.value.option == "remote.storage.s3.path.style.access"
    assert "true or false" in str(ei.value) and "'maybe'" in str(ei.value)
