"""An account whose balance only a task holding the newest fencing token may write."""

from __future__ import annotations

from django.db import models

from firefly_scheduling.contrib.django.fencing import FenceTokenField


class Account(models.Model):
    owner: models.CharField[str, str] = models.CharField(max_length=32)
    balance: models.IntegerField[int, int] = models.IntegerField(default=0)
    fence_token = FenceTokenField()
