"""`python -m firefly_scheduling.cli`: the command line without the console script."""

from firefly_scheduling.cli import main

main()
