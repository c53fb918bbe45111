"""The console's own login (``samsa ui --login-file``): users from a file, sessions as random
tokens kept in memory, and the middleware that sends a browser without one to the form."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

#: the session cookie of a console started with a login file
SESSION_COOKIE = "samsa_console_session"


def read_login_file(path: Path) -> dict[str, str]:
    """``user:password`` lines (blank lines and ``#`` comments ignored) -> user -> password."""
    users: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user.strip() or not password:
            raise ValueError(f"{path}:{number}: expected user:password")
        users[user.strip()] = password
    if not users:
        raise ValueError(f"{path}: no user:password line")
    return users


class Sessions:
    """Logged-in browsers: random tokens, kept in memory only (a restart logs everyone out)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = dict(users)
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()

    def login(self, user: str, password: str) -> str | None:
        expected = self._users.get(user)
        # compare even for an unknown user, so the time taken does not tell users apart
        ok = secrets.compare_digest((expected or "\0").encode(), password.encode())
        if expected is None or not ok:
            return None
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._tokens[token] = user
        return token

    def user(self, token: str | None) -> str | None:
        if not token:
            return None
        with self._lock:
            return self._tokens.get(token)

    def logout(self, token: str | None) -> None:
        with self._lock:
            self._tokens.pop(token or "", None)


class LoginRequired:
    """ASGI middleware: without a session, a page answers with a redirect to the login form
    (an API call with 401); /login and /static stay open."""

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        path = request.url.path
        user = self.sessions.user(request.cookies.get(SESSION_COOKIE))
        scope.setdefault("state", {})["user"] = user
        if user is not None or path == "/login" or path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        response: Response
        if path.startswith("/api/"):
            response = JSONResponse({"error": "login required"}, status_code=401)
        else:
            target = path + (f"?{request.url.query}" if request.url.query else "")
            response = RedirectResponse(f"/login?{urlencode({'next': target})}", 303)
        await response(scope, receive, send)
