"""A Django app whose table gets its fence column from `AddFenceColumn`."""
