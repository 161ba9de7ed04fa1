"""The typer app and everything a person sees: command groups, views, the live reporter, the
demo."""
