"""Talking to the evalhub server: fetching the gate config and a dataset's cases, posting results; every
failure is a config error naming the status and the server's own message.

Every request goes through one opener, whose redirect rule keeps the bearer token with the origin it was
given for (docs/gate.md): a GET follows a redirect only within its own origin (scheme, host and port), a
redirect to another origin is refused, and a redirected POST is an error (urllib would resend it as a GET
with the token, and the results would not be posted).

Every answer read is bounded in size and in time: a body past its size bound is not read further, and a
whole exchange (connecting, the headers, the body, redirects included) past its overall deadline is cut
off, whatever pace the server keeps (a per-read timeout alone never ends a server trickling a byte a
second). The error says which bound was hit.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import socket
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from typing import IO, Any, cast

from judges.gate.messages import ConfigError, one_line
from labeling.importing.redaction import REDACT_KINDS

TOKEN_ENV = "EVALHUB_TOKEN"
HTTP_TIMEOUT_S = 30  # each connect or read
# The size bounds: a JSON answer (the gate config, a token's scopes, a posting's answer) and a dataset's cases.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
MAX_CASES_BYTES = 4 * 1024 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024  # an error's body: only its message is read
# The overall deadlines of one exchange; $EVALHUB_GATE_HTTP_DEADLINE_S (seconds) sets every one of them.
ANSWER_DEADLINE_S = 120.0
CASES_DEADLINE_S = 900.0
DEADLINE_ENV = "EVALHUB_GATE_HTTP_DEADLINE_S"
_CHUNK = 256 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A bearer token's characters (RFC 6750): all an evalhub token holds, and all an HTTP header carries safely.
_TOKEN_RE = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def checked_token(token: str | None, *, given_as: str) -> str | None:
    """The token, or a ConfigError before anything is sent: a placeholder (`evh_…`), a space or a line break
    pasted with it would otherwise fail inside the HTTP library. The message never shows the token."""
    if token is not None and not _TOKEN_RE.fullmatch(token):
        raise ConfigError(
            f"the token in {given_as} is not an API token: it holds a space, a line break or another character "
            "no token has (a placeholder such as evh_… pasted as it is?); paste the whole token the admin showed"
        )
    return token


def checked_url(url: str, *, given_as: str) -> str:
    """An http(s) URL with a host, in ASCII, with a numeric port; else a ConfigError naming the option."""
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and url.isascii() and url.isprintable()
    except ValueError:
        usable = False
    if not usable or " " in url:
        raise ConfigError(
            f"{given_as}: expected an http:// or https:// URL such as https://evalhub.example.com (ASCII, no "
            f"spaces), got {one_line(repr(url), 120)}"
        )
    return url


class _RedirectRefused(Exception):
    """A redirect the gate will not follow; the message says why (the caller says what was being done)."""


def _origin(url: str) -> str:
    """`scheme://host:port` of a URL, the default port spelt out, so equal origins compare equal."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is not a number: an origin of its own, never equal to a real one
        port = None
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """urllib copies every header, Authorization too, onto a redirect to anywhere; this refuses what
    would let the token leave its origin or lose a POST."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage, newurl: str
    ) -> urllib.request.Request | None:
        fp.close()  # the redirect's own body is never read
        if req.get_method() != "GET":
            raise _RedirectRefused(
                f"the server answered {code} (a redirect to {one_line(newurl)}); a {req.get_method()} is never "
                "redirected (give the final URL instead)"
            )
        if _origin(newurl) != _origin(req.full_url):
            raise _RedirectRefused(
                f"the server answered {code}, a redirect from {_origin(req.full_url)} to another origin, "
                f"{one_line(_origin(newurl))}: refused, the token goes only to the origin it was given for "
                "(give the final URL instead)"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Deadline:
    """An exchange's overall deadline: when it passes, the sockets the exchange opened are shut down, which
    ends any read blocked on them (the caller then says the deadline was hit)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.hit = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        _CURRENT.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _CURRENT.deadline = None

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.hit:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.hit = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown, under TLS too: it wakes a read blocked in another thread
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


_CURRENT = threading.local()  # the deadline of the exchange this thread is making


class _Watched(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        deadline = getattr(_CURRENT, "deadline", None)
        if deadline is not None and self.sock is not None:
            deadline.watch(self.sock)


class _WatchedHTTPS(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        deadline = getattr(_CURRENT, "deadline", None)
        if deadline is not None and self.sock is not None:
            deadline.watch(self.sock)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_Watched, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPS, req, context=self._context)  # type: ignore[attr-defined]


_OPENER = urllib.request.build_opener(_SameOriginRedirects, _HTTPHandler, _HTTPSHandler)


class _TooLarge(Exception):
    pass


def deadline_s(default: float) -> float:
    """The overall deadline of one exchange: $EVALHUB_GATE_HTTP_DEADLINE_S when set (a positive number of
    seconds), else `default`."""
    given = os.environ.get(DEADLINE_ENV, "").strip()
    if not given:
        return default
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 86_400:
        raise ConfigError(f"${DEADLINE_ENV}: expected a number of seconds above 0 (and below a day), got "
                          f"{one_line(repr(given), 40)}")
    return seconds


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024):,} MiB" if limit >= 1024 * 1024 else f"{limit:,} bytes"


