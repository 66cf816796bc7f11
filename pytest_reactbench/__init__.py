"""pytest-reactbench: agentic React coding tasks as pytest items."""

__version__ = "0.1.0"
