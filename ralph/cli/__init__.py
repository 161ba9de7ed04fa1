"""The typer app and everything a person sees: command groups, views, the live reporter, the
demo.

A command imports what it runs inside its own function, and rich is imported where something is
drawn: `ralph --help` loads the command modules and nothing they run, and `ralph check` starts
its checks before any of them (docs/architecture.md, "Start-up": when an import may sit inside
a function; tests/test_lazy_imports.py holds it)."""
