"""Exceptions raised at the boundaries; each message says what was expected, what was got, how to fix it. The
helpers their messages share (:func:`listed`, :func:`yaml_list`) are here too, for every layer to use.

Each class carries the ``ctcalc`` exit code it maps to (the table is in ``ctcalc --help`` and docs/deploy.md):
a scheduler can tell a bad config (3) or bad data (4), which a retry will not fix, from a missing
package (5), a Spark or file-system failure (1, maybe transient) and a bug (70).
"""
from __future__ import annotations

import re
from typing import Sequence

EXIT_OK = 0
EXIT_RUNTIME = 1  # Spark or the file system reported a failure while running (lost executor, full disk)
EXIT_USAGE = 2  # argparse: unknown option, missing argument
EXIT_CONFIG = 3  # ConfigError
EXIT_INPUT = 4  # InputError, DegenerateBiasError: a missing input path too (a rerun reads the same nothing)
EXIT_MISSING_DEPENDENCY = 5  # MissingDependencyError
EXIT_INTERNAL = 70  # an unexpected exception: a bug in ctcalc (sysexits' EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + 15): a scheduler stopped the task
# `ctcalc ... --result-file PATH` writes {"command": ..., "exit_code": N} there when the command ends: how the
# DAGs' spark-submit operator learns the job's code (ctcalc_spark.orchestration.operators).
RESULT_FLAG = "--result-file"


def listed(items: list[str], shown: int = 5, sep: str = ", ") -> str:
    """The first ``shown`` of ``items`` joined by ``sep``, and how many more, for a message.

    >>> listed(["a", "b", "c"], 2)
    'a, b and 1 more'
    """
    return sep.join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


def yaml_list(values: Sequence[str]) -> str:
    """``values`` as a YAML flow list a user can paste into a config or a ``--set``: plain words as they are,
    anything YAML would read otherwise (``>50K``, ``yes``, ``1.0``, ``a, b``) in double quotes.

    >>> yaml_list(["cat", "dog"]), yaml_list(["<=50K", ">50K"]), yaml_list(["no", "yes", "1"])
    ('[cat, dog]', '["<=50K", ">50K"]', '["no", "yes", "1"]')
    """
    import json

    import yaml

    def one(v: str) -> str:
        plain = re.fullmatch(r"[A-Za-z_][\w.\-]*", v) is not None and yaml.safe_load(v) == v
        return v if plain else json.dumps(v, ensure_ascii=False)
    return "[" + ", ".join(one(str(v)) for v in values) + "]"


_PY4J_CALL = re.compile(r"An error occurred while calling [\w$]+\.(\w+)\.")


def java_root_cause(error: BaseException) -> tuple[str, str] | None:
    """(innermost cause, the call) of a Java exception that pyspark passed on as it came (py4j's
    ``Py4JJavaError``, whose first line only says 'An error occurred while calling o164.save.'), e.g.
    ``('java.io.IOException: No space left on device', 'save')``; else None."""
    text = str(error)
    call = _PY4J_CALL.match(text.strip())
    if call is None:
        return None
    lines = text.splitlines()
    causes = [line[len("Caused by: "):] for line in lines if line.startswith("Caused by: ")]
    top = [line[2:] for line in lines if line.startswith(": ")]
    root = (causes or top or [""])[-1].strip()
    return (root, call.group(1)) if root else None


class CtcalcError(Exception):
    """Base class of every error this package raises on purpose."""

    exit_code = EXIT_INPUT


class ConfigError(CtcalcError, ValueError):
    """The configuration (a YAML file, a ``--set`` override, a DAG's settings) or an argument is invalid: an
    unknown or missing key, a value of the wrong type or out of range, options that conflict. The message names
    the key and the values it accepts. ``ctcalc`` exits with 3 (:class:`UsageError`, a subclass: 2)."""

    exit_code = EXIT_CONFIG


class UsageError(ConfigError):
    """A command-line argument is malformed or conflicts with another (a bad ``--ds``, two ways of naming a period):
    exit 2, as for argparse's own usage errors."""

    exit_code = EXIT_USAGE


class InputError(CtcalcError, ValueError):
    """The evaluation data violates the input contract: the metrics and solvers of :mod:`ctcalc_spark.core` raise
    it for arrays of the wrong shape, NaN/inf values, labels outside their set, negative weights or no positive
    total weight; the jobs for missing or mistyped columns and invalid rows. ``ctcalc`` exits with 4."""

    exit_code = EXIT_INPUT


