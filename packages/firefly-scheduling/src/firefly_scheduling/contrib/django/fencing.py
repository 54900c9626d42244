"""Guarded writes in Django: an UPDATE that refuses an older fencing token, and its column.

* `FenceTokenField()`: the nullable `BIGINT` a model stores the last write's token in
  (not editable in forms); declare it on the model as `fence_token = FenceTokenField()`.
* `AddFenceColumn("account")`: the migration operation that adds it to an existing
  model's table (`column="fence_token"` by default); a model declaring the field as
  above then needs no further migration.
* `fenced_update(queryset, token, **values)` / `await afenced_update(...)`: one
  `UPDATE ... SET <values>, fence_token = %s WHERE <queryset's filter> AND
  (fence_token IS NULL OR fence_token <= %s)`; returns the rows written (0: the stored
  token is newer, or nothing matched). `queryset` and `token` are positional, so a
  model field of either name can be updated; `fence_column=` names another column.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import migrations, models

from firefly_scheduling.fencing.token import (
    DEFAULT_COLUMN,
    FencingTokenError,
    checked_column_name,
    checked_token,
)

__all__ = ["AddFenceColumn", "FenceTokenField", "afenced_update", "fenced_update"]


class FenceTokenField(models.BigIntegerField):  # type: ignore[type-arg]  # django-stubs' field generics
    """A nullable BIGINT for the token of the last guarded write; NULL takes any token."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("null", True)
        kwargs.setdefault("blank", True)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        for default in ("null", "blank", "editable"):
            kwargs.pop(default, None)
        if self.null is not True:
            kwargs["null"] = self.null
        if self.blank is not True:
            kwargs["blank"] = self.blank
        if self.editable is not False:
            kwargs["editable"] = self.editable
        return name, path, args, kwargs


class AddFenceColumn(migrations.AddField):
    """Add a `FenceTokenField` named `column` to the model `model_name` (existing rows: NULL)."""

    def __init__(self, model_name: str, column: str = DEFAULT_COLUMN) -> None:
        name = checked_column_name(column, caller="AddFenceColumn")
        super().__init__(model_name=model_name, name=name, field=FenceTokenField())

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs = {} if self.name == DEFAULT_COLUMN else {"column": self.name}
        return self.__class__.__name__, [self.model_name], kwargs

    def describe(self) -> str:
        return f"Add fence column {self.name} to {self.model_name}"


def fenced_update(
    queryset: models.QuerySet[Any],
    token: int | None,
    /,
    *,
    fence_column: str = DEFAULT_COLUMN,
    **values: Any,
) -> int:
    """Write `values` and `token` to the rows of `queryset` whose stored token is NULL or <= it."""
    guarded, assigned = _guarded(queryset, token, fence_column, values, caller="fenced_update")
    return guarded.update(**assigned)


async def afenced_update(
    queryset: models.QuerySet[Any],
    token: int | None,
    /,
    *,
    fence_column: str = DEFAULT_COLUMN,
    **values: Any,
) -> int:
    """`fenced_update` for async code (Django's `QuerySet.aupdate`)."""
    guarded, assigned = _guarded(queryset, token, fence_column, values, caller="afenced_update")
    return await guarded.aupdate(**assigned)


def _guarded(
    queryset: models.QuerySet[Any],
    token: object,
    fence_column: str,
    values: dict[str, Any],
    *,
    caller: str,
) -> tuple[models.QuerySet[Any], dict[str, Any]]:
    """The queryset narrowed to rows the token may write, and the assignments with the token."""
    checked = checked_token(token, caller=caller)
    name = checked_column_name(fence_column, caller=caller)
    model = queryset.model
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        raise FencingTokenError(
            f"{caller}: model {model._meta.label} has no fence field {name!r}; declare"
            f" `{name} = FenceTokenField()` and add it with `AddFenceColumn`"
        ) from None
    if not isinstance(field, models.IntegerField):
        raise FencingTokenError(
            f"{caller}: {model._meta.label}.{name} is a {type(field).__name__}, not an"
            " integer field; a fence column holds tokens (use FenceTokenField)"
        )
    if name in values:
        raise FencingTokenError(
            f"{caller}: {name!r} is the fence column; the token is stored in it, not a value"
        )
    newer_or_unset = models.Q(**{f"{name}__isnull": True}) | models.Q(**{f"{name}__lte": checked})
    return queryset.filter(newer_or_unset), {**values, name: checked}
