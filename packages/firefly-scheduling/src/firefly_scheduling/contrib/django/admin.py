"""The run history in the Django admin: newest fire first, read-only.

The page reads the configured run history (`HISTORY_URL`, or the lock backend's own
database) through firefly-scheduling's API, the same rows as `firefly-scheduling
runs`, and never writes: no add, change or delete permission exists. Filter by task
with `?task=<target>`; `?limit=` (default 100, at most 1000) bounds the rows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from firefly_scheduling.contrib.django.conf import firefly_settings
from firefly_scheduling.contrib.django.models import Run
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history import HistoryError, resolve_history

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@admin.register(Run)
class RunHistoryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied  # noqa: PLC0415

            raise PermissionDenied
        task = request.GET.get("task") or None
        limit = _limit(request.GET.get("limit"))
        records, problem = [], None
        try:
            history = resolve_history(firefly_settings())
        except ConfigurationError as err:
            history, problem = None, f"The run history is misconfigured: {err}"
        if history is None and problem is None:
            problem = "No run history is configured (FIREFLY_SCHEDULING['HISTORY_URL'])."
        elif history is not None:
            try:
                records = list(history.runs(task, limit))
            except HistoryError as err:
                problem = f"The run history could not be read: {err}"
            finally:
                history.close()
        context = {
            **self.admin_site.each_context(request),
            "title": "Runs, newest fire first",
            "opts": self.model._meta,
            "records": records,
            "problem": problem,
            "task": task,
            "limit": limit,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/firefly_scheduling/runs.html", context)


def _limit(raw: str | None) -> int:
    try:
        value = int(raw) if raw else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT
    return max(1, min(value, MAX_LIMIT))
