"""`python -m ralph`."""

from ralph.cli import main

main()
