"""Fires: exactly one run per scheduled fire, with claims, keep-alive, fencing and history.

A host makes a `Fire` (task, instant in UTC, trigger kind; `outcome.Fire.at`) once,
where it wakes, and hands it to `runner.FireRunner.run(fire, body)`. The runner
builds a pipeline of stages and gives the fire to the first; each stage hands that
same `Fire` on to the next, and none hands it back. It ends up, unchanged, in the
history's calls and in the `FireResult`:

* `deciding.FireDecider`: grace, and the policy before the claim;
* `claims.FireClaimer`: the claim of the fire, its name and window;
* `locking.TaskLocker`: the task lock, taken (fenced where the backend can), kept
  alive (`locks.keepalive`) and released; who holds it on this node when it is held;
* `locked_run.LockedRun`: under the lock, the died run to adopt or expire, and the
  lease checked once more;
* `starting.RunStarter`: the run's start written in the history (refused: the fire
  is finished, or a newer attempt owns it), and the starts taken with a batch of
  claims;
* `running.BodyRunner`: the lease checked before the body, the body inside
  `context.current_fire()`, a lost lock noticed;
* `recording.RunRecorder`: the run's end written, and the fire's `FireResult`; the
  earlier stages record their skips through it. Its writes are retried, and
  remembered when the history is down (`unrecorded`).

The policy seam (`policy`): the stages ask a `FirePolicy` what to do with a fire at
five points, with the facts they know, and act on its answer (`Run`; `RunWithin`,
the body bounded; or `Skip` with a verdict and a reason). `DefaultPolicy` is today's
behaviour. Where each policy plugs in:

* `before_claim` (deciding, within grace, or a catch-up fire's window:
  `fires.catching_up`): catch-up; pause next. (Jitter needs no
  policy: it is part of the fire, `Fire.due`, which grace, the claim window and the
  hosts' wake-ups count from.)
* `when_held` (locking, the task lock held by an earlier run): the task's
  `overlap=`: skipped, run alongside (allow_all), or buffered until the lock is free
  (buffer_one, buffer_all, `overlap_wait`), or the run holding it asked to stop
  (cancel_other: `overlap_wait`, and `cancel_watch` in the run stage);
* `before_body` (running, the lock confirmed): the task's `timeout=` (`RunWithin`:
  a coroutine body cancelled at it, a plain one told through `current_fire()`);
* `after_body` (recording, a finished body's end about to be written): retries
  (`RunAgain`: the retry the host runs at its due time, `fires.retries`);
* `at_record` (recording, before the end is written): the outcome committed in the
  task's own transaction (`atomic`: `current_fire().atomic(...)`; the record stage
  then checks the end instead of writing it).

docs/guarantees.md says what each backend guarantees, step by step. Nothing is
imported here, so `import firefly_scheduling` (which exports `current_fire`) stays
light.
"""
