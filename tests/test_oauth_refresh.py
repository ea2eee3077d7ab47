"""The OAUTHBEARER login refresher, as Kafka's ExpiringCredentialRefreshingLogin: tokens are
refreshed in the background while connections and KIP-368 re-authentications keep using the
valid one; a failed refresh is retried with sasl.login.retry.backoff.* while the token lasts,
then connections fail with TokenExpiredError; secrets stay out of logs and reprs.

One provider (``testing.oauth_server``: a stall hook for a slow IdP, ``ages`` for tokens whose
refresh is due at once, ``fail_next`` for one that is down) and one SASL_PLAINTEXT cluster
validating its tokens, whose sessions last 300 ms (``connections.max.reauth.ms``) so every
connection re-authenticates often.  Orderings are shown by events (a refresh stalled at the IdP
while connections complete), not by timing."""
from __future__ import annotations

import json
import logging
import random
import threading
import time

import pytest

from kafka_tiered_source.errors import ConfigError, TokenExpiredError
from kafka_tiered_source.options import ClientConfig
from kafka_tiered_source.options.oauth import OAuthConfig
from kafka_tiered_source.protocol.client import BrokerClient
from kafka_tiered_source.protocol.oauth import BearerToken, forget_tokens, refresh_at_ms, token_source
from kafka_tiered_source.testing import EmbeddedCluster
from kafka_tiered_source.testing.oauth_server import OAuthServer
from kafka_tiered_source.testing.oauth_validator import unb64url

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECRET = "refresh-client-secret-Zq81"
BRIEF_S = 4.0           # lifetime of the "brief" client's tokens (valid 2 s past its refresh time)


@pytest.fixture(scope="module")
def idp():
    with OAuthServer({"slow": SECRET, "brief": SECRET}, lifetime_s=60, lifetimes={"brief": BRIEF_S}) as s:
        yield s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, idp):
    sasl = {"mechanism": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
            "sasl.oauthbearer.expected.issuer": idp.issuer, "sasl.oauthbearer.expected.audience": "kafka",
            "connections.max.reauth.ms": 300}
    with EmbeddedCluster(str(tmp_path_factory.mktemp("refresh")), sasl=sasl) as c:
        c.create_topic("t")
        yield c


@pytest.fixture(autouse=True)
def fresh_logins():
    forget_tokens()
    yield
    forget_tokens()


def props(c, idp, client: str) -> dict:
    """Refresh at half the lifetime, no jitter, no minimum period or buffer; quick back-offs."""
    return {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": HANDLER,
            "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url,
            "sasl.jaas.config": f'{MODULE} required clientId="{client}" clientSecret="{SECRET}" scope="kafka";',
            "sasl.login.refresh.window.factor": "0.5", "sasl.login.refresh.window.jitter": "0",
            "sasl.login.refresh.min.period.seconds": "0", "sasl.login.refresh.buffer.seconds": "0",
            "sasl.login.retry.backoff.ms": "50", "sasl.login.retry.backoff.max.ms": "200", "retries": "0"}


def wait_for(condition, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.02)


def test_connections_and_reauthentications_do_not_wait_for_a_stalled_refresh(cluster, idp):
    """The login's token was issued 30 s ago and lives 60 s: its refresh is due at once and
    stalls at the IdP.  Meanwhile new clients connect and an old connection re-authenticates,
    all with the valid token; then the IdP answers and the refreshed token is taken."""
    p = props(cluster, idp, "slow")
    source = token_source(ClientConfig.from_properties(p).oauth)
    idp.ages["slow"] = 30
    idp.hold(skip=1)                       # the login passes, the refresh after it stalls
    first = BrokerClient(p)
    try:
        assert first.topic("t").partitions                # the login
        # nothing else asks for a token: the refresh is the background's
        assert idp.wait_held(1, timeout=15), "no background refresh reached the IdP"
        reauths = cluster.security_stats()["reauthentications"]
        done: list = []

        def meanwhile():
            done.append(first.list_offsets("t", {0: -1})[0].offset)   # a new connection: the leader's
            for _ in range(3):
                with BrokerClient(p) as client:
                    done.append(client.topic("t").partitions)
            time.sleep(0.35)               # the leader connection's session (300 ms) ends ...
            done.append(first.list_offsets("t", {0: -1})[0].offset)   # ... so this re-authenticates

        worker = threading.Thread(target=meanwhile, daemon=True)
        worker.start()
        worker.join(30)                    # only a hang trips this
        assert not worker.is_alive(), "connections waited for the stalled refresh"
        assert len(done) == 5
        assert cluster.security_stats()["reauthentications"] > reauths
        # all of that happened while the refresh was still held at the IdP
        assert idp.held == 1 and idp.issued["slow"] == 1 and source.fetches == 1
    finally:
        idp.ages.pop("slow", None)
        idp.release()
        first.close()
    wait_for(lambda: source.fetches == 2, "the stalled refresh to complete")
    assert idp.issued["slow"] == 2
    with BrokerClient(p) as client:
        assert client.topic("t").partitions
    assert idp.issued["slow"] == 2         # the refreshed token serves: no login of its own


