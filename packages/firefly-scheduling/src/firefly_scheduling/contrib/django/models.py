"""`Run`: the admin's handle on the run history, not a table.

The run history lives wherever `HISTORY_URL` points (often not Django's database),
and its schema belongs to firefly-scheduling, so Django never creates, migrates or
queries a table for it (`managed = False`, and the admin page reads the history
through its own API, see `admin`). The model exists because the admin lists pages
by model.
"""

from __future__ import annotations

from django.db import models


class Run(models.Model):
    class Meta:
        managed = False
        verbose_name = "run"
        verbose_name_plural = "runs"
        # Never queried: the admin page reads the run history's own API.
        db_table = "firefly_scheduling_django_no_table"
        default_permissions = ("view",)