def _read_bounded(response: http.client.HTTPResponse, limit: int, sink: IO[bytes] | None) -> bytes:
    """The body, at most `limit` bytes (into `sink` when given, then b""); _TooLarge past it."""
    length = response.headers.get("Content-Length", "")
    if length.strip().isdigit() and int(length) > limit:
        raise _TooLarge
    parts, total = [], 0
    while chunk := response.read1(_CHUNK):
        total += len(chunk)
        if total > limit:
            raise _TooLarge
        if sink is None:
            parts.append(chunk)
        else:
            sink.write(chunk)
    return b"".join(parts)


def _server_message(exc: urllib.error.HTTPError) -> str:
    """What the server said about a refusal: its "error", or its list of {"field", "message"} "errors"."""
    try:
        body = json.loads(exc.read(MAX_ERROR_BYTES))
        if body.get("errors"):
            return "; ".join(f"{e.get('field')}: {e.get('message')}" for e in body["errors"])
        return str(body.get("error") or "")
    except (ValueError, AttributeError, OSError, TypeError):
        return ""


def http_request(request: urllib.request.Request, what: str) -> bytes:
    """The response body, or a ConfigError naming the status and the server's own message."""
    return http_request_to(request, what, None)


def http_request_to(
    request: urllib.request.Request, what: str, sink: IO[bytes] | None, *, limit: int = MAX_ANSWER_BYTES,
    seconds: float = ANSWER_DEADLINE_S,
) -> bytes:
    """The response body (streamed into `sink` when given, then b""), or a ConfigError; at most `limit` bytes
    and `seconds` (or $EVALHUB_GATE_HTTP_DEADLINE_S) for the whole exchange."""
    deadline = _Deadline(deadline_s(seconds))
    try:
        with deadline:
            return _exchange(request, what, sink, limit, deadline)
    except ConfigError:
        if deadline.hit:  # whatever broke as the connection was shut, the deadline is why
            raise ConfigError(f"{what}: no whole answer within {deadline.seconds:g} s, the overall deadline (the "
                              f"server is too slow or trickling; ${DEADLINE_ENV} sets it)") from None
        raise


def _exchange(request: urllib.request.Request, what: str, sink: IO[bytes] | None, limit: int,
              deadline: _Deadline) -> bytes:
    try:
        with _OPENER.open(request, timeout=min(HTTP_TIMEOUT_S, deadline.seconds)) as response:
            body = _read_bounded(response, limit, sink)
        if deadline.hit:  # the body ended as the deadline shut the connection: it may be cut short
            raise ConfigError(what)
        return body
    except _TooLarge:
        raise ConfigError(f"{what}: the answer is larger than {_size(limit)}, the size bound of this answer: not "
                          "read further") from None
    except _RedirectRefused as exc:
        raise ConfigError(f"{what}: {exc}") from None
    except urllib.error.HTTPError as exc:
        detail = _server_message(exc)
        hint = {
            401: f"the token was not accepted (pass --token or set {TOKEN_ENV})",
            403: "the token may not do this (a scope it lacks, or another project's)",
            404: "nothing at that URL",
            413: "the request is larger than the server accepts; nothing was stored",
            503: "server unavailable (its database or broker is down); nothing was stored, try again"
                 + (f" in {retry} s" if (retry := exc.headers.get("Retry-After") if exc.headers else None) else ""),
        }.get(exc.code, "a redirect the gate does not follow" if 300 <= exc.code < 400 else "the server refused")
        message = f"{what}: HTTP {exc.code}, {hint}"
        raise ConfigError(f"{message}: {one_line(detail)}" if detail else message) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"{what}: cannot connect ({one_line(str(reason))})") from None
    except http.client.HTTPException as exc:  # a status line or a body that broke off
        raise ConfigError(f"{what}: the answer broke off ({type(exc).__name__})") from None
    except ValueError as exc:  # a URL or header urllib cannot send (checked_url catches most before)
        raise ConfigError(f"{what}: cannot send the request ({one_line(str(exc))})") from None



