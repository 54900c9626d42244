"""Framework integrations, each an optional extra: `django` and `starlette`."""
