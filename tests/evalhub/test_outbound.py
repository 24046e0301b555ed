"""evalhub/outbound.py: a project's address is http(s), public unless the instance allows private ones, and the
request goes to the address that was checked."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from evalhub import outbound


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://localhost/x",
        "http://10.0.0.5/x",
        "http://192.168.1.1/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
    ],
)
def test_private_loopback_link_local_and_reserved_addresses_are_refused(settings, url):
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = False
    with pytest.raises(outbound.OutboundRefused, match="private, loopback or reserved"):
        outbound.checked_address(url)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://example.com/x", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http:///x", "names no host"),
        ("https://user:pw@example.com/x", "user name or password"),
        ("https://no-such-host.invalid/x", "cannot be resolved"),
    ],
)
def test_addresses_that_are_not_plain_http_are_refused_with_a_reason(settings, url, words):
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = True
    with pytest.raises(outbound.OutboundRefused, match=words):
        outbound.checked_address(url)


def test_a_public_address_passes():
    assert outbound._allowed(__import__("ipaddress").ip_address("93.184.215.14"))
    assert not outbound._allowed(__import__("ipaddress").ip_address("::ffff:10.1.2.3"))


class _Receiver(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, bytes]] = []

    def do_POST(self):  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.seen.append((self.path, self.headers["Host"], body))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.end_headers()
            return
        self.send_response(202)
        self.end_headers()
        self.wfile.write(b"x" * (outbound.MAX_ANSWER_BYTES + 10))

    def log_message(self, *args):
        pass


def test_with_private_allowed_it_posts_keeps_the_host_header_and_follows_no_redirect(settings):
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = True
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        answer = outbound.post(f"http://localhost:{port}/hook?a=1", b'{"x": 1}', {"Content-Type": "application/json"})
        assert answer.status == 202
        assert len(answer.body) == outbound.MAX_ANSWER_BYTES
        assert _Receiver.seen[-1] == ("/hook?a=1", f"localhost:{port}", b'{"x": 1}')
        assert outbound.post(f"http://127.0.0.1:{port}/redirect", b"", {}).status == 302
    finally:
        server.shutdown()