class DegenerateBiasError(CtcalcError, ValueError):
    """The bias term has no finite solution on the given val-bias rows.

    Raised by the solvers (:func:`~ctcalc_spark.core.solvers.solve_logit_shift`,
    :func:`~ctcalc_spark.core.solvers.solve_mean_shift`, :func:`~ctcalc_spark.core.solvers.solve_temperature`),
    the calibrated metrics and the summaries' ``solve_bias`` when the val-bias rows are empty, hold one label only,
    or give no finite bias or temperature. The jobs catch it and record its ``status`` (the metrics table's
    ``status`` column); ``ctcalc`` exits with 4 on one that is not caught.

    Parameters
    ----------
    status : str
        The machine-readable reason, as in the metrics table's ``status`` column (``no_bias_rows``,
        ``bias_single_class_negative``, ``bias_single_class_positive``, ``bias_ill_conditioned``,
        ``temperature_not_positive``, ``temperature_unbounded``).
    message : str
        What happened and what to do about it.

    Attributes
    ----------
    status : str
        As given.
    """

    exit_code = EXIT_INPUT

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class ConcurrentRunError(CtcalcError):
    """Another live run of the same job is writing the same days of the same output. Exit 1: once it has
    ended, running again succeeds (a scheduler's retry does)."""

    exit_code = EXIT_RUNTIME


class RunInProgressError(CtcalcError):
    """A reader met days that a live run is writing (its tables committed one after the other, not all yet).
    Exit 1: running the reader again once that run has ended reads them whole."""

    exit_code = EXIT_RUNTIME


class StorageError(CtcalcError):
    """The output's storage failed while a table was written (a full disk): exit 1, a retry once it is mended
    succeeds."""

    exit_code = EXIT_RUNTIME


class TableFeatureError(CtcalcError):
    """An output table needs a Delta protocol or table feature the installed ``deltalake`` cannot read or write:
    exit 5, as for a package too old."""

    exit_code = EXIT_MISSING_DEPENDENCY


# Optional imports -> the extra of ctcalc-spark that installs them. grpc, grpc_status, google.rpc and zstandard are
# what a Spark Connect client needs besides pyspark's code: the `connect` extra's pyspark-client brings them.
OPTIONAL_DEPENDENCIES = {
    "pyspark": "spark",
    "torch": "torch",
    "tqdm": "torch",
    "matplotlib": "reports",
    "airflow": "airflow",
    "grpc": "connect",
    "grpc_status": "connect",
    "google": "connect",
    "zstandard": "connect",
}
# Distributions pyspark's own dependency check reports (PySparkImportError's package_name) -> the extra.
_DISTRIBUTIONS = {"grpcio": "connect", "grpcio-status": "connect", "googleapis-common-protos": "connect",
                  "zstandard": "connect"}


class MissingDependencyError(CtcalcError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""

    exit_code = EXIT_MISSING_DEPENDENCY

    def __init__(self, module: str, extra: str, found: str | None = None, instead: str | None = None) -> None:
        hint = f"pip install 'ctcalc-spark[{extra}]'"
        if extra == "torch":
            hint += " (CPU-only torch: add --extra-index-url https://download.pytorch.org/whl/cpu)"
        elif extra == "spark":
            hint += ", or run it where a Spark runtime provides pyspark"
        what = "is not installed" if found is None else f"is {found}, too old"
        if instead:
            what += f" ({instead})"
        super().__init__(f"the optional Python package '{module}' {what}; install it with: {hint}")
        self.module = module
        self.extra = extra

    @classmethod
    def connect_client_only(cls) -> MissingDependencyError:
        """A session that starts Spark here (classic, or a local Connect server) on the ``connect`` extra's
        pyspark-client, which holds no Spark: the full pyspark is the missing package."""
        return cls("pyspark", "spark", instead="only pyspark-client, a Spark Connect client that cannot start Spark "
                   "here: name a server with spark.remote: sc://HOST:PORT or SPARK_REMOTE")

    @classmethod
    def from_import_error(cls, error: ImportError) -> MissingDependencyError | None:
        """The error for a failed import of an optional dependency, or None when ``error`` is about another module.

        Two kinds: Python's ``ModuleNotFoundError`` (``error.name`` is the module), and pyspark's
        ``PySparkImportError`` from its own dependency check (e.g. a Spark Connect session without grpcio), whose
        message parameters name the distribution and, for one too old, the version found.
        """
        params = getattr(error, "getMessageParameters", None)
        if callable(params):
            given = params() or {}
            package = str(given.get("package_name", ""))
            extra = _DISTRIBUTIONS.get(package)
            return None if extra is None else cls(package, extra, given.get("current_version"))
        if not isinstance(error, ModuleNotFoundError) or not error.name:
            return None
        top = error.name.split(".")[0]
        extra = OPTIONAL_DEPENDENCIES.get(top)
        return None if extra is None else cls(top, extra)
