"""The version of rlx, in one place (pyproject.toml reads it from here)."""

VERSION = "0.1.0"
