"""evalgate: gate pull requests on the quality of LLM and agent systems."""

__version__ = "0.1.0"
__all__ = ["__version__"]
