"""The Django app: checks `FIREFLY_SCHEDULING` when Django starts, not on the first fire."""

from __future__ import annotations

from django.apps import AppConfig


class FireflySchedulingConfig(AppConfig):
    name = "firefly_scheduling.contrib.django"
    label = "firefly_scheduling"
    verbose_name = "Scheduled tasks"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from firefly_scheduling.contrib.django.conf import firefly_settings  # noqa: PLC0415

        firefly_settings()  # a bad key or value fails `manage.py check` and every boot
