"""`python -m ralph`."""

from ralph.cli.app import main

main()
