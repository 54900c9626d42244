"""A small application with scheduled tasks, used by the README demo.

List its schedule from the repository root with::

    firefly-scheduling schedule --path examples --app firefly_example
"""
