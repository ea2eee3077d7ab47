"""X.509 certificates and PEM text, as far as TLS set-up needs them: PEM blocks in and out,
and a certificate's subject and validity read from its DER (a small bounded DER walk, so JKS and
PEM stores need no third-party package; PKCS12 does, see :mod:`.keystores`).

Subjects are shown as Java's ``X500Principal.getName()`` shows them (RFC 2253: the last RDN
first), so a name in an error matches what ``keytool -list -v`` prints."""
from __future__ import annotations

import base64
import binascii
import datetime as _dt
import re

from ..dataclass import dataclass, field

# Kafka's PemParser accepts text around the blocks and "Proc-Type:" style headers inside them.
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*(?:[^\r\n]*:[^\r\n]*[\r\n]+)*([A-Za-z0-9+/=\s]*?)"
                  r"-----END \1-----")

_NAMES = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
          "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
          "0.9.2342.19200300.100.1.1": "UID", "1.2.840.113549.1.9.1": "EMAILADDRESS",
          "2.5.4.5": "SERIALNUMBER"}


class DerError(ValueError):
    """Malformed DER: says what was expected at which byte."""


def pem_blocks(text: str) -> list[tuple[str, bytes]]:
    """Every ``-----BEGIN X-----`` block of ``text``: ``[(label, der bytes)]`` in order."""
    out = []
    for m in _PEM.finditer(text):
        try:
            out.append((m.group(1), base64.b64decode("".join(m.group(2).split()), validate=True)))
        except (binascii.Error, ValueError):
            raise DerError(f"the PEM block {m.group(1)!r} is not valid base64") from None
    return out


def to_pem(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode("ascii")
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


# --- DER ------------------------------------------------------------------------------------

def _tlv(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, start of value, end of value) of the element at ``pos``; bounded by ``end``."""
    if pos + 2 > end:
        raise DerError(f"truncated DER element at byte {pos}")
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4 or pos + n > end:
            raise DerError(f"bad DER length at byte {pos - 1}")
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    if pos + length > end:
        raise DerError(f"DER element at byte {pos} runs past its container ({length} bytes)")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    pos = start
    while pos < end:
        tag, vs, ve = _tlv(data, pos, end)
        out.append((tag, vs, ve))
        pos = ve
    return out


def _expect(elem: tuple[int, int, int], tag: int, what: str) -> tuple[int, int, int]:
    if elem[0] != tag:
        raise DerError(f"expected {what} (tag 0x{tag:02x}) at byte {elem[1]}, found tag 0x{elem[0]:02x}")
    return elem


def oid_text(raw: bytes) -> str:
    if not raw:
        raise DerError("empty OBJECT IDENTIFIER")
    parts = [raw[0] // 40, raw[0] % 40] if raw[0] < 80 else [2, raw[0] - 80]
    value = 0
    for b in raw[1:]:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _time(tag: int, raw: bytes) -> _dt.datetime:
    text = raw.decode("ascii", "replace")
    try:
        if tag == 0x17:     # UTCTime YYMMDDHHMM[SS]Z; RFC 5280: 50-99 are 19xx
            fmt = "%y%m%d%H%M%SZ" if len(text) == 13 else "%y%m%d%H%MZ"
            t = _dt.datetime.strptime(text, fmt)
            if t.year >= 2050:
                t = t.replace(year=t.year - 100)
        elif tag == 0x18:   # GeneralizedTime YYYYMMDDHHMMSSZ
            t = _dt.datetime.strptime(text.split(".")[0].rstrip("Z") + "Z", "%Y%m%d%H%M%SZ")
        else:
            raise DerError(f"a certificate time has tag 0x{tag:02x}")
    except ValueError:
        raise DerError(f"a certificate time {text!r} is not in the DER form") from None
    return t.replace(tzinfo=_dt.timezone.utc)


def _string(tag: int, raw: bytes) -> str:
    if tag == 0x1E:     # BMPString
        return raw.decode("utf-16-be", "replace")
    return raw.decode("utf-8" if tag == 0x0C else "latin-1", "replace")


def _name(data: bytes, start: int, end: int) -> str:
    rdns = []
    for _tag, vs, ve in _children(data, start, end):          # SET OF AttributeTypeAndValue
        parts = []
        for _, avs, ave in _children(data, vs, ve):
            oid, value = _children(data, avs, ave)[:2]
            key = oid_text(data[oid[1]:oid[2]])
            text = _string(value[0], data[value[1]:value[2]])
            text = re.sub(r'([,+"\\<>;])', r"\\\1", text)
            parts.append(f"{_NAMES.get(key, key)}={text}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


@dataclass(frozen=True)
class CertificateInfo:
    subject: str
    issuer: str
    not_before: _dt.datetime
    not_after: _dt.datetime
    der: bytes = field(repr=False)

    def expired(self, now: _dt.datetime | None = None) -> bool:
        return (now or _dt.datetime.now(_dt.timezone.utc)) > self.not_after

    def not_yet_valid(self, now: _dt.datetime | None = None) -> bool:
        return (now or _dt.datetime.now(_dt.timezone.utc)) < self.not_before

    @property
    def pem(self) -> str:
        return to_pem("CERTIFICATE", self.der)


def certificate_info(der: bytes) -> CertificateInfo:
    """Subject, issuer and validity of one DER certificate (raises :class:`DerError`)."""
    der = bytes(der)
    cert = _expect(_tlv(der, 0, len(der)), 0x30, "Certificate SEQUENCE")
    tbs = _expect(_children(der, cert[1], cert[2])[0], 0x30, "TBSCertificate SEQUENCE")
    fields = _children(der, tbs[1], tbs[2])
    if fields and fields[0][0] == 0xA0:     # [0] version
        fields = fields[1:]
    if len(fields) < 5:
        raise DerError("the TBSCertificate has too few fields")
    issuer = _expect(fields[2], 0x30, "issuer Name")
    validity = _expect(fields[3], 0x30, "Validity")
    subject = _expect(fields[4], 0x30, "subject Name")
    nb, na = _children(der, validity[1], validity[2])[:2]
    return CertificateInfo(subject=_name(der, subject[1], subject[2]),
                           issuer=_name(der, issuer[1], issuer[2]),
                           not_before=_time(nb[0], der[nb[1]:nb[2]]),
                           not_after=_time(na[0], der[na[1]:na[2]]), der=der)


def encrypted_pkcs8(der: bytes) -> tuple[str, bytes]:
    """``(algorithm OID, encrypted data)`` of a PKCS#8 EncryptedPrivateKeyInfo."""
    der = bytes(der)
    top = _expect(_tlv(der, 0, len(der)), 0x30, "EncryptedPrivateKeyInfo SEQUENCE")
    alg, data = _children(der, top[1], top[2])[:2]
    _expect(alg, 0x30, "AlgorithmIdentifier")
    _expect(data, 0x04, "encrypted data OCTET STRING")
    oid = _expect(_children(der, alg[1], alg[2])[0], 0x06, "algorithm OBJECT IDENTIFIER")
    return oid_text(der[oid[1]:oid[2]]), der[data[1]:data[2]]


def is_private_key_info(der: bytes) -> bool:
    """True when ``der`` parses as a PKCS#8 PrivateKeyInfo (version, AlgorithmIdentifier, key)."""
    try:
        top = _expect(_tlv(der, 0, len(der)), 0x30, "PrivateKeyInfo")
        if top[2] != len(der):
            return False
        kids = _children(der, top[1], top[2])
        return len(kids) >= 3 and kids[0][0] == 0x02 and kids[1][0] == 0x30 and kids[2][0] == 0x04
    except DerError:
        return False
