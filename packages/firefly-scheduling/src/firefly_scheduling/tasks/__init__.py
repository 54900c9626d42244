"""The task model: what `@scheduled` declares, and where a host finds the tasks.

* `decorator.scheduled` marks a callable; `descriptor.ScheduledDescriptor` is one task
  as plain values; `validation` checks every value at boot;
* `scanner.scan` is the only place that imports application modules to find tasks;
  `manifest` (and its JSON `manifest_format`, `manifest_sources`) compiles them so a
  host boots without importing them;
* `discovery.resolve_descriptors` chooses between the manifest and a scan;
* `callables` turns a task's target back into the callable a fire runs.
"""
