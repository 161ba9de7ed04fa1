"""Chat clients over httpx: the one place that speaks HTTP."""
