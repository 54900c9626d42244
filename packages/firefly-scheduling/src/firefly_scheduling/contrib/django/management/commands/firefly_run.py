"""`manage.py firefly_run`: `firefly-scheduling run` on this project's tasks."""

from __future__ import annotations

from firefly_scheduling.cli.run import run
from firefly_scheduling.contrib.django.management.bridge import ClickBridgeCommand


class Command(ClickBridgeCommand):
    help = (run.help or "").splitlines()[0]
    click_command = run
