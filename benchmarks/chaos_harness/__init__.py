"""The randomized fault checker behind `benchmarks/chaos.py`, one job per module.

* `evidence`: the append-only log every process stamps with CLOCK_MONOTONIC.
* `tasks`: the task module the node processes run (the task mix); `policy_tasks`:
  one task per fire policy.
* `slot_stamps`: the waiting slots a node holds, stamped on the evidence log.
* `fleet_down`: the whole fleet down once per run, so that catch-up acts.
* `node`: a node process, `run` or `tick`, with the chaos seams (clock offset,
  failing history writes) installed through the hosts' public seams.
* `proxy`: the TCP proxy between each node and the server (latency, stalls,
  resets, blackholes).
* `servers`: private redis-server/memcached instances, and killing only our own
  connections on the shared PostgreSQL/MariaDB.
* `setups`: the seven backend setups.
* `nemesis`: the seeded fault schedule and its injection; `steering_nemesis` and
  `steer_client`: an operator's pauses, resumes, triggers and backfills among them.
* `history`: reading the run history with a second client.
* `checker`: the invariants, over the evidence and the history alone; it applies
  `overlap_rules` (exclusion, at most once) and `record_rules` (accounted for,
  recorded) and `policy_rules` (one rule per fire policy) to the runs of
  `body_runs`, excused by `fault_evidence`, and `steering_rules` (paused, each
  trigger once, each backfilled fire once).
* `run`: one setup end to end, and the report table.
"""
