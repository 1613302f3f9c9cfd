"""Timeshare settings: everything comes from the environment, with safe defaults.

DATABASE_URL       default: SQLite file under var/
CELERY_BROKER_URL  (or REDIS_URL) default: kombu's filesystem transport under var/celery
CELERY_RESULT_BACKEND  default: the Redis broker's Redis, else files under var/celery/results
SECRET_KEY         default: a random key generated once into var/secret_key
DEBUG              default: off
ALLOWED_HOSTS      default: localhost, 127.0.0.1
TIMESHARE_VAR_DIR  default: var/ in the project root
PROMETHEUS_URL     default: none (the Prometheus that scrapes the fleet's DCGM exporters)
EMAIL_HOST         default: none, emails are written as files under var/mail (see README)
"""

import os
from datetime import timedelta
from pathlib import Path

from celery.schedules import crontab

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
    "django_filters",
    "csp",
    "axes",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal",
    "common",
    "fleet",
    "budgets",
    "scheduler",
    "notifications",
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
    "portal.time_zones.TimeZoneMiddleware",
    "common.idempotency.IdempotencyMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a lockout flagged during the view into its answer.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username
# from one address, that pair is locked out for LOGIN_LOCKOUT_MINUTES, even with the right
# password; a success resets the count. Failed API tokens count per address
# (portal.api.authentication). The address is REMOTE_ADDR: behind a proxy, make the proxy
# set it (gunicorn's --forwarded-allow-ips) rather than trusting X-Forwarded-For here.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env.env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "portal.views.locked_out"
AXES_VERBOSE = False

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
                "portal.context_processors.notifications",
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
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Secure cookies mean the portal is served over HTTPS: browsers are told to keep to it.
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if SESSION_COOKIE_SECURE else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env.env_bool("SECURE_SSL_REDIRECT", False)
SILENCED_SYSTEM_CHECKS = [
    # TLS ends at the proxy in front of gunicorn, which redirects http to https itself (the
    # containers' health checks speak plain http inside); SECURE_SSL_REDIRECT=1 if gunicorn
    # faces the network directly.
    "security.W008",
    # HSTS preloading is a commitment the owner of the domain makes at hstspreload.org, not a
    # default a package can make for them.
    "security.W021",
]

# Content-Security-Policy (django-csp): scripts only from the portal's own static files (no
# inline script, no eval; htmx's and the pages' configuration live in static/js). Styles may
# be inline: plotly.js styles its charts with style elements, and the tree tables indent rows
# with a style attribute.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# The API (/api/): API tokens (portal.models.ApiToken, sent as "Authorization: Bearer ...")
# for scripts and the CLI, the session for the browser; the portal's permission rules.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "common.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
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
        "BudgetNodeKindEnum": "budgets.models.BudgetNode.Kind",
        "ChangeRequestKindEnum": "budgets.models.ChangeRequest.Kind",
        "RequestEntryKindEnum": "budgets.models.RequestEntry.Kind",
        "EventKindEnum": "scheduler.models.Event.Kind",
        "HostEventKindEnum": "fleet.models.HostEvent.Kind",
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
# Only the tasks that need a result keep one (a sweep's points, for its chord).
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = env.result_backend(CELERY_BROKER_URL, VAR_DIR / "celery" / "results")
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TASK_ALWAYS_EAGER = env.env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# The live loop: every cluster ticks every TIMESHARE_TICK_SECONDS (submit and cancel also
# ask for a tick at once). Each cluster's pass_interval must equal it (Cluster.clean): the
# simulator runs its passes at that cadence to decide what the loop decides.
TIMESHARE_TICK_SECONDS = env.env_int("TIMESHARE_TICK_SECONDS", 5, minimum=1)
# The review report of the week just ended is mailed on this weekday (mon..sun, or 0 = Sunday
# ... 6) at this hour (TIME_ZONE), by the beat (reports.delivery).
REVIEW_REPORT_DAY = os.environ.get("TIMESHARE_REVIEW_REPORT_DAY", "mon")
REVIEW_REPORT_HOUR = env.env_int("TIMESHARE_REVIEW_REPORT_HOUR", 7)
CELERY_BEAT_SCHEDULE = {
    "tick-all-clusters": {
        "task": "scheduler.tick_all",
        "schedule": float(TIMESHARE_TICK_SECONDS),
        "options": {"expires": 30},
    },
    "collect-utilization": {
        "task": "scheduler.collect_utilization",
        "schedule": float(env.env_int("TIMESHARE_TELEMETRY_SECONDS", 60, minimum=1)),
        "options": {"expires": 120},
    },
    "send-review-reports": {
        "task": "reports.send_review_reports",
        "schedule": crontab(minute=0, hour=REVIEW_REPORT_HOUR, day_of_week=REVIEW_REPORT_DAY),
    },
    "purge-idempotency-keys": {
        "task": "common.purge_idempotency_keys",
        "schedule": 3600.0,
    },
    "compact-occupancy-samples": {
        "task": "scheduler.compact_samples",
        "schedule": 3600.0,
    },
    "daily-notification-digests": {
        "task": "notifications.send_digests",
        "schedule": 86400.0,
    },
    "warn-expiring-allocations": {
        "task": "notifications.warn_expiring_allocations",
        "schedule": 3600.0,
    },
    "run-review-cycles": {
        "task": "budgets.run_review_cycles",
        "schedule": 600.0,
        "options": {"expires": 300},
    },
    "apply-share-changes": {  # ends of boosts, on the minute
        "task": "budgets.apply_share_changes",
        "schedule": 60.0,
        "options": {"expires": 50},
    },
}

# Email (notifications): SMTP when EMAIL_HOST is set (production), otherwise one file per
# message under var/mail, so `make run` shows what would have been sent.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env.env_int("EMAIL_PORT", 587, minimum=1)
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env.env_bool("EMAIL_USE_TLS", True)
    EMAIL_TIMEOUT = env.env_int("EMAIL_TIMEOUT", 20, minimum=1)
else:
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = str(VAR_DIR / "mail")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "Timeshare <timeshare@localhost>")
# Links in emails start here.
TIMESHARE_BASE_URL = os.environ.get("TIMESHARE_BASE_URL", "http://127.0.0.1:8000")

# GPU telemetry (fleet/telemetry): the Prometheus server that scrapes the DCGM exporters, and
# the step of the busy fractions read from it.
PROMETHEUS_URL = os.environ.get("PROMETHEUS_URL", "")
TELEMETRY_STEP_SECONDS = env.env_int("TIMESHARE_TELEMETRY_STEP", 60, minimum=1)
if 3600 % TELEMETRY_STEP_SECONDS:  # steps must not straddle the hourly rollups
    raise env.BadSetting("TIMESHARE_TELEMETRY_STEP must divide an hour (3600 s), e.g. 15 or 60")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
