"""Fires: exactly one run per scheduled fire, with claims, keep-alive, fencing and history.

* `runner.FireRunner`: `run(descriptor, instant, body) -> FireResult`, what a
  host calls for every fire (the sequence is in its module doc);
* `recording.RunRecorder`: the run history's writes for a fire, retried and remembered.
* `claims`: the claim name of a fire and how long a claim lives.
* `keepalive.KeepAlive`: renews the task lock while the body runs.
* `context.current_fire()`: the fire a body runs in (exported by `firefly_scheduling`).

docs/guarantees.md says what each backend guarantees. Nothing is imported here, so
`import firefly_scheduling` (which exports `current_fire`) stays light.
"""
