"""ralph: run a coding agent in a Reflexion loop until the project's own checks pass."""

__version__ = "0.1.0"
