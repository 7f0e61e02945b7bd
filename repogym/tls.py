"""A certificate that could not be verified, told whole, with what to do about it.

Behind a proxy that intercepts TLS, every download fails certificate verification: pip at an
image build, ``git clone`` of a dataset's repository, npm, go, cargo. Their messages are long
and sit in long logs, which reasons cut to a few hundred characters; cut in the middle
(``[SSL: CERTIFICATE_VERIFY_FAILED] certificate ``), a reason neither says what happened nor
names ``REPOGYM_CA_BUNDLE``, the setting that fixes it. :func:`explain_certificate` finds such a
failure in any text and returns one sentence that quotes it whole and names the setting; the
places that cut a log into a reason use it first.
"""

from __future__ import annotations

import re

SETTING = "REPOGYM_CA_BUNDLE"
ADVICE = (f"behind a proxy that intercepts TLS, set {SETTING}=/path/to/ca.pem (the proxy's CA "
          "certificate, PEM; image builds and clones trust it too) and run again")

# What each client says when a certificate does not verify, most precise first; the match is
# quoted to the end of the message (Python's up to its ``(_ssl.c:N)`` or closing quote, the others
# to the line's end).
_PATTERNS = tuple(re.compile(p) for p in (
    # Python's ssl module (pip, requests, urllib): "[SSL: CERTIFICATE_VERIFY_FAILED] certificate
    # verify failed: unable to get local issuer certificate (_ssl.c:1006)"
    r"\[SSL: CERTIFICATE_VERIFY_FAILED\][^'\"\n]*?(?:\(_ssl\.c:\d+\)|(?=['\"\n])|$)",
    r"certificate verify failed[^\n]*",
    # git (GnuTLS or OpenSSL builds), curl, cargo
    r"server certificate verification failed[^\n]*",
    r"SSL certificate problem: [^\n]*",
    # node, npm
    r"\b(?:SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|"
    r"UNABLE_TO_VERIFY_LEAF_SIGNATURE|DEPTH_ZERO_SELF_SIGNED_CERT)\b[^\n]*",
    # go
    r"x509: certificate signed by unknown authority[^\n]*",
))


def untrusted_certificate(text: str) -> str | None:
    """The first message in ``text`` that says a certificate could not be verified, whole."""
    for pattern in _PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(0).strip()
    return None


def explain_certificate(text: str) -> str | None:
    """One sentence for a reason when ``text`` shows an unverified certificate, else None."""
    found = untrusted_certificate(text)
    if found is None:
        return None
    return f"a TLS certificate could not be verified ({found}): {ADVICE}"
