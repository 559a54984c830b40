"""Errors of the nodes room that are the user's (exit 2 at the CLI, testbed/cli.py): here, apart
from nodes/data.py, so that the CLI names them without loading torch."""
from __future__ import annotations


class DatasetError(ValueError):
    """Unknown dataset, unknown option or an option value out of range."""


class DatasetFileError(FileNotFoundError):
    """A dataset file is missing or is not in the format expected."""
