"""The typer app and everything a person sees: command groups, views, the live reporter, the
demo.

A command imports what it runs inside its own function, and rich is imported where something is
drawn: `ralph --help`, `ralph status` and `ralph check` load only the modules they use
(`python -X importtime -m ralph ...` lists them). An import inside a function here is one that
would add to one of those three, or to `ralph analyze`'s read (`cli/live.py`'s progress bar)."""
