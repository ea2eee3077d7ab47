"""SASL mechanisms: RFC 7677 / RFC 4616 vectors and the client/server SCRAM pair."""
import base64

import pytest

from kafka_tiered_source.protocol.sasl import (
    ScramClient, ScramCredential, ScramServer, SaslError, parse_plain, plain_initial_response)

# RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil".
CNONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha256_client_matches_rfc7677():
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CNONCE)
    assert c.first() == b"n,,n=user,r=" + CNONCE.encode()
    assert c.final(SERVER_FIRST) == CLIENT_FINAL
    c.verify(SERVER_FINAL)
    with pytest.raises(SaslError, match="signature"):
        c.verify(b"v=" + base64.b64encode(b"\x00" * 32))


def test_scram_sha256_server_matches_rfc7677():
    cred = ScramCredential.from_password("pencil", "SCRAM-SHA-256", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    s = ScramServer("SCRAM-SHA-256", {"user": cred}.get, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert s.first(b"n,,n=user,r=" + CNONCE.encode()) == SERVER_FIRST
    assert s.final(CLIENT_FINAL) == SERVER_FINAL and s.username == "user"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_pair_and_wrong_password(mech):
    cred = ScramCredential.from_password("pw,=odd", mech)
    users = {"we,ird=name": cred}
    c = ScramClient(mech, "we,ird=name", "pw,=odd")
    s = ScramServer(mech, users.get)
    c.verify(s.final(c.final(s.first(c.first()))))
    assert s.username == "we,ird=name"
    bad = ScramClient(mech, "we,ird=name", "nope")
    s2 = ScramServer(mech, users.get)
    with pytest.raises(SaslError, match="authentication failed") as ei:
        s2.final(bad.final(s2.first(bad.first())))
    assert "nope" not in str(ei.value)
    assert "pw" not in repr(cred) and "nope" not in repr(bad)


def test_scram_client_refuses_a_server_that_does_not_extend_its_nonce():
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CNONCE)
    with pytest.raises(SaslError, match="nonce"):
        c.final(b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslError, match="iteration"):
        c.final(b"r=" + CNONCE.encode() + b"x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1")


def test_plain():
    assert plain_initial_response("alice", "pw") == b"\x00alice\x00pw"
    assert parse_plain(b"\x00alice\x00pw") == ("", "alice", "pw")
    with pytest.raises(SaslError):
        parse_plain(b"alice:pw")
