"""The ``ctcalc`` console script: the parser, the COMMANDS registry, the logging flags and the exit codes.

Subcommands mirror the spark-submit entry points (jobs/*.py in a checkout, ``ctcalc_spark/submit.py`` in an
installed package). Results go to stdout; progress, warnings and errors go to stderr.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import re
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from ctcalc_spark import __version__
from ctcalc_spark.errors import (
    EXIT_CONFIG, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_MISSING_DEPENDENCY, EXIT_OK, EXIT_RUNTIME,
    EXIT_TERMINATED, EXIT_USAGE, RESULT_FLAG, CtcalcError, MissingDependencyError, java_root_cause,
)
from ctcalc_spark.redact import redact_url
from ctcalc_spark.spark import interrupt
from ctcalc_spark.spark.connectors import connector_error
from ctcalc_spark.spark.interrupt import received, signal_name

log = logging.getLogger("ctcalc_spark.cli")

COMMANDS = {
    "evaluate": ("ctcalc_spark.cli.cmd_evaluate",
                 "Scan a day or a range of days of the evaluation table in one pass; write metrics and summaries."),
    "rolling": ("ctcalc_spark.cli.cmd_rolling",
                "Previous-window (rolling) calibrated metrics from stored daily summaries."),
    "report": ("ctcalc_spark.cli.cmd_report",
               "Drift report (HTML with embedded plots, CSV, JSON) over a period (--ds START..END)."),
    "stream": ("ctcalc_spark.cli.cmd_stream",
               "Structured Streaming: calibrated metrics per event-time window as each window closes."),
    "demo": ("ctcalc_spark.cli.cmd_demo", "Generate the demo table and run the evaluate job end to end on it."),
    "compare": ("ctcalc_spark.cli.cmd_compare",
                "Compare two pipelines across runs: Acc of vanilla vs calibrated metric, HTML report."),
    "train": ("ctcalc_spark.cli.cmd_train", "Train torch models on your own table, one file per pipeline and seed."),
    "score": ("ctcalc_spark.cli.cmd_score", "Score a table with trained models into the evaluation table."),
    "experiment": ("ctcalc_spark.cli.cmd_experiment",
                   "Generate data, train seeds with torch, score, evaluate, compare pipeline pairs."),
    "reproduce-synthetic": ("ctcalc_spark.cli.cmd_reproduce",
                            "The paper's synthetic linear/logistic experiments, ours next to the published figures."),
    "tables": ("ctcalc_spark.cli.cmd_tables",
               "The Delta output tables: their commit history, vacuum of unreferenced files, conversion of old output."),
    "where": ("ctcalc_spark.cli.cmd_where",
              "Print the path of the spark-submit entry point, the example configs or the locked sets in the package."),
}

EXIT_CODES = (
    (EXIT_OK, "success"),
    (EXIT_RUNTIME, "Spark or the file system failed while running (lost executor, full disk); may be transient"),
    (EXIT_USAGE, "usage error: unknown option, missing or malformed argument (e.g. a --ds that is no day)"),
    (EXIT_CONFIG, "invalid configuration (config file or --set)"),
    (EXIT_INPUT, "the input is missing or violates the contract (columns, labels, values, empty day)"),
    (EXIT_MISSING_DEPENDENCY, "an optional dependency is missing; the message names the extra to install"),
    (EXIT_INTERNAL, "internal error: a bug in ctcalc; the traceback is printed, please report it"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C): Spark's jobs cancelled; a table commit is whole or not made"),
    (EXIT_TERMINATED, "stopped by SIGTERM (a scheduler stopping the task), as for Ctrl-C"),
)

# Flag -> (level of ctcalc's own log lines, Spark's log level). Without a flag, progress lines are shown and
# Spark's level is left to the session (WARN locally; the cluster's log4j2 settings under spark-submit).
VERBOSITY = {"quiet": ("WARNING", "ERROR"), "verbose": ("DEBUG", "INFO"), None: ("INFO", None)}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
_SPARK_NAMES = {"WARNING": "WARN"}


def log_levels(flag: str | None, spark_flag: str | None = None) -> tuple[str, str | None]:
    """(ctcalc level, Spark level or None) for the values the logging flags stored: ``--log-level`` sets ctcalc's
    level alone (Spark's own DEBUG output is a separate choice); ``--spark-log-level`` sets Spark's,
    and wins over what -v/-q give it."""
    ours, spark = VERBOSITY[flag] if flag in VERBOSITY else (str(flag), None)
    if spark_flag is not None:
        spark = spark_flag
    return ours, None if spark is None else _SPARK_NAMES.get(spark, spark)


def _log_level_name(text: str) -> str:
    name = text.upper()
    name = "WARNING" if name == "WARN" else name
    if name not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)} (any case), got {text!r}")
    return name


def _add_logging_flags(parser: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    """-v/-q/--log-level; the last one given wins. On a subcommand they must not reset what came before it."""
    default = argparse.SUPPRESS if in_subcommand else None
    group = parser.add_argument_group("logging (before or after the subcommand)")
    group.add_argument("-v", "--verbose", dest="log_level", action="store_const", const="verbose", default=default,
                       help="debug lines from ctcalc, INFO from Spark")
    group.add_argument("-q", "--quiet", dest="log_level", action="store_const", const="quiet", default=default,
                       help="warnings and errors only (no progress lines); Spark at ERROR")
    group.add_argument("--log-level", dest="log_level", type=_log_level_name, default=default, metavar="LEVEL",
                       help=f"ctcalc's own lines: one of {', '.join(LOG_LEVELS)} (Spark's level stays)")
    group.add_argument("--spark-log-level", dest="spark_log_level", type=_log_level_name, default=default,
                       metavar="LEVEL", help=f"Spark's log level: one of {', '.join(LOG_LEVELS)}")
    group.add_argument("--log-format", dest="log_format", choices=LOG_FORMATS, default=default,
                       help="text (default) or json: one JSON object a line for ctcalc's log lines and its "
                            "error line, for a log collector")


def _add_result_flag(parser: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    parser.add_argument(RESULT_FLAG, dest="result_file", default=argparse.SUPPRESS if in_subcommand else None,
                        metavar="PATH", help="when the command ends, write {\"command\": ..., \"exit_code\": N} as "
                                             "JSON to PATH (for a scheduler: the code without reading the log)")


def result_file(argv: Sequence[str]) -> str | None:
    """The ``--result-file`` of a command line, found before argparse runs (so a usage error is recorded too)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == RESULT_FLAG and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(RESULT_FLAG + "="):
            found = arg.split("=", 1)[1]
    return found


def write_result(path: str, command: str | None, code: int) -> None:
    """The result record: the command and its exit code, written whole (a temporary file, then renamed)."""
    import json
    import os

    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"command": command, "exit_code": code}, f)
    os.replace(tmp, path)


