"""Add the fence column to the existing table (rows already there get NULL: any token writes)."""

from typing import ClassVar

from django.db import migrations
from django.db.migrations.operations.base import Operation

from firefly_scheduling.contrib.django.fencing import AddFenceColumn


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("ledger", "0001_initial")]
    operations: ClassVar[list[Operation]] = [AddFenceColumn("account")]
