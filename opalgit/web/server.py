"""The HTTP server of ``opal web``: loopback only, a token on every request, read-only.

The standard library's threading HTTP server is enough: one user, a handful of
requests per page, JSON and three static files. A request is let in when it carries
the token (the ``?token=`` of the printed URL, which the first page load trades for
a cookie, or an ``Authorization: token T`` header) and names this server as its Host
(so a page on another site cannot reach it by DNS rebinding). Everything else is 403.
Every response forbids loading anything from anywhere but this server (the
Content-Security-Policy), so no request a page makes can leave 127.0.0.1.
"""

from __future__ import annotations

import hmac
import json
import mimetypes
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from opalgit.errors import OpalError
from opalgit.store.repo import Repository

HOST = "127.0.0.1"

#: The page may load its own scripts, styles, images and JSON, and nothing else:
#: no inline script, no frame, no form sent elsewhere.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

STATIC = ("index.html", "app.js", "app.css", "favicon.svg")


def _static(name: str) -> bytes:
    return resources.files("opalgit.web").joinpath("static", name).read_bytes()


class WebServer(ThreadingHTTPServer):
    """``opal web``'s server for the repository at ``git_dir``."""

    daemon_threads = True  # a stuck browser connection does not keep Ctrl-C from ending it
    allow_reuse_address = True

    def __init__(self, git_dir: str, port: int = 0, *, token: str | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.git_dir = git_dir
        self.token = token or secrets.token_urlsafe(24)
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        # pygit2 repositories are not shared between threads: each request opens its own,
        # and requests that read the repository take turns (one user; correctness first).
        self.lock = threading.Lock()
        super().__init__((HOST, port), _Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/?token={self.token}"

    @property
    def cookie(self) -> str:
        return f"opal-web-{self.port}"

    def open_repo(self) -> Repository:
        return Repository(self.git_dir)


class _Handler(BaseHTTPRequestHandler):
    server: WebServer
    protocol_version = "HTTP/1.1"
    server_version = "opal-web"
    sys_version = ""

    def log_message(self, format: str, *args) -> None:
        pass  # a line per request would bury what matters; refusals and failures are said below

    # ------------------------------------------------------------------ the gate
    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").lower()
        return host in (f"127.0.0.1:{self.server.port}", f"localhost:{self.server.port}")

    def _token_ok(self, query: dict[str, list[str]]) -> bool:
        want = self.server.token.encode()
        given: list[str] = list(query.get("token", []))
        auth = self.headers.get("Authorization") or ""
        if auth.lower().startswith("token "):
            given.append(auth[6:].strip())
        for part in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.server.cookie:
                given.append(value)
        return any(hmac.compare_digest(g.encode(), want) for g in given)

    def _refuse(self, why: str) -> None:
        self.server.log(f"opal web: refused {self.command} {urlsplit(self.path).path} from "
                        f"{self.client_address[0]}: {why}")
        self._send(403, b"403 Forbidden: " + why.encode() + b"\nOpen the URL opal web printed.\n",
                   "text/plain; charset=utf-8")

    # ------------------------------------------------------------------ requests
    def do_HEAD(self) -> None:  # http.server calls do_<METHOD>
        self._send(405, b"", "text/plain")

    def do_POST(self) -> None:
        self._send(405, b"405: opal web is read-only; every action is shown as the command to run\n",
                   "text/plain; charset=utf-8")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        if not self._host_ok():
            return self._refuse("the Host header does not name this server")
        if not self._token_ok(query):
            return self._refuse("no valid token")
        if url.path == "/" and "token" in query:
            # Trade the token in the URL for a cookie, and take it out of the address bar
            # (and of the history a screen share shows).
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Set-Cookie", f"{self.server.cookie}={self.server.token}; Path=/; HttpOnly; "
                                           "SameSite=Strict")
            self._common_headers()
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path == "/":
            return self._send_static("index.html")
        if url.path.startswith("/static/") and url.path[8:] in STATIC:
            return self._send_static(url.path[8:])
        if url.path.startswith("/api/"):
            return self._api(url.path[5:], {k: v[-1] for k, v in query.items()})
        self._send(404, b"404 Not Found\n", "text/plain; charset=utf-8")

    def _api(self, name: str, params: dict[str, str]) -> None:
        from opalgit.web.api import ENDPOINTS

        fn = ENDPOINTS.get(name)
        if fn is None:
            return self._json(404, {"error": f"no such endpoint: /api/{name}"})
        try:
            with self.server.lock:
                body = fn(self.server.open_repo(), params)
        except OpalError as e:
            return self._json(400, {"error": str(e), "hint": getattr(e, "hint", None)})
        except Exception as e:  # a page must say what went wrong, and the terminal too
            self.server.log(f"opal web: /api/{name} failed: {type(e).__name__}: {e}")
            return self._json(500, {"error": f"{type(e).__name__}: {e}",
                                    "hint": "this is a bug in opal web; the terminal running it has the line"})
        self._json(200, body)

    # ------------------------------------------------------------------ responses
    def _common_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self._common_headers()
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_static(self, name: str) -> None:
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "image/svg+xml"):
            ctype += "; charset=utf-8"
        self._send(200, _static(name), ctype)

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        self._send(status, data, "application/json; charset=utf-8")
