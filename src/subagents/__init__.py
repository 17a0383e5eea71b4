"""subagents: a runtime for LLM agents that delegate work to named child agents."""

from importlib.metadata import version as _version

__version__ = _version("subagents")

__all__ = ["__version__"]
