"""Settings of the guarded-writes project: SQLite in a scratch directory, or a PostgreSQL schema."""

import os
from pathlib import Path
from typing import Any

SECRET_KEY = "test-only-not-secret"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "ledger"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_POSTGRES_SCHEMA = os.environ.get("FIREFLY_FENCING_PG_SCHEMA")
DATABASES: dict[str, dict[str, Any]]
if _POSTGRES_SCHEMA:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": os.environ["FIREFLY_FENCING_PG_HOST"],
            "PORT": os.environ["FIREFLY_FENCING_PG_PORT"],
            "NAME": os.environ["FIREFLY_FENCING_PG_DATABASE"],
            "USER": os.environ["FIREFLY_FENCING_PG_USER"],
            "OPTIONS": {"options": f"-c search_path={_POSTGRES_SCHEMA}"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": Path(os.environ["FIREFLY_FENCING_SQLITE"]),
        }
    }
