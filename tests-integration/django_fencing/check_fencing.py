"""Migrate, then drive `fenced_update`/`afenced_update` and print what each call returned.

Run as `python check_fencing.py` with `DJANGO_SETTINGS_MODULE=fencing_site.settings`;
the test reads the rows back itself, through its own connection.
"""

import asyncio
import io
import json
import os
from collections.abc import Callable
from typing import Any

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fencing_site.settings")
    django.setup()
    from django.core.management import call_command  # noqa: PLC0415 - after setup()
    from ledger.models import Account  # noqa: PLC0415

    from firefly_scheduling.contrib.django.fencing import (  # noqa: PLC0415
        AddFenceColumn,
        afenced_update,
        fenced_update,
    )
    from firefly_scheduling.fencing import FencingTokenError  # noqa: PLC0415

    call_command("migrate", verbosity=0)
    pending = io.StringIO()
    try:
        call_command("makemigrations", "ledger", check=True, dry_run=True, stdout=pending)
        model_matches_migrations = True
    except SystemExit:
        model_matches_migrations = False
    Account.objects.create(id=1, owner="initial", balance=0)
    Account.objects.create(id=2, owner="other", balance=0)
    one = Account.objects.filter(id=1)
    report: dict[str, Any] = {"model_matches_migrations": model_matches_migrations}
    report["null_then_5"] = fenced_update(one, 5, owner="five", balance=5)
    report["equal_5"] = fenced_update(one, 5, owner="five again", balance=55)
    report["newer_7"] = fenced_update(one, 7, owner="seven", balance=7)
    report["older_6"] = fenced_update(one, 6, owner="six", balance=6)

    async def flavour() -> list[int]:
        return [
            await afenced_update(one, 8, owner="eight", balance=8),
            await afenced_update(one, 7, owner="seven again", balance=77),
        ]

    report["async_8_then_7"] = asyncio.run(flavour())
    refused: dict[str, str | None] = {}
    calls: dict[str, Callable[[], object]] = {
        "none": lambda: fenced_update(one, None, owner="x"),
        "bool": lambda: fenced_update(one, True, owner="x"),
        "negative": lambda: fenced_update(one, -1, owner="x"),
        "missing_column": lambda: fenced_update(one, 9, fence_column="missing", owner="x"),
        "text_column": lambda: fenced_update(one, 9, fence_column="owner", balance=1),
        "bad_name": lambda: fenced_update(one, 9, fence_column="fence token", owner="x"),
        "token_as_value": lambda: fenced_update(one, 9, owner="x", fence_token=1),
        "operation_column": lambda: AddFenceColumn("account", column="drop table"),
    }
    for label, call in calls.items():
        try:
            call()
            refused[label] = None
        except FencingTokenError as err:
            refused[label] = str(err)
    report["refused"] = refused
    operation = AddFenceColumn("account", column="guard_token")
    report["deconstructed"] = [operation.deconstruct(), AddFenceColumn("account").deconstruct()]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
