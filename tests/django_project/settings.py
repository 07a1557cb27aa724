"""A small Django project whose tasks run on Headgate (tests/contrib/test_django.py).

HEADGATE_DJANGO_DATABASE names its database: a SQLAlchemy URL, sqlite:///path
or postgresql+psycopg://...?options=-csearch_path=schema. The `default` task
backend keeps its store in that database; `elsewhere` keeps it in the SQLite
file HEADGATE_DJANGO_ELSEWHERE, another database; `children` runs its tasks
in child processes.
"""

from __future__ import annotations

import os

from sqlalchemy.engine import make_url

_url = make_url(os.environ["HEADGATE_DJANGO_DATABASE"])
if _url.get_backend_name() == "sqlite":
    # IMMEDIATE, as docs/how-to/django.md advises: a deferred block that reads
    # first cannot write once a worker's write has committed meanwhile.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _url.database,
            "OPTIONS": {"transaction_mode": "IMMEDIATE"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _url.database,
            "USER": _url.username or "",
            "PASSWORD": _url.password or "",
            "HOST": _url.host or "",
            "PORT": str(_url.port or ""),
            "OPTIONS": {"options": _url.query["options"]} if "options" in _url.query else {},
        }
    }

INSTALLED_APPS = ["django_tasks", "headgate.contrib.django", "tests.django_project.shop"]
TASKS = {
    "default": {
        "BACKEND": "headgate.contrib.django.HeadgateBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"max_attempts": 1, "timeout_s": 60},
    },
    "children": {
        "BACKEND": "headgate.contrib.django.HeadgateBackend",
        "OPTIONS": {"executor": "process", "max_attempts": 1},
    },
    "elsewhere": {
        "BACKEND": "headgate.contrib.django.HeadgateBackend",
        "OPTIONS": {"url": f"sqlite:///{os.environ.get('HEADGATE_DJANGO_ELSEWHERE', '')}"},
    },
}
SECRET_KEY = "tests-only"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
