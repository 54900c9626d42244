"""The demo's application: a few scheduled tasks, shipped in the package.

`firefly-scheduling demo` races local node processes over it, so the demo works
from any directory after a plain `pip install 'firefly-scheduling[database]'`.
Nothing imports it unless asked: list its schedule with::

    firefly-scheduling schedule --app firefly_scheduling.demo_app
"""
