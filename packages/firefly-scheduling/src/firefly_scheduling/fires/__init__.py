"""Fires: exactly one run per scheduled fire, with claims, keep-alive, fencing and history.

A host makes a `Fire` (task, instant in UTC, trigger kind; `outcome.Fire.at`) once,
where it wakes, and hands it to `runner.FireRunner.run(fire, body)`. The runner
composes three stages, each handed that same `Fire`, which ends up, unchanged, in
the history's calls and in the `FireResult`:

* `deciding.FireDecider`: is the fire this node's: grace, the claim (`claims`), the
  task lock (`lock_holders` says who holds it); then `adoption.Adoption`: which died
  runs of the task to adopt or expire;
* `running.BodyRunner`: the lease checked before the body, the body inside
  `context.current_fire()`, the task lock renewed (`keepalive`) and a lost lock
  noticed;
* `recording.RunRecorder`: the run history's writes, retried, and remembered when
  the history is down (`unrecorded`).

The policy seam (`policy`): the stages ask a `FirePolicy` what to do with a fire at
five points, with the facts they know, and act on its answer (`Run`, or `Skip` with
a verdict and a reason). `DefaultPolicy` is today's behaviour. Where each coming
policy plugs in:

* `before_claim` (deciding, within grace): pause, jitter, catch-up;
* `when_held` (deciding, the task lock held by an earlier run): overlap, skipped
  today (later buffer_one, buffer_all, cancel_other, allow_all);
* `before_body` (running, the lock confirmed): timeout;
* `after_body` (running, the end recorded): retries;
* `at_record` (recording, before the end is written): the outcome committed in the
  task's own transaction.

docs/guarantees.md says what each backend guarantees, step by step. Nothing is
imported here, so `import firefly_scheduling` (which exports `current_fire`) stays
light.
"""
