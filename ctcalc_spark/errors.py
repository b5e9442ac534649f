"""Exceptions raised at the boundaries; each message says what was expected, what was got, how to fix it."""
from __future__ import annotations


class CtcalcError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(CtcalcError, ValueError):
    """The configuration file or arguments are invalid."""


class InputError(CtcalcError, ValueError):
    """The evaluation data violates the input contract (columns, labels, values)."""


class DegenerateBiasError(CtcalcError, ValueError):
    """The bias term has no finite solution on the given val-bias rows.

    ``status`` is the machine-readable reason also used in the metrics table
    (``no_bias_rows``, ``bias_single_class_negative``, ...).
    """

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
