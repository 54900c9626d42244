"""firefly-scheduling inside a Django project (`pip install 'firefly-scheduling[django]'`).

Add `"firefly_scheduling.contrib.django"` to `INSTALLED_APPS`, then:

* configure it in Django's settings, `FIREFLY_SCHEDULING = {"LOCK_PROVIDER":
  "postgres", "LOCK_POSTGRES_URL": ..., "HISTORY_URL": ...}`: each key is the
  environment variable without its `FIREFLY_SCHEDULING_` prefix (see `conf`);
  Django's settings win over the environment;
* put tasks in each app's `tasks.py` (`@scheduled`): every installed app's `tasks`
  module is scanned;
* run `manage.py firefly_run` (the resident host), `manage.py firefly_tick` (one
  pass, for a CronJob) and `manage.py firefly_schedule` (the listing); they take the
  same options as `firefly-scheduling run|tick|schedule`;
* read the run history in the Django admin ("Scheduled tasks" → "Runs"), read-only.
"""
