"""Schedule maths: when a task fires, with no host, lock or I/O in sight.

* `durations`: every way to spell a length of time, both ways;
* `cron`: 5-field crontab expressions evaluated in an IANA zone;
* `dst`: what a cron does with wall-clock times a DST transition skips or repeats;
* `cadence`: a rate rounded up to a frequency the cron-driven host can keep;
* `instants`: aware-datetime checks shared by the two;
* `fire_instants`: the instant that names each fire, alike on every node;
* `next_fire`: when each host will next fire a task (what `schedule` lists);
* `cron_prefilter`: a cheap "can this cron fire this minute?" for `tick`.

Nothing here imports a host: the hosts and the CLI import it.
"""
