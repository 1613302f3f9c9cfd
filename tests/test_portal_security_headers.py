"""What a security review checks on every answer: a Content-Security-Policy without inline
script, HSTS over HTTPS, no MIME sniffing, a same-origin referrer; no inline script or event
handler left in any template; `manage.py check --deploy` clean under production settings."""

import re
import secrets
import sys
from pathlib import Path

import pytest
from test_portal_settings import run

ROOT = Path(__file__).resolve().parent.parent
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)


def directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    parsed = {}
    for part in policy.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


@pytest.mark.parametrize("url", ["/login/", "/api/docs/"])
def test_scripts_only_from_the_portal_itself(db, client, url):
    policy = directives(client.get(url))
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]


def test_hsts_nosniff_and_referrer_policy_over_https(db, client, settings):
    settings.SECURE_HSTS_SECONDS = 31_536_000
    response = client.get("/login/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.parametrize(
    "template", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "templates").rglob("*.html"))
)
def test_no_template_has_inline_script_or_handlers(template):
    text = (ROOT / template).read_text()
    assert not INLINE_SCRIPT.search(text), "inline <script>: move it to static/js"
    assert not INLINE_HANDLER.search(text), "inline on...= handler: use static/js/actions.js"


def test_check_deploy_is_clean_under_production_settings(tmp_path):
    result = run(
        tmp_path, [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        DEBUG="0", SECURE_COOKIES="1", SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="gpu.example.org",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
