"""Settings of the test project; the test passes a scratch directory in the environment."""

import os
from pathlib import Path

SCRATCH = Path(os.environ["FIREFLY_DJANGO_TEST_DIR"])
SECRET_KEY = "test-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
ROOT_URLCONF = "shop_site.urls"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "firefly_scheduling.contrib.django",
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": SCRATCH / "django.db"}}
FIREFLY_SCHEDULING = {
    "LOCK_PROVIDER": os.environ.get("FIREFLY_DJANGO_TEST_PROVIDER", "database"),
    "LOCK_DATABASE_URL": f"sqlite:///{SCRATCH / 'locks.db'}",
    "HISTORY_URL": f"sqlite:///{SCRATCH / 'locks.db'}",
    "NODE": "django-node",
    "LOCK_REQUIRED": True,
}
