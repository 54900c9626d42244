"""Tiny applications the host tests run in real node processes.

Each module is one scenario, scanned alone (`--app firefly_hostapps.race`). Its
task parameters come from environment variables read at import, so one module
serves every backend; every task appends `(node, start, end)` to the file named by
`FIREFLY_HOSTAPP_LOG`, one line per run, which the test reads back.
"""
