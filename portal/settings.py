"""Timeshare settings: everything comes from the environment, with safe defaults.

DATABASE_URL       default: SQLite file under var/
CELERY_BROKER_URL  (or REDIS_URL) default: kombu's filesystem transport under var/celery
SECRET_KEY         default: a random key generated once into var/secret_key
DEBUG              default: off
ALLOWED_HOSTS      default: localhost, 127.0.0.1
TIMESHARE_VAR_DIR  default: var/ in the project root
"""

import os
from pathlib import Path

from portal import env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TIMESHARE_VAR_DIR") or BASE_DIR / "var")

DEBUG = env.env_bool("DEBUG", False)
SECRET_KEY = env.secret_key(VAR_DIR)
ALLOWED_HOSTS = env.env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal",
    "fleet",
    "budgets",
    "scheduler",
    "reports",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "portal.middleware.RejectNulCharactersMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.navigation",
            ],
        },
    },
]

DATABASES = {"default": env.database(VAR_DIR / "timeshare.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # plotly.js comes from the plotly package itself, so the browser and Python figures agree.
    ("plotly", Path(env.plotly_package_data())),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE = env.env_bool("SECURE_COOKIES", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# The API (/api/): API tokens (portal.models.ApiToken, sent as "Authorization: Bearer ...")
# for scripts and the CLI, the session for the browser; the portal's permission rules.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "common.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "common.api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Timeshare API",
    "DESCRIPTION": "GPU-time budgets, fair-share scheduling and the fleet. Authenticate with "
    "`Authorization: Bearer <token>` (create one on /api/tokens/) or the portal's session. "
    "Errors are JSON: `detail` (the message), `field` (the input it is about, if any).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStateEnum": "scheduler.models.Workload.State",
        "HostStateEnum": "fleet.models.Host.State",
        "ChangeRequestStateEnum": "budgets.models.ChangeRequest.State",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "common.api.schema.add_error_responses",
    ],
}

# The cache carries what the worker tells the portal (e.g. the last tick's duration), so it
# must be shared between processes: files under var/ by default, Redis with CACHE_URL.
CACHES = {"default": env.cache(VAR_DIR / "cache")}

CELERY_BROKER_URL = env.broker_url()
if CELERY_BROKER_URL == "filesystem://":
    _queue_dir = VAR_DIR / "celery" / "queue"
    _control_dir = VAR_DIR / "celery" / "control"
    for _folder in (_queue_dir, _control_dir):
        _folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT = "portal.broker:Transport"  # atomic message files
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "control_folder": str(_control_dir),
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TASK_ALWAYS_EAGER = env.env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# The live loop: every cluster ticks every TIMESHARE_TICK_SECONDS (submit and cancel also
# ask for a tick at once). Each cluster's pass_interval must equal it (Cluster.clean): the
# simulator runs its passes at that cadence to decide what the loop decides.
TIMESHARE_TICK_SECONDS = env.env_int("TIMESHARE_TICK_SECONDS", 5, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "tick-all-clusters": {
        "task": "scheduler.tick_all",
        "schedule": float(TIMESHARE_TICK_SECONDS),
        "options": {"expires": 30},
    },
    "compact-occupancy-samples": {
        "task": "scheduler.compact_samples",
        "schedule": 3600.0,
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
