"""`manage.py firefly_schedule`: `firefly-scheduling schedule` on this project's tasks."""

from __future__ import annotations

from firefly_scheduling.cli.schedule import schedule
from firefly_scheduling.contrib.django.management.bridge import ClickBridgeCommand


class Command(ClickBridgeCommand):
    help = (schedule.help or "").splitlines()[0]
    click_command = schedule
