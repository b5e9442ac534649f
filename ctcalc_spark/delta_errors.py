"""deltalake's and Arrow's failures on an output table, as one line naming the table, the version and the cause;
the Delta protocol features this deltalake cannot write, refused before a run's first commit."""
from __future__ import annotations

import contextlib
import os
import re
from typing import TYPE_CHECKING, Iterator, Sequence

from ctcalc_spark.errors import ConfigError, CtcalcError, InputError, StorageError, TableFeatureError
from ctcalc_spark.storage import is_local, local_path

if TYPE_CHECKING:
    from deltalake import DeltaTable

WRITABLE_FEATURES = {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns",
                     "columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "variantType",
                     "variantType-preview"}
"""The Delta writer features deltalake 1.6 writes tables with (tests/test_tables.py checks each one, and that it
refuses the ones ctcalc refuses); any other makes ctcalc stop before its first commit."""
_LEGACY_WRITER = {2: {"appendOnly", "invariants"}, 3: {"checkConstraints"}, 4: {"changeDataFeed", "generatedColumns"},
                  5: {"columnMapping"}, 6: {"identityColumns"}}
"""The features a legacy minWriterVersion (below 7) implies, added one version after the other."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def first_line(e: BaseException) -> str:
    """The first line of ``e``'s text that says something, without colour codes or delta-rs's wrapper words."""
    text = _ANSI.sub("", str(e))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[0] if lines else type(e).__name__
    for noise in ("Kernel error: ", "Generic delta kernel error: ", "Generic DeltaTable error: ", "External error: "):
        line = line.replace(noise, "")
    return line[:300]


def _newest_commit(loc: str) -> int | None:
    """The version of the newest commit file of a local table's log (what a corrupt log is read up to)."""
    folder = os.path.join(local_path(loc), "_delta_log")
    if not is_local(loc) or not os.path.isdir(folder):
        return None
    found = [int(n[:20]) for n in os.listdir(folder) if re.match(r"^\d{20}\.json$", n)]
    return max(found) if found else None


def delta_failure(table: str, loc: str, error: BaseException, version: int | None = None,
                  writing: bool = False) -> CtcalcError:
    """The one-line error, by cause, for what deltalake or Arrow raised on the ``table`` at ``loc``."""
    cause = first_line(error)
    low = cause.lower()
    where = f"the {table} table {loc!r}"
    if version is None and not writing:
        version = _newest_commit(loc)
    at = f" (version {version})" if version is not None else ""
    feature = re.search(r"Feature '([^']+)' is not supported|table features required: \[([^\]]+)\]", cause)
    if feature:
        name = feature.group(1) or feature.group(2)
        return _feature_error(table, loc, [name], reading=not writing)
    if isinstance(error, PermissionError) or "permission denied" in low or "access denied" in low:
        return ConfigError(f"Cannot {'write' if writing else 'read'} {where}{at}: permission denied ({cause}). Give "
                           "this job read and write access to output.path (its _delta_log folder too).")
    if "no space left" in low or "disk quota" in low or getattr(error, "errno", None) == 28:
        return StorageError(f"Cannot write {where}{at}: the disk is full ({cause}). This run committed nothing "
                            "there; free space (`ctcalc tables vacuum --apply` removes replaced files) and run it "
                            "again.")
    if "failed to fetch metadata for file" in low or "not found" in low and "object" in low:
        return InputError(f"A data file of {where}{at} is missing ({cause}): deleted by hand, or removed by a vacuum "
                          "while a version that needs it was read. Read a later version, or evaluate the days "
                          "again.")
    if "contiguous commit" in low or "gap" in low:
        return InputError(f"The Delta log of {where} has a gap in its versions{at} ({cause}): a commit file was "
                          "removed. Restore it from a backup, or move the table aside and evaluate its days again.")
    if "checkpoint" in low or "footer" in low or "parquet" in low and "_delta_log" in low:
        return InputError(f"A checkpoint of {where}{at} is corrupt ({cause}). Remove that checkpoint file and "
                          "_delta_log/_last_checkpoint (the JSON commits still hold the table), then run again.")
    if "json" in low or "parse" in low or "unexpected" in low or "eof" in low:
        return InputError(f"A commit file of {where}{at} is corrupt or truncated ({cause}): a write to it stopped "
                          "part way or it was edited. Restore the file, or remove the newest commit file if it is "
                          "the broken one and evaluate its days again.")
    return InputError(f"Cannot {'write' if writing else 'read'} {where}{at}: {cause}.")


@contextlib.contextmanager
def named_errors(table: str, loc: str, version: int | None = None, writing: bool = False) -> Iterator[None]:
    """deltalake's and Arrow's errors (and the operating system's) inside as :func:`delta_failure`'s one line."""
    from deltalake.exceptions import CommitFailedError

    try:
        yield
    except (CtcalcError, CommitFailedError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - deltalake raises its own, Arrow's and pyo3's panics (a BaseException)
        kind = type(e)
        if not (isinstance(e, OSError) or kind.__module__.split(".")[0] in ("deltalake", "_internal", "pyarrow",
                                                                               "pyo3_runtime")
                or kind.__name__ == "PanicException"):
            raise
        raise delta_failure(table, loc, e, version, writing) from None


def _feature_error(table: str, loc: str, names: Sequence[str], reading: bool) -> TableFeatureError:
    from deltalake import __version__ as have

    what = "read" if reading else "write"
    return TableFeatureError(
        f"The {table} table {loc!r} needs the Delta table feature(s) {', '.join(sorted(names))}, which deltalake "
        f"{have} (installed here) cannot {what}; no deltalake release up to {have} writes them. ctcalc changed "
        "nothing. Turn the feature off where it was turned on (a platform's Spark: ALTER TABLE ... SET TBLPROPERTIES), "
        "or give ctcalc its own output.path.")


def check_features(table: str, loc: str, t: DeltaTable) -> None:
    """TableFeatureError when ``t``'s protocol asks for a writer version or feature this deltalake cannot write."""
    from deltalake import __version__ as have

    p = t.protocol()
    if p.min_writer_version > 7 or p.min_reader_version > 3:
        raise TableFeatureError(
            f"The {table} table {loc!r} needs Delta protocol reader {p.min_reader_version} / writer "
            f"{p.min_writer_version}, newer than deltalake {have} (installed here) knows (reader 3, writer 7). "
            "ctcalc changed nothing; give ctcalc its own output.path.")
    if p.min_writer_version >= 7:
        needed = set(p.writer_features or ())
    else:
        needed = {f for v, fs in _LEGACY_WRITER.items() if v <= p.min_writer_version for f in fs}
    unwritable = sorted(needed - WRITABLE_FEATURES)
    if unwritable:
        raise _feature_error(table, loc, unwritable, reading=False)