def test_a_failing_refresh_is_retried_while_the_token_lasts_then_fails_by_name(cluster, idp, caplog):
    caplog.set_level(logging.DEBUG, logger="kafka_tiered_source")
    p = props(cluster, idp, "brief")
    source = token_source(ClientConfig.from_properties(p).oauth)
    with BrokerClient(p) as client:
        assert client.topic("t").partitions
    exp = json.loads(unb64url(idp.minted[-1].split(".")[1]))["exp"]
    requests = idp.token_requests
    idp.fail_next(10**6, 503)              # the IdP goes down after the login
    try:
        wait_for(lambda: source.failed_fetches >= 1, "a failed refresh")
        with BrokerClient(p) as client:    # the token is still valid: connections go on
            assert client.topic("t").partitions
        time.sleep(max(exp - time.time(), 0) + 0.05)
        with pytest.raises(TokenExpiredError) as ei, BrokerClient(p) as client:
            client.topic("t")
        err = ei.value
        assert err.principal == "brief" and err.attempts >= 2 and "HTTP 503" in err.reason
        assert abs(err.expired_at_ms / 1000 - exp) < 0.01
        assert "expired" in str(err) and "sasl.login.retry.backoff.ms" in str(err) and "brief" in str(err)
        assert source.failed_fetches >= 2 and idp.token_requests > requests + 2   # retried, with backoff
        wait_for(lambda: any(r.levelno == logging.ERROR and "expired" in r.getMessage() for r in caplog.records),
                 "the refresher's error at expiry")
    finally:
        idp.clear_failures()
    retried = [r for r in caplog.records if r.levelno == logging.WARNING and "refresh" in r.getMessage()]
    assert retried and all("valid for" in r.getMessage() for r in retried)
    assert sum(r.levelno == logging.ERROR and "expired" in r.getMessage() for r in caplog.records) == 1
    # the IdP is back: the next connection logs in again (after the last back-off)
    def connects() -> bool:
        try:
            with BrokerClient(p) as client:
                return bool(client.topic("t").partitions)
        except TokenExpiredError:
            return False
    wait_for(connects, "a login once the IdP is back")
    # no secret anywhere: not the client secret, not a token, in logs, errors or reprs
    shown = "\n".join([r.getMessage() for r in caplog.records] + [str(err), repr(err), repr(source),
                      repr(source.token()), repr(source.cfg), repr(ClientConfig.from_properties(p))])
    assert "OAUTHBEARER token for brief" in shown         # the capture saw the logins
    assert SECRET not in shown
    for token in idp.minted:
        assert token not in shown and token.rsplit(".", 1)[1] not in shown


# -- when to refresh, and the four options -----------------------------------------------------

S = 1000


def _token(received_s: float, expires_s: float, issued_s: float | None) -> BearerToken:
    return BearerToken("x.y.z", "p", int(expires_s * S), None if issued_s is None else int(issued_s * S), (),
                       int(received_s * S))


def _cfg(factor=0.8, jitter=0.0, min_period=60, buffer=300) -> OAuthConfig:
    return OAuthConfig("http://idp.test/token", refresh_window_factor=factor, refresh_window_jitter=jitter,
                       refresh_min_period_s=min_period, refresh_buffer_s=buffer)


# (token: received, expires, issued at; config; refresh at), in seconds: Kafka's refreshMs rule
REFRESH_CASES = {
    "an hour's token: at 80% of it": (_token(0, 3600, 0), _cfg(), 2880),
    "into the buffer: at the buffer's start": (_token(0, 600, 0), _cfg(), 300),
    "before the minimum period: at its end": (_token(0, 600, -3000), _cfg(), 60),
    "too short for both: 80% of what is left": (_token(0, 300, 0), _cfg(), 240),
    "no issued-at: from receipt": (_token(100, 3700, None), _cfg(), 100 + 2880),
    "issued long ago, no minimum: at once": (_token(0, 30, -30), _cfg(0.5, 0, 0, 0), 0),
    "factor and full jitter": (_token(0, 1000, 0), _cfg(0.5, 0.25, 0, 0), 750),
}


class _MaxRandom(random.Random):
    def random(self) -> float:     # the jitter at its largest
        return 1.0


@pytest.mark.parametrize("case", sorted(REFRESH_CASES))
def test_refresh_time_is_kafkas(case):
    token, cfg, want_s = REFRESH_CASES[case]
    assert refresh_at_ms(token, cfg, rng=_MaxRandom()) == want_s * S


@pytest.mark.parametrize("key,good,bad", [
    ("sasl.login.refresh.window.factor", ("0.5", "1.0"), ("0.49", "1.01", "nan")),
    ("sasl.login.refresh.window.jitter", ("0", "0.25"), ("-0.01", "0.26")),
    ("sasl.login.refresh.min.period.seconds", ("0", "900"), ("-1", "901")),
    ("sasl.login.refresh.buffer.seconds", ("0", "3600"), ("-1", "3601")),
])
def test_refresh_options_take_kafkas_ranges(key, good, bad):
    base = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": "https://idp.test/t",
            "sasl.jaas.config": f'{MODULE} required clientId="c" clientSecret="{SECRET}";'}
    defaults = ClientConfig.from_properties(base).oauth
    assert (defaults.refresh_window_factor, defaults.refresh_window_jitter, defaults.refresh_min_period_s,
            defaults.refresh_buffer_s) == (0.8, 0.05, 60, 300)
    for value in good:
        assert ClientConfig.from_properties({**base, key: value}).oauth is not None
    for value in bad:
        with pytest.raises(ConfigError) as ei:
            ClientConfig.from_properties({**base, key: value})
        assert ei.value.option == key, value
