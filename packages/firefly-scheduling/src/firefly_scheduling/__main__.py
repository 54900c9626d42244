"""`python -m firefly_scheduling`: the command line, as the `firefly-scheduling` script runs it."""

from firefly_scheduling.cli import main

main()
