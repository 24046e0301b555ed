"""Talking to the evalhub server: fetching the gate config and a dataset's cases, posting results; every
failure is a config error naming the status and the server's own message.

Every request goes through one opener, whose redirect rule keeps the bearer token with the origin it was
given for (docs/gate.md): a GET follows a redirect only within its own origin (scheme, host and port), a
redirect to another origin is refused, and a redirected POST is an error (urllib would resend it as a GET
with the token, and the results would not be posted).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from typing import IO, Any, cast

from judges.gate.messages import ConfigError, one_line
from labeling.importing.redaction import REDACT_KINDS

TOKEN_ENV = "EVALHUB_TOKEN"
HTTP_TIMEOUT_S = 30
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


_OPENER = urllib.request.build_opener(_SameOriginRedirects)


def _server_message(exc: urllib.error.HTTPError) -> str:
    """What the server said about a refusal: its "error", or its list of {"field", "message"} "errors"."""
    try:
        body = json.loads(exc.read())
        if body.get("errors"):
            return "; ".join(f"{e.get('field')}: {e.get('message')}" for e in body["errors"])
        return str(body.get("error") or "")
    except (ValueError, AttributeError, OSError, TypeError):
        return ""


def http_request(request: urllib.request.Request, what: str) -> bytes:
    """The response body, or a ConfigError naming the status and the server's own message."""
    return http_request_to(request, what, None)


def http_request_to(request: urllib.request.Request, what: str, sink: IO[bytes] | None) -> bytes:
    """The response body (streamed into `sink` when given, then b""), or a ConfigError."""
    try:
        with _OPENER.open(request, timeout=HTTP_TIMEOUT_S) as response:
            if sink is None:
                return response.read()
            shutil.copyfileobj(response, sink)
            return b""
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
                            cast(IO[bytes], _LocalFile(sink, out)))
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
