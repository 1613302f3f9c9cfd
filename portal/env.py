"""Settings come from the environment only; a bad value stops the process with one line.

Whatever loads the settings (manage.py, gunicorn, the Celery worker, pytest) exits with
``timeshare: bad setting: ...`` instead of a traceback.
"""

import os
from pathlib import Path

import dj_database_url


class BadSetting(SystemExit):
    def __init__(self, message: str):
        super().__init__(f"timeshare: bad setting: {message}")

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise BadSetting(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadSetting(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise BadSetting(f"{name}={raw!r} must be at least {minimum}")
    return value


def database(default_path: Path) -> dict:
    raw = os.environ.get("DATABASE_URL") or f"sqlite:///{default_path}"
    try:
        config = dj_database_url.parse(raw, conn_max_age=60)
    except Exception as error:  # dj_database_url raises several types for a bad URL
        raise BadSetting(f"DATABASE_URL is not a usable database URL: {error}") from None
    if config.get("ENGINE") not in {
        "django.db.backends.postgresql",
        "django.db.backends.sqlite3",
    }:
        raise BadSetting("DATABASE_URL must be a postgres:// or sqlite:// URL")
    if config["ENGINE"].endswith("sqlite3"):
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
        config["CONN_MAX_AGE"] = 0
    return config


def broker_url() -> str:
    name = "CELERY_BROKER_URL" if os.environ.get("CELERY_BROKER_URL") else "REDIS_URL"
    raw = os.environ.get(name)
    if not raw:
        return "filesystem://"
    if not raw.startswith(("redis://", "rediss://", "amqp://", "filesystem://", "memory://")):
        raise BadSetting(
            f"{name}={raw!r} must start with redis://, rediss://, amqp:// or filesystem://"
        )
    return raw


def result_backend(broker: str, results_dir: Path) -> str:
    """Where task results go (only the tasks that keep one: a sweep's points and its chord):
    CELERY_RESULT_BACKEND, else the Redis of a Redis broker, else files beside the filesystem
    broker (one machine, like that broker)."""
    raw = os.environ.get("CELERY_RESULT_BACKEND")
    if raw:
        if not raw.startswith(("redis://", "rediss://", "file://")):
            raise BadSetting(
                f"CELERY_RESULT_BACKEND={raw!r} must start with redis://, rediss:// or file://")
        return raw
    if broker.startswith(("redis://", "rediss://")):
        return broker
    results_dir.mkdir(parents=True, exist_ok=True)
    return f"file://{results_dir}"


def cache(cache_dir: Path) -> dict:
    raw = os.environ.get("CACHE_URL")
    if not raw:
        return {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(cache_dir),
        }
    if not raw.startswith(("redis://", "rediss://")):
        raise BadSetting(f"CACHE_URL={raw!r} must start with redis:// or rediss://")
    return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": raw}


def secret_key(var_dir: Path) -> str:
    """An explicit SECRET_KEY wins; otherwise a random key is made once and kept under var/."""
    raw = os.environ.get("SECRET_KEY")
    if raw is not None:
        if len(raw) < 32:
            raise BadSetting("SECRET_KEY must be at least 32 characters long")
        return raw
    key_file = var_dir / "secret_key"
    if not key_file.exists():
        from django.core.management.utils import get_random_secret_key

        var_dir.mkdir(parents=True, exist_ok=True)
        key_file.write_text(get_random_secret_key())
        key_file.chmod(0o600)
    return key_file.read_text().strip()


def plotly_package_data() -> str:
    import plotly

    return str(Path(plotly.__file__).parent / "package_data")
