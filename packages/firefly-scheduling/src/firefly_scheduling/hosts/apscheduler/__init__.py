"""The glue to APScheduler 3: a job per task, the triggers that name each fire, and the
resident host's claiming of an instant's fires together (`claim_first`)."""
