"""A scripted stand-in for the few endpoints `--comment` calls, over real HTTP on 127.0.0.1, recording every
request: GitHub's REST issue comments (list, create, update) and GitLab's merge request notes (the token's user,
list, create, update). Not GitHub or GitLab: it keeps comments in memory and answers in their shapes.

    forge.fault = 403            # the next calls answer 403 (500, …) until set back to None
    forge.fault_methods = {"POST", "PATCH"}   # only these methods fail (default: all)
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GITHUB_TOKEN = "ghs_stand_in_token"
GITLAB_TOKEN = "glpat-stand-in-token"
GITLAB_USER = {"id": 77, "username": "project_1_bot", "bot": True}

_GH_LIST = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_GH_ONE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")
_GL_NOTES = re.compile(r"^/api/v4/projects/(\d+)/merge_requests/(\d+)/notes$")
_GL_ONE = re.compile(r"^/api/v4/projects/(\d+)/merge_requests/(\d+)/notes/(\d+)$")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Forge:
    """State: comments by (repository or project, number), every request seen, and a fault to answer with."""

    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    fault: int | None = None
    fault_methods: set[str] | None = None
    next_id: int = 1000
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def add(self, where: tuple[str, int], body: str, **author: Any) -> dict[str, Any]:
        with self.lock:
            self.next_id += 1
            comment = {"id": self.next_id, "body": body, **author}
            self.comments.setdefault(where, []).append(comment)
            return comment

    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in ("POST", "PATCH", "PUT")]


def _handler(forge: Forge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            forge.requests.append(Recorded(self.command, parts.path, parse_qs(parts.query),
                                           {k.lower(): v for k, v in self.headers.items()}, body))
            if forge.fault and (forge.fault_methods is None or self.command in forge.fault_methods):
                return self._answer(forge.fault, {"message": "scripted fault"})
            if parts.path.startswith("/api/v4/"):
                return self._gitlab(parts.path, parse_qs(parts.query), body)
            return self._github(parts.path, parse_qs(parts.query), body)

        def _github(self, path: str, query: dict[str, list[str]], body: Any) -> None:
            if self.headers.get("Authorization") != f"Bearer {GITHUB_TOKEN}":
                return self._answer(401, {"message": "Bad credentials"})
            if match := _GH_LIST.match(path):
                where = (match.group(1), int(match.group(2)))
                if self.command == "GET":
                    return self._page(forge.comments.get(where, []), query)
                if self.command == "POST":
                    return self._answer(201, forge.add(where, body["body"], user={"login": "github-actions[bot]",
                                                                                   "type": "Bot"}))
            if (match := _GH_ONE.match(path)) and self.command == "PATCH":
                return self._update(int(match.group(2)), body)
            return self._answer(404, {"message": "Not Found"})

        def _gitlab(self, path: str, query: dict[str, list[str]], body: Any) -> None:
            if self.headers.get("PRIVATE-TOKEN") != GITLAB_TOKEN:
                return self._answer(401, {"message": "401 Unauthorized"})
            if path == "/api/v4/user" and self.command == "GET":
                return self._answer(200, GITLAB_USER)
            if match := _GL_NOTES.match(path):
                where = (match.group(1), int(match.group(2)))
                if self.command == "GET":
                    return self._page(forge.comments.get(where, []), query)
                if self.command == "POST":
                    return self._answer(201, forge.add(where, body["body"], author=GITLAB_USER))
            if (match := _GL_ONE.match(path)) and self.command == "PUT":
                return self._update(int(match.group(3)), body)
            return self._answer(404, {"message": "404 Not found"})

        def _page(self, items: list[dict[str, Any]], query: dict[str, list[str]]) -> None:
            size, page = int(query.get("per_page", ["30"])[0]), int(query.get("page", ["1"])[0])
            return self._answer(200, items[(page - 1) * size : page * size])

        def _update(self, comment_id: int, body: Any) -> None:
            for comments in forge.comments.values():
                for comment in comments:
                    if comment["id"] == comment_id:
                        comment["body"] = body["body"]
                        return self._answer(200, comment)
            return self._answer(404, {"message": "Not Found"})

        do_GET = do_POST = do_PATCH = do_PUT = _handle

    return Handler


class ForgeServer:
    """The stand-in on a free port in a thread of the test process."""

    def __enter__(self) -> Forge:
        self.forge = Forge()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.forge))
        self.forge.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.forge

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
