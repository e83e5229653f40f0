"""The version of the tritonpy distribution."""

__version__ = "0.1.0"
