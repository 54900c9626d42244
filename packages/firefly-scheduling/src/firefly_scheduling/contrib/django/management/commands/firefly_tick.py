"""`manage.py firefly_tick`: `firefly-scheduling tick` on this project's tasks."""

from __future__ import annotations

from firefly_scheduling.cli.tick import tick
from firefly_scheduling.contrib.django.management.bridge import ClickBridgeCommand


class Command(ClickBridgeCommand):
    help = (tick.help or "").splitlines()[0]
    click_command = tick