def _version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        spark = f"pyspark {version('pyspark')}"
    except PackageNotFoundError:
        try:  # the `connect` extra's light client
            spark = f"pyspark-client {version('pyspark-client')}, Spark Connect only"
        except PackageNotFoundError:
            spark = "pyspark not installed as a package"
    return f"ctcalc {__version__} ({spark}, Python {sys.version.split()[0]})"


def _epilog() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES)


def build_parser(submitted: bool = False) -> argparse.ArgumentParser:
    """Parser with one sub-parser per command (modules imported only to register their arguments)."""
    parser = argparse.ArgumentParser(prog="ctcalc", description="Calibrated metrics (Calibration-then-Calculation) on "
                                     "Spark.", epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version_text())
    _add_logging_flags(parser, in_subcommand=False)
    _add_result_flag(parser, in_subcommand=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # none given: main() prints the list
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        _add_logging_flags(p, in_subcommand=True)
        _add_result_flag(p, in_subcommand=True)
        p.set_defaults(_module=module, _submitted=submitted)
    return parser


class RedactedStream:
    """A text stream that writes through :func:`ctcalc_spark.redact.redact_url`: main() puts stdout and stderr
    behind one while a command runs, so that no message, log line or result line shows a password in a path or
    URL it echoes (``s3a://KEY:SECRET@bucket``, a JDBC URL's ``password=``). Everything else is the stream's."""

    def __init__(self, stream: Any) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(redact_url(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


@contextmanager
def redacted_output() -> Iterator[None]:
    """stdout and stderr behind :class:`RedactedStream` until the block ends."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactedStream(sys.stdout), RedactedStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class _CtcalcHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler main() installs (a second call replaces it): writes to sys.stderr as it is at each line, so a
    redirected or captured stderr that has since been closed is never written to."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self):  # type: ignore[no-untyped-def]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # type: ignore[no-untyped-def]
        pass


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` (and ``exception``)."""

    def format(self, record: logging.LogRecord) -> str:
        import datetime as dt
        import json

        line = {"time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
                "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


_FORMAT = {"json": False}  # the --log-format of this run: the error line follows it (say())


def say(line: str) -> None:
    """A line of the command's own on stderr (its error, interruption or note): as text, or under
    ``--log-format json`` as a JSON object of the logger ``ctcalc_spark.cli`` (level ERROR unless a note)."""
    if not _FORMAT["json"]:
        print(line, file=sys.stderr)
        return
    level = logging.INFO if line.startswith("note: ") else logging.ERROR
    record = logging.LogRecord("ctcalc_spark.cli", level, __file__, 0, line, None, None)
    print(JsonFormatter().format(record), file=sys.stderr)


def configure_logging(level: str, log_format: str = "text") -> None:
    """ctcalc's log lines (progress at INFO) to stderr at ``level``; other libraries stay at WARNING."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger = logging.getLogger("ctcalc_spark")
    for h in [h for h in logger.handlers if isinstance(h, _CtcalcHandler)]:
        logger.removeHandler(h)
    handler = _CtcalcHandler()
    _FORMAT["json"] = log_format == "json"
    # Text: Spark's own layout, so both interleave readably on one terminal.
    handler.setFormatter(JsonFormatter() if _FORMAT["json"] else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%y/%m/%d %H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def _is_runtime_failure(error: BaseException) -> bool:
    """Spark (classic or Connect) or the operating system reported the failure, not ctcalc's own logic."""
    if isinstance(error, OSError):
        return True
    spark_errors = sys.modules.get("pyspark.errors")
    if spark_errors is not None and isinstance(error, spark_errors.PySparkException):
        return True
    py4j = sys.modules.get("py4j.protocol")
    return py4j is not None and isinstance(error, py4j.Py4JError)


_RPC_STATUS = re.compile(r"status = StatusCode\.(\w+)")
_RPC_DETAILS = re.compile(r'details = "(.*)"')


def _rpc_status(error: BaseException) -> tuple[str, str] | None:
    """(status, details) of a gRPC call of a Spark Connect client that failed below Spark, else None. pyspark puts
    the whole multi-line ``_InactiveRpcError`` text into its exception, whose first line says nothing."""
    text = str(error)
    status = _RPC_STATUS.search(text)
    if "RpcError" not in text or status is None:
        return None
    details = _RPC_DETAILS.search(text)
    return status.group(1), details.group(1) if details else "(no details)"


def rpc_failure(error: BaseException) -> str | None:
    """'Spark Connect call failed: STATUS: details' for such a failure, else None."""
    rpc = _rpc_status(error)
    return None if rpc is None else f"Spark Connect call failed: {rpc[0]}: {rpc[1]}"


def connect_refusal(error: BaseException) -> str | None:
    """The one-line config error for a Spark Connect server that refused the client's credentials, else None."""
    rpc = _rpc_status(error)
    if rpc is None or rpc[0] not in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return None
    return (f"The Spark Connect server refused this client: {rpc_failure(error)}. Check the token in spark.remote "
            "or SPARK_REMOTE (sc://HOST:PORT/;token=...; spark-submit jobs read SPARK_REMOTE only).")


def run_guarded(work: Callable[[], int | None], label: str) -> int:
    """Run ``work`` and turn what it raises into one message on stderr and the documented exit code."""
    try:
        code = int(work() or 0)
        _metastore_note()
        return code
    except CtcalcError as e:
        if received() is not None:  # e.g. an input error made of Spark's cancellation
            return _interrupted(label)
        say(f"{label}: error: {e}")
        _metastore_note()
        return e.exit_code
    except ImportError as e:
        missing = MissingDependencyError.from_import_error(e)
        if missing is None:
            return _internal_error(e, label)
        say(f"{label}: error: {missing}")
        return missing.exit_code
    except KeyboardInterrupt:
        return _interrupted(label)
    except Exception as e:  # noqa: BLE001 - the last line of defence: classify, report, exit with a code
        if received() is not None:  # Spark's cancellation error after Ctrl-C or SIGTERM, or what a job made of it
            log.debug("%s ended after the signal with %s: %s", label, type(e).__name__, e)
            return _interrupted(label)
        return _failure(e, label)


def _stderr_under_spark_submit() -> None:
    """Under spark-submit (client mode) the driver's stderr is a pipe that Spark's launcher copies to its own
    stdout, so progress and errors came out with the results. When the parent process is that launcher (a JVM
    running SparkSubmit) and its stderr can be opened, write this process's stderr lines there instead."""
    import os

    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as f:
            launcher = b"org.apache.spark.deploy.SparkSubmit" in f.read()
        if launcher:
            sys.stderr = open(f"/proc/{parent}/fd/2", "w", buffering=1, encoding="utf-8", errors="replace")
    except OSError:  # not Linux, or not allowed: stderr stays the pipe
        return


def _metastore_note() -> None:
    """The note of :func:`ctcalc_spark.spark.session.new_metastore_note`, when there is one (Spark was started)."""
    session = sys.modules.get("ctcalc_spark.spark.session")
    note = session.new_metastore_note() if session is not None else None
    if note:
        say(f"note: {note}")


def _interrupted(label: str) -> int:
    """One line and 130 (Ctrl-C) or 143 (SIGTERM, as a scheduler stops a task): see spark/interrupt.py."""
    signum = received()
    if signum is None or signum == signal.SIGINT:
        say(f"{label}: interrupted")
        return EXIT_INTERRUPTED
    say(f"{label}: stopped by {signal_name(signum)}")
    return EXIT_TERMINATED  # the only other signal interrupt.install() handles


def _failure(e: Exception, label: str) -> int:
    """What an exception that is not ctcalc's own error gets: a bug (traceback, 70) or a runtime failure (1)."""
    if not _is_runtime_failure(e):
        return _internal_error(e, label)
    if log.isEnabledFor(logging.DEBUG):
        traceback.print_exc()
    refused = connect_refusal(e) or connector_error(e)
    if refused is not None:
        say(f"{label}: error: {refused}")
        return EXIT_CONFIG
    rpc = rpc_failure(e)
    java = java_failure(e)
    first = rpc or java or (str(e).strip().splitlines()[0] if str(e).strip() else "")
    say(f"{label}: failed: {'' if java else type(e).__name__ + ': '}{first}\n(a Spark or file-system failure: "
        "check the path, the cluster and the disk, then rerun; -v prints the Python traceback)")
    return EXIT_RUNTIME


def java_failure(error: BaseException) -> str | None:
    """For a Java exception that pyspark passed on as it came (py4j's ``Py4JJavaError``, whose first line only
    says 'An error occurred while calling o164.save.'): its innermost cause and the call, e.g.
    ``java.io.IOException: No space left on device (in Spark's save)``; else None."""
    found = java_root_cause(error)
    return None if found is None else f"{found[0]} (in Spark's {found[1]})"


def _internal_error(error: BaseException, label: str) -> int:
    traceback.print_exception(error)
    say(f"{label}: internal error in ctcalc {__version__}: {type(error).__name__}: {error}\n"
        "This is a bug: please report it with the command line and the traceback above.")
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None, *, submitted: bool = False) -> int:
    """Run a subcommand and return its exit code (see EXIT_CODES); argparse exits 2 on a usage error. With
    ``--result-file PATH`` the code is also written there, whatever ends the command (usage errors included)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    record = result_file(argv)
    if record is None:
        return _main(argv, submitted)
    command = next((a for a in argv if a in COMMANDS), None)
    code = EXIT_INTERNAL
    try:
        code = _main(argv, submitted)
        return code
    except SystemExit as e:  # argparse: --help, --version (0) or a usage error (2)
        code = e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_USAGE)
        raise
    finally:
        write_result(record, command, code)


def _main(argv: list[str], submitted: bool) -> int:
    parser = build_parser(submitted)
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `ctcalc`: the command list, not argparse's one-line "required" error
        parser.print_help(sys.stderr)
        parser.exit(EXIT_USAGE, "\nctcalc: error: name a COMMAND: `ctcalc demo` runs the whole job on generated data, "
                                "`ctcalc COMMAND -h` lists a command's options.\n")
    level, spark_level = log_levels(args.log_level, args.spark_log_level)
    if submitted:
        _stderr_under_spark_submit()
    configure_logging(level, args.log_format or "text")
    args._spark_log_level = spark_level
    label = f"ctcalc {args.command}"
    t0 = time.perf_counter()
    interrupt.install(None)  # SIGTERM ends a command as Ctrl-C does; session_for adds stopping Spark's work
    try:
        with redacted_output():
            code = run_guarded(lambda: importlib.import_module(args._module).run(args), label)
    finally:
        interrupt.uninstall()
    elapsed = time.perf_counter() - t0
    if code == EXIT_OK and elapsed >= 1.0:
        log.info("%s done in %.1f s", label, elapsed)
    return code


def console() -> None:
    """Entry point of the console script."""
    sys.exit(main())
