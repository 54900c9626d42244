"""One module per backend for `benchmarks/async_locks.py` (see its docstring)."""
