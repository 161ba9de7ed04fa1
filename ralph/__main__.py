"""`python -m ralph`."""

from ralph.cli.entry import main

main()
