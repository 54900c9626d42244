"""Concurrency helpers the locks and hosts share, with no lock semantics of their own.

* `flavour.ASYNC`: the switch the asyncio sources are written against (see
  `tools/async_to_sync.py`);
* `fair_semaphore`, `pool_gate`: bounded, first-come-first-served access to a pool;
* `pool_size`, `connection_budget`: how many connections one lock or node may open;
* `grouped`: calls from many callers sent to a server together (a group commit);
* `reply_deadline`: a driver connection that stops waiting for a reply it never gets;
* `forks`: per-process state reset in a forked child.
"""
