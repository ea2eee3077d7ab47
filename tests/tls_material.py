"""The TLS test material in tests/fixtures/tls (made by tests/fixtures/tls/make.sh with keytool and
openssl, committed; the tests run neither tool), its passwords, the Kafka option maps that use
each store, and throw-away certificates made at test time (a foreign CA, a self-signed client)."""
from __future__ import annotations

import datetime as dt
import os

TLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "tls")
CA_PEM = os.path.join(TLS, "ca.pem")
BROKER_PW = "broker-pass-R4t7"
CLIENT_STORE_PW = "client-store-pass-J3n9"
CLIENT_KEY_PW = "client-key-pass-W6q1"
P12_PW = "client-p12-pass-H2x5"
PEM_KEY_PW = "client-pem-key-pass-T9d4"
TRUST_PW = "trust-pass-M5c8"
READER = "CN=reader,OU=analytics,O=kafka-tiered"
READER_EC = "CN=reader-ec,O=kafka-tiered"
PASSWORDS = {"broker keystore password": BROKER_PW, "JKS store password": CLIENT_STORE_PW,
             "JKS key password": CLIENT_KEY_PW, "PKCS12 password": P12_PW, "PEM key password": PEM_KEY_PW,
             "truststore password": TRUST_PW}


def path(name: str) -> str:
    return os.path.join(TLS, name)


def text(name: str) -> str:
    with open(path(name), encoding="ascii") as f:
        return f.read()


def broker_ssl(client_auth: str = "none") -> dict:
    """The embedded broker's listener: PKCS12 keystore, the CA as a PEM truststore."""
    return {"ssl.keystore.location": path("broker.p12"), "ssl.keystore.password": BROKER_PW,
            "ssl.truststore.location": CA_PEM, "ssl.client.auth": client_auth}


# Kafka client properties (without the kafka. prefix) per truststore form
TRUSTSTORES = {
    "jks": {"ssl.truststore.location": path("truststore.jks"), "ssl.truststore.password": TRUST_PW},
    "jks-no-password": {"ssl.truststore.location": path("truststore.jks")},
    "pkcs12": {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": path("truststore.p12"),
               "ssl.truststore.password": TRUST_PW},
    "pem-file": {"ssl.truststore.type": "PEM", "ssl.truststore.location": CA_PEM},
    "pem-inline": {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": text("ca.pem")},
    "cafile": {"ssl.cafile": CA_PEM},
}

# ... and per keystore form: (properties, the principal the broker should see)
KEYSTORES = {
    "jks": ({"ssl.keystore.location": path("client.jks"), "ssl.keystore.password": CLIENT_STORE_PW,
             "ssl.key.password": CLIENT_KEY_PW}, READER),
    "jks-ec": ({"ssl.keystore.type": "JKS", "ssl.keystore.location": path("client-ec.jks"),
                "ssl.keystore.password": CLIENT_STORE_PW}, READER_EC),
    "pkcs12": ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": path("client.p12"),
                "ssl.keystore.password": P12_PW}, READER),
    "pem-file": ({"ssl.keystore.type": "PEM", "ssl.keystore.location": path("client-keystore.pem"),
                  "ssl.key.password": PEM_KEY_PW}, READER),
    "pem-inline": ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": text("client-chain.pem"),
                    "ssl.keystore.key": text("client-key.pem")}, READER),
    "pem-inline-encrypted": ({"ssl.keystore.type": "PEM",
                              "ssl.keystore.certificate.chain": text("client-chain.pem"),
                              "ssl.keystore.key": text("client-key-encrypted.pem"),
                              "ssl.key.password": PEM_KEY_PW}, READER),
    "certfile": ({"ssl.certfile": path("client-chain.pem"), "ssl.keyfile": path("client-key.pem")}, READER),
}


def self_signed(common_name: str, *, ca: bool = False) -> tuple[str, str]:
    """(certificate PEM, PKCS#8 key PEM) of a new self-signed certificate, valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False))
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    cert = builder.sign(key, hashes.SHA256())
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())
