"""Java's host-name rule for ``ssl.endpoint.identification.algorithm=LDAP`` (or ``LDAPS``, the
same rule): sun.security.util.HostnameChecker with TYPE_LDAP, as X509TrustManagerImpl's
checkIdentity applies it, checked here on the peer's certificate after OpenSSL has verified its
chain (``protocol/tls.py`` turns OpenSSL's own check off for these two values).

How the LDAP rule differs from HTTPS:

* LDAP (RFC 2830 section 3.6; Java's matchLeftmostWildcard): a ``*`` counts only in the leftmost
  label, where it may be part of the label and may match nothing (``b*.example.com`` matches
  ``broker-1.example.com`` and ``b.example.com``); what follows the first dot must equal the
  template's, character for character.  ``a.*.example.com`` matches no name at all.
* HTTPS in Java (RFC 2818; matchAllWildcards) lets a ``*`` stand in any label, as long as name
  and template have as many labels (``a.*.example.com`` matches ``a.b.example.com``).  Here
  ``https`` is OpenSSL's check during the handshake (X509_check_host as Python configures it),
  stricter than both Java rules: a wildcard only as the whole leftmost label
  (``*.example.com``), never partial, never over a single-label suffix.
* Common to both in Java: an IP address is matched only against iPAddress subject alternative
  names (no wildcard, no common name); a host name against the dNSName ones, and against the
  subject's most specific common name only when there is none; the host must be a valid
  domain name (letters, digits, hyphens: no ``_``, no trailing dot); ``*`` or ``*.`` alone, and
  a ``*`` with no dot after it, never match; names are compared in Unicode after IDNA, and a
  common name not in NFKC form is refused.

Java also refuses a wildcard over a public suffix (``*.co.uk``) when the certificate chains to
one of the JDK's public CAs.  Without the public-suffix list, this module takes "chains to a
public CA" as "trusted through the system's CAs" (no truststore given) and a public suffix as a
single label (``*.com``); a wildcard over a multi-label public suffix from a public CA is
accepted here where Java would refuse it (no public CA issues one)."""
from __future__ import annotations

import ipaddress
import re
import ssl
import unicodedata

_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?", re.IGNORECASE)
MISMATCH_CODE = 62           # OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH


class HostnameMismatch(ssl.SSLCertVerificationError):
    """The peer's certificate does not name the host under the LDAP rule; a certificate
    verification error with OpenSSL's code for a host-name mismatch, so callers handle it as
    they handle OpenSSL's own."""

    def __init__(self, host: str, why: str):
        message = f"Hostname mismatch, certificate is not valid for {host!r} by the LDAP rule: {why}"
        super().__init__(1, message)
        self.verify_code = MISMATCH_CODE
        self.verify_message = message
        self.reason = "CERTIFICATE_VERIFY_FAILED"
        self.library = "SSL"

    def __str__(self) -> str:
        return self.verify_message


def check_ldap(host: str, cert: dict, *, public_ca: bool) -> None:
    """Raise :class:`HostnameMismatch` unless ``cert`` (``SSLSocket.getpeercert()``'s dict)
    names ``host`` by Java's TYPE_LDAP rule.  ``public_ca``: the chain ends at one of the
    system's CAs (Java's chainsToPublicCA)."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]                       # X509TrustManagerImpl strips an IPv6 literal's brackets
    sans = tuple(cert.get("subjectAltName") or ())
    ip = _ip(host)
    if ip is not None:                          # HostnameChecker.matchIP: exact, SANs only
        if not sans:
            raise HostnameMismatch(host, "the certificate has no subject alternative names")
        if any(kind == "IP Address" and _ip(value.strip()) == ip for kind, value in sans):
            return
        raise HostnameMismatch(host, "no IP address among its subject alternative names matches")
    if not _valid_domain(host):
        raise HostnameMismatch(host, "not a valid domain name")
    dns = [value for kind, value in sans if kind == "DNS"]
    if any(_matched(host, template, public_ca) for template in dns):
        return
    if dns:                                     # DNS names given and none matches: the CN is not looked at
        raise HostnameMismatch(host, f"no DNS subject alternative name matches (it names {', '.join(dns)})")
    cn = _most_specific_common_name(cert)
    if cn is not None:
        if not unicodedata.is_normalized("NFKC", cn):
            raise HostnameMismatch(host, "the subject's common name is not in NFKC form")
        if _matched(host, cn, public_ca):
            return
    raise HostnameMismatch(host, f"no name matches (common name {cn!r}, no DNS subject alternative name)")


def _ip(text: str):
    """The address an IPv4 or IPv6 literal names (a zone id is ignored), else None."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def _valid_domain(name: str) -> bool:
    """javax.net.ssl.SNIHostName's check: IDNA with the STD3 rules (letter-digit-hyphen
    labels of 1-63 characters), not empty, no trailing dot."""
    if not name or name.endswith("."):
        return False
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    return all(_LABEL.fullmatch(label) and len(label) <= 63 for label in ascii_name.split("."))


def _unicode(name: str) -> str:
    """IDN.toUnicode(IDN.toASCII(name)): how Java normalises both sides before comparing."""
    return name.encode("idna").decode("idna")


def _matched(name: str, template: str, public_ca: bool) -> bool:
    """HostnameChecker.isMatched for TYPE_LDAP."""
    try:
        name, template = _unicode(name), _unicode(template)
    except UnicodeError:
        return False
    if _illegal_wildcard(template, public_ca):
        return False
    if not _valid_domain(template.replace("*", "z")):
        return False
    return _leftmost_wildcard(name, template)


def _illegal_wildcard(template: str, public_ca: bool) -> bool:
    """HostnameChecker.hasIllegalWildcard (see the module's note on public suffixes)."""
    if template in ("*", "*."):
        return True
    last = template.rfind("*")
    if last == -1:
        return False
    after = template[last:]
    dot = after.find(".")
    if dot == -1:                               # "*com", "a*b": no dot after the wildcard
        return True
    if not public_ca:
        return False
    suffix = after[dot + 1:].rstrip(".")
    return "." not in suffix                    # a wildcard over a top-level domain


def _leftmost_wildcard(name: str, template: str) -> bool:
    """RFC 2830 3.6: the leftmost labels match with wildcards, the rest exactly."""
    name, template = name.lower(), template.lower()
    n, t = name.find("."), template.find(".")
    n = len(name) if n == -1 else n
    t = len(template) if t == -1 else t
    return _wildcards(name[:n], template[:t]) and template[t:] == name[n:]


def _wildcards(label: str, pattern: str) -> bool:
    """One label against a pattern whose ``*`` each match any run of characters (none too):
    the pieces between them are found in order, the first at the start, the last at the end."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return label == pattern
    first, *middle, last = pieces
    if not label.startswith(first):
        return False
    rest = label[len(first):]
    for piece in middle:
        at = rest.find(piece)
        if at == -1:
            return False
        rest = rest[at + len(piece):]
    return rest.endswith(last)


def _most_specific_common_name(cert: dict) -> str | None:
    """The subject's last commonName (X500Name.findMostSpecificAttribute)."""
    cn = None
    for rdn in cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                cn = value
    return cn


__all__ = ["HostnameMismatch", "MISMATCH_CODE", "check_ldap"]
