"""Behind a proxy that intercepts TLS: a certificate that does not verify is said whole, with
REPOGYM_CA_BUNDLE, wherever a log becomes a reason (#35). The failures are real ones: pip and
git against a local HTTPS server whose certificate nothing trusts."""

from __future__ import annotations

import http.server
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.errors import ImageBuildError, SetupFailed, TaskError
from repogym.images import recipe
from repogym.tasks.sources.common import reason_kind
from repogym.tasks.sources.mirrors import Mirrors
from repogym.tasks.validate import error_reason
from repogym.tls import explain_certificate, untrusted_certificate

CUT = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate "  # where the reason used to end


@pytest.fixture(scope="module")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on loopback with a self-signed certificate: its URL and the certificate."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", cert
    httpd.shutdown()
    httpd.server_close()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (
        "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
        "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE")}


def test_a_pip_install_that_cannot_verify_the_index_names_the_setting(
        untrusted: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = untrusted
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--isolated", "--no-deps", "--retries", "0",
         "--timeout", "10", "--index-url", f"{url}/simple", "-d", str(tmp_path), "six"],
        capture_output=True, text=True, env=_clean_env(), timeout=120)
    assert proc.returncode != 0
    log = "REPOGYM-PHASE setup\n" + proc.stdout + proc.stderr + "\nmore lines\n" * 5
    whole = untrusted_certificate(log)
    assert whole is not None and whole.startswith(CUT) and whole.endswith(")"), whole
    with pytest.raises(SetupFailed) as err:
        recipe.raise_for_build("repogym/repo:x-1", 1, log)
    assert whole in str(err.value) and "REPOGYM_CA_BUNDLE" in str(err.value)
    reason = error_reason(err.value)  # what `tasks add` prints and counts
    assert whole in reason and "REPOGYM_CA_BUNDLE=" in reason, reason
    assert reason_kind(reason).startswith("untrusted certificate")
    with pytest.raises(ImageBuildError, match="REPOGYM_CA_BUNDLE"):
        recipe.raise_for_build("repogym/repo:x-1", 1, "REPOGYM-PHASE user\n" + log[20:])


def test_a_clone_that_cannot_verify_the_host_names_the_setting_and_honours_it(
        untrusted: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, cert = untrusted
    for name in ("GIT_SSL_CAINFO", "SSL_CERT_FILE", "GIT_SSL_NO_VERIFY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REPOGYM_GIT_URL", url + "/{repo}.git")
    monkeypatch.setenv("REPOGYM_MIRRORS", str(tmp_path / "mirrors"))
    monkeypatch.delenv("REPOGYM_CA_BUNDLE", raising=False)
    with pytest.raises(TaskError) as err:
        Mirrors().get("owner/name")
    message = str(err.value)
    assert "REPOGYM_CA_BUNDLE=" in message and "could not be verified" in message, message
    # trusted through the setting, the clone gets past TLS: what fails now is the server,
    # which is no git server at all
    monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(cert))
    with pytest.raises(TaskError) as err:
        Mirrors().get("owner/name")
    assert "could not be verified" not in str(err.value), str(err.value)
    assert "cloning" in str(err.value)


def test_messages_of_other_clients_are_found_whole() -> None:
    git = ("Cloning into bare repository 'x'...\nfatal: unable to access 'https://h/x.git/': "
           "server certificate verification failed. CAfile: none CRLfile: none\n")
    assert untrusted_certificate(git) == ("server certificate verification failed. CAfile: none "
                                          "CRLfile: none")
    assert untrusted_certificate("npm ERR! code SELF_SIGNED_CERT_IN_CHAIN\n") == (
        "SELF_SIGNED_CERT_IN_CHAIN")
    go = "go: example.com/m@v1: Get \"https://proxy/x\": x509: certificate signed by unknown " \
         "authority"
    assert untrusted_certificate(go) == "x509: certificate signed by unknown authority"
    assert explain_certificate("ERROR: No matching distribution found for six") is None
