"""Talking to the evalhub server: one HTTP helper that turns every failure into a config error."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from judges.gate.messages import ConfigError, one_line

TOKEN_ENV = "EVALHUB_TOKEN"
HTTP_TIMEOUT_S = 30


def http_request(request: urllib.request.Request, what: str) -> bytes:
    """The response body, or a ConfigError naming the status and the server's own message."""
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        detail = ""
        try:
            detail = str(json.loads(exc.read()).get("error") or "")
        except (ValueError, AttributeError, OSError):
            pass
        hint = {
            401: f"the token was not accepted (pass --token or set {TOKEN_ENV})",
            403: "the token lacks the scope this needs",
            404: "nothing at that URL",
        }.get(exc.code, "the server refused")
        message = f"{what}: HTTP {exc.code}, {hint}"
        raise ConfigError(f"{message}: {one_line(detail)}" if detail else message) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"{what}: cannot connect ({one_line(str(reason))})") from None



def post_results(url: str, token: str, payload: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Bearer {token}"},
    )
    body = http_request(request, f"posting the results to {url}")
    try:
        return json.loads(body)
    except ValueError:
        return {}