def post_results(url: str, token: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST the results, cases and all, gzip-compressed: the server bounds the body (sent and unpacked) and
    refuses a larger one whole."""
    request = urllib.request.Request(
        url,
        data=gzip.compress(json.dumps(payload, ensure_ascii=False).encode(), compresslevel=6, mtime=0),
        method="POST",
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip", "Accept": "application/json",
                 "Authorization": f"Bearer {token}"},
    )
    body = http_request(request, f"results not posted to {url}")
    try:
        return json.loads(body)
    except ValueError:
        return {}



def fetch_cases(
    server: str, dataset: str, *, token: str | None, filters: dict[str, str | int | None], out: str
) -> str:
    """Stream `GET /api/datasets/<slug>/cases` (a cases:read token) into a file beside `out`; its path.

    The caller checks the file and moves it into place, so a failed or refused fetch never leaves a
    half-written cases file where the pipeline expects one.
    """
    query = urllib.parse.urlencode({name: value for name, value in filters.items() if value is not None})
    url = f"{server.rstrip('/')}/api/datasets/{urllib.parse.quote(dataset, safe='')}/cases"
    url = f"{url}?{query}" if query else url
    headers = {"Accept": "application/jsonl"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    folder = os.path.dirname(os.path.abspath(out))
    try:
        fd, partial = tempfile.mkstemp(prefix=".cases-", suffix=".jsonl", dir=folder)
    except OSError as exc:
        raise ConfigError(f"writing {out}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as sink:
            http_request_to(urllib.request.Request(url, headers=headers), f"fetching the cases from {url}",
                            cast(IO[bytes], _LocalFile(sink, out)), limit=MAX_CASES_BYTES, seconds=CASES_DEADLINE_S)
    except BaseException as exc:
        os.unlink(partial)
        if isinstance(exc, OSError):  # the file's last bytes, written as it closed
            raise ConfigError(f"writing {out}: {exc.strerror or exc}; nothing was written there") from None
        raise
    return partial


class _LocalFile:
    """The file a response is streamed into: failing to write it (a full disk) is said as what it is, never as
    the server's or the network's failure ("cannot connect")."""

    def __init__(self, sink: IO[bytes], shown_as: str) -> None:
        self.sink, self.shown_as = sink, shown_as

    def write(self, data: bytes) -> int:
        try:
            return self.sink.write(data)
        except OSError as exc:
            raise ConfigError(f"writing {self.shown_as}: {exc.strerror or exc}; nothing was written there") from None


def _json_request(url: str, token: str, what: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """GET (or, with a payload, POST) JSON with the bearer token; the response's JSON object."""
    headers = {"Accept": "application/json", "Authorization": f"Bearer {token}"}
    data = None
    if payload is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode()
    body = http_request(urllib.request.Request(url, data=data, method="POST" if data else "GET", headers=headers),
                        what)
    try:
        answer = json.loads(body)
    except ValueError:
        raise ConfigError(f"{what}: the server's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise ConfigError(f"{what}: the server's answer is not a JSON object")
    return answer


def token_scopes(server: str, token: str) -> list[str]:
    """The scopes the server says the token carries (GET /api/token)."""
    answer = _json_request(f"{server.rstrip('/')}/api/token", token, f"asking {server} about the token")
    scopes = answer.get("scopes")
    if not isinstance(scopes, list):
        raise ConfigError(f"asking {server} about the token: the answer lists no scopes")
    return [str(scope) for scope in scopes]


def ci_runs_url(server: str, dataset: str) -> str:
    return f"{server.rstrip('/')}/api/datasets/{urllib.parse.quote(dataset, safe='')}/ci-runs"


def post_case_chunk(server: str, dataset: str, token: str, chunk: dict[str, Any], what: str) -> dict[str, Any]:
    """POST one chunk of judged cases (POST /api/datasets/<slug>/ci-runs): written whole or not at all."""
    return _json_request(ci_runs_url(server, dataset), token, what, chunk)


def fetch_ci_verdicts(server: str, dataset: str, token: str, *, ref: str, config_hash: str) -> dict[str, str] | None:
    """{external_id: verdict} of the CI run that posted `ref` with this config, or None when none did."""
    query = urllib.parse.urlencode({"ref": ref, "config_hash": config_hash})
    answer = _json_request(f"{ci_runs_url(server, dataset)}?{query}", token,
                           f"reading the CI run of {one_line(ref, 80)} from {server}")
    if answer.get("run") is None:
        return None
    cases = answer.get("cases")
    if not isinstance(cases, dict):
        raise ConfigError(f"reading the CI run of {one_line(ref, 80)}: the answer lists no cases")
    return {str(k): str(v) for k, v in cases.items()}


def fetch_redaction(server: str, dataset: str, *, token: str | None) -> tuple[str, ...]:
    """What the dataset redacts from incoming cases (`GET /api/datasets/<slug>`, a cases:read or cases:write
    token): the kinds to redact with before judging cases that will be posted to it.

    A kind this command does not know is a config error: judging unredacted text the server would refuse to
    store is worse than stopping.
    """
    url = f"{server.rstrip('/')}/api/datasets/{urllib.parse.quote(dataset, safe='')}"
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    what = f"reading the redaction of dataset {one_line(dataset, 80)} from {url}"
    body = http_request(urllib.request.Request(url, headers=headers), what)
    try:
        kinds = json.loads(body)["redact"]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"{what}: the answer is not a dataset (no \"redact\" list)") from None
    if not isinstance(kinds, list) or not all(isinstance(kind, str) for kind in kinds):
        raise ConfigError(f"{what}: \"redact\" is not a list of kinds")
    unknown = [kind for kind in kinds if kind not in REDACT_KINDS]
    if unknown:
        raise ConfigError(f"{what}: this evalhub-gate cannot redact {', '.join(one_line(k, 40) for k in unknown)} "
                          f"(it knows {', '.join(REDACT_KINDS)}): upgrade it")
    return tuple(kinds)
