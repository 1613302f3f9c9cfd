"""The API over HTTP with the standard library: where to find the portal and the token, and
errors turned into exceptions the commands map to exit codes."""

from __future__ import annotations

import configparser
import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

TIMEOUT = 30
# Waits before each new attempt when the connection failed (no answer at all): the request
# may or may not have reached the portal, so every POST carries an Idempotency-Key and a retry
# with the same key gets the first attempt's answer instead of doing it twice.
RETRY_WAITS = (0.5, 1.0, 2.0, 4.0)
NO_ANSWER = (TimeoutError, urllib.error.URLError, ConnectionError, http.client.HTTPException)


class UsageError(Exception):
    """Bad input or missing configuration (exit code 2)."""


class Refused(Exception):
    """The API answered with an error (exit code 1); the message is the API's."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.field = field


class Unreachable(Exception):
    """No answer from the portal (exit code 3)."""


def config_path() -> Path:
    if explicit := os.environ.get("TIMESHARE_CONFIG"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "timeshare" / "config"


def settings(url: str | None = None, token: str | None = None) -> tuple[str, str]:
    """(url, token) from the arguments, else TIMESHARE_URL / TIMESHARE_TOKEN, else the config
    file's [timeshare] section."""
    path = config_path()
    file = configparser.ConfigParser()
    if path.exists():
        try:
            file.read(path)
        except configparser.Error as error:
            raise UsageError(f"cannot read {path}: {error}") from None
    section = file["timeshare"] if file.has_section("timeshare") else {}
    url = (url or os.environ.get("TIMESHARE_URL") or section.get("url") or "").strip()
    token = (token or os.environ.get("TIMESHARE_TOKEN") or section.get("token") or "").strip()
    if not url:
        raise UsageError(
            f"no portal URL: set TIMESHARE_URL or url = ... under [timeshare] in {path}"
        )
    if not token:
        raise UsageError(
            "no API token: create one on the portal's /api/tokens/ page, then set "
            f"TIMESHARE_TOKEN or token = ... under [timeshare] in {path}"
        )
    return url.rstrip("/"), token


class Client:
    def __init__(self, url: str, token: str):
        self.url = url
        self.token = token

    def _url(self, path: str, query: dict | None = None) -> str:
        if path.startswith("http://") or path.startswith("https://"):
            return path
        full = f"{self.url}/api/{path.lstrip('/')}"
        query = {k: v for k, v in (query or {}).items() if v is not None}
        return f"{full}?{urllib.parse.urlencode(query)}" if query else full

    def request(self, method: str, path: str, query: dict | None = None, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self._url(path, query), data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if method == "POST":
            request.add_header("Idempotency-Key", str(uuid.uuid4()))
        for wait in (*RETRY_WAITS, None):
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                    payload = response.read()
                break
            except urllib.error.HTTPError as error:
                raise _refused(error) from None
            except NO_ANSWER as error:
                if wait is None:
                    reason = getattr(error, "reason", error)
                    raise Unreachable(f"cannot reach {self.url}: {reason}") from None
                time.sleep(wait)
        try:
            return json.loads(payload) if payload else None
        except ValueError:
            raise Unreachable(
                f"{self.url} did not answer JSON: is it a Timeshare portal?"
            ) from None

    def get(self, path, **query):
        return self.request("GET", path, query)

    def post(self, path, body=None):
        return self.request("POST", path, body=body if body is not None else {})

    def pages(self, path, limit: int | None = None, **query):
        """Every result of a paginated list, following `next` (at most `limit`)."""
        query.setdefault("page_size", 500 if limit is None else min(500, max(1, limit)))
        page = self.get(path, **query)
        results = list(page["results"])
        while page.get("next") and (limit is None or len(results) < limit):
            page = self.get(page["next"])
            results.extend(page["results"])
        return results if limit is None else results[:limit]


def _refused(error: urllib.error.HTTPError) -> Refused:
    try:
        body = json.loads(error.read() or b"{}")
    except ValueError:
        body = {}
    detail = body.get("detail") if isinstance(body, dict) else None
    if error.code == 401:
        detail = f"not authenticated ({detail or 'no valid token'}): check your API token"
    return Refused(error.code, detail or f"HTTP {error.code} {error.reason}",
                   body.get("field") if isinstance(body, dict) else None)
