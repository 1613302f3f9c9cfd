"""Settings come strictly from the environment: safe defaults, and a bad value stops the
process with one readable line (no traceback), whatever starts it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "CELERY_RESULT_BACKEND",
             "CACHE_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "SECURE_COOKIES",
             "TIMESHARE_VAR_DIR",
             "LOGIN_FAILURE_LIMIT", "LOGIN_LOCKOUT_MINUTES", "SECURE_SSL_REDIRECT")
PRINT_SETTINGS = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'debug': s.DEBUG, 'secure': s.SESSION_COOKIE_SECURE, "
    "'engine': s.DATABASES['default']['ENGINE'], 'broker': s.CELERY_BROKER_URL, "
    "'key': s.SECRET_KEY, 'hosts': s.ALLOWED_HOSTS, 'cache': s.CACHES['default']['BACKEND'], "
    "'results': s.CELERY_RESULT_BACKEND}))"
)


def run(tmp_path, command, **env):
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    clean.update(TIMESHARE_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="portal.settings")
    clean.update(env)
    return subprocess.run(command, cwd=ROOT, env=clean, capture_output=True, text=True,
                          timeout=60)


def settings_with(tmp_path, **env):
    result = run(tmp_path, [sys.executable, "-c", PRINT_SETTINGS], **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_defaults_are_safe_and_need_no_server(tmp_path):
    values = settings_with(tmp_path)
    assert values["debug"] is False
    assert values["secure"] is True
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["broker"] == "filesystem://"
    assert values["results"] == f"file://{tmp_path / 'celery' / 'results'}"
    assert values["hosts"] == ["localhost", "127.0.0.1", "[::1]"]
    assert values["cache"].endswith("FileBasedCache")


def test_a_generated_secret_key_is_kept_private_and_reused(tmp_path):
    first = settings_with(tmp_path)["key"]
    second = settings_with(tmp_path)["key"]
    key_file = tmp_path / "secret_key"
    assert first == second == key_file.read_text().strip()
    assert len(first) >= 50
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_production_values_come_from_the_environment(tmp_path):
    values = settings_with(
        tmp_path, DATABASE_URL="postgres://u:p@db.example:5432/ts", DEBUG="yes",
        CELERY_BROKER_URL="redis://cache:6379/0", CACHE_URL="redis://cache:6379/1",
        SECRET_KEY="x" * 40, ALLOWED_HOSTS="gpu.example.org, portal",
    )
    assert values["debug"] is True
    assert values["secure"] is False  # follows DEBUG unless SECURE_COOKIES says otherwise
    assert values["engine"] == "django.db.backends.postgresql"
    assert values["broker"] == "redis://cache:6379/0"
    assert values["results"] == "redis://cache:6379/0"  # the broker's Redis keeps the results
    assert values["key"] == "x" * 40
    assert values["hosts"] == ["gpu.example.org", "portal"]
    assert values["cache"].endswith("RedisCache")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "maybe"),
        ("SECURE_COOKIES", "2"),
        ("DATABASE_URL", "mysql://root@localhost/ts"),
        ("DATABASE_URL", "postgres://u:p@host:notaport/ts"),
        ("CELERY_BROKER_URL", "ftp://broker"),
        ("REDIS_URL", "localhost:6379"),
        ("CACHE_URL", "memcached://cache:11211"),
        ("CELERY_RESULT_BACKEND", "rpc://"),
        ("SECRET_KEY", "too-short"),
        ("TIMESHARE_TELEMETRY_STEP", "7"),
        ("TIMESHARE_TELEMETRY_STEP", "often"),
        ("LOGIN_FAILURE_LIMIT", "0"),
        ("LOGIN_LOCKOUT_MINUTES", "soon"),
        ("SECURE_SSL_REDIRECT", "2"),
    ],
)
def test_a_bad_value_stops_manage_py_with_one_line(tmp_path, variable, value):
    result = run(tmp_path, [sys.executable, "manage.py", "check"], **{variable: value})
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("timeshare: bad setting: ")
    assert variable in lines[0]


def test_a_bad_value_stops_the_celery_worker_with_one_line(tmp_path):
    celery = Path(sys.executable).with_name("celery")
    result = run(tmp_path, [str(celery), "-A", "portal", "inspect", "ping"], DEBUG="maybe")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "timeshare: bad setting: DEBUG='maybe' is not a boolean (use 1/0, true/false, yes/no)"
    ]
