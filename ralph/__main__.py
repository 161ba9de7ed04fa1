"""`python -m ralph`."""

from ralph.entry import main

main()
