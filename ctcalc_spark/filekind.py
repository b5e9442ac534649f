"""Local input files, without Spark: which files of a folder Spark reads (as it lists a table's files, with a
reader's ``pathGlobFilter``), what their names and first bytes say they are, what a CSV header that lacks columns
says went wrong.

A job that could not read a file as ``input.format`` says tells from the first bytes what it is (a Feather file
read as CSV gave column names like ``'ARROW1\\x00…'`` and "lacks column(s)", a CSV file read as Parquet gave
"Could not read footer"); nothing reads more than a file's first bytes, and only on those error paths. The
input reader (spark/inputs.py) and ``ctcalc train``/``score`` share the listing and the name rules.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from ctcalc_spark.storage import local_path

SNIFF_BYTES = 512
"""Bytes of a file's start that :func:`sniff` reads."""


@dataclass(frozen=True)
class FileKind:
    """A file type: ``what`` it is (a phrase), the ``input.format`` Spark reads it with (None: Spark does not read
    it), and how to make it readable when Spark does not."""

    what: str
    spark_format: str | None = None
    fix: str = ""


_TO_PARQUET = "write the table as Parquet (pandas: {read}(path).to_parquet('scores.parquet')) and read that"
MAGIC: tuple[tuple[bytes, FileKind], ...] = (
    (b"PAR1", FileKind("a Parquet file", "parquet")),
    (b"ORC", FileKind("an ORC file", "orc")),
    (b"Obj\x01", FileKind("an Avro file", "avro")),
    (b"ARROW1", FileKind("an Arrow IPC (Feather) file, which Spark does not read",
                         fix=_TO_PARQUET.format(read="pd.read_feather"))),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", FileKind("a legacy Excel workbook (.xls), which Spark does not read",
                                                   fix="save the sheet as CSV, or " +
                                                   _TO_PARQUET.format(read="pd.read_excel"))),
    (b"SQLite format 3\x00", FileKind("an SQLite database, which Spark does not read",
                                      fix="export the table as CSV or Parquet")),
    (b"\x89HDF\r\n\x1a\n", FileKind("an HDF5 file, which Spark does not read",
                                    fix=_TO_PARQUET.format(read="pd.read_hdf"))),
    (b"\x93NUMPY", FileKind("a NumPy array file, which Spark does not read",
                            fix="write the rows as a table (pandas DataFrame.to_parquet) and read that")),
)
"""File types told apart by their first bytes (zip, gzip, bzip2 and pickle by :func:`sniff` itself)."""

COMPRESSED = {b"\x1f\x8b": ".gz", b"BZh": ".bz2"}
"""Compressed files Spark's text readers decompress when the name ends in the suffix."""


def sniff(path: str) -> FileKind | None:
    """The type of the local file ``path`` from its first bytes; None when it is none of the known binary types
    (text, or a file that cannot be read)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return None
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return kind
    name = os.path.basename(path)
    low = name.lower()
    if head.startswith(b"PK\x03\x04"):
        if low.endswith((".xlsx", ".xlsm")) or b"xl/" in head or b"[Content_Types].xml" in head:
            return FileKind("an Excel workbook (.xlsx), which Spark does not read",
                            fix="save the sheet as CSV, or " + _TO_PARQUET.format(read="pd.read_excel"))
        return FileKind("a zip archive, which Spark does not read", fix="unzip it and read the files inside")
    for magic, suffix in COMPRESSED.items():
        if head.startswith(magic) and not low.endswith(suffix):
            return FileKind(f"{suffix[1:]}-compressed, but its name does not end in {suffix}",
                            fix=f"Spark decompresses by the name: rename it to end in {suffix} (e.g. "
                                f"{name}{suffix})")
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return FileKind("a Python pickle, which Spark does not read", fix=_TO_PARQUET.format(read="pd.read_pickle"))
    if head and _text_like(head):
        first = head.lstrip()[:1]
        return FileKind("a text file" + (" that looks like JSON" if first in (b"{", b"[") else ""),
                        "json" if first in (b"{", b"[") else "csv")
    return None


def _text_like(head: bytes) -> bool:
    """Whether bytes read from a file's start are text: UTF-8 (a character cut at the end allowed), no NUL."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3
    return True


def kind_hint(path: str, fmt: str) -> str:
    """' <file> is <what>: <fix>.' for a local file that is not what ``input.format`` ``fmt`` reads ('' when it
    is, or its type is unknown)."""
    kind = sniff(path)
    if kind is None or kind.spark_format == fmt:
        return ""
    name = os.path.basename(path)
    if kind.spark_format is not None:
        return f" {name} is {kind.what}: set input.format: {kind.spark_format}."
    return f" {name} is {kind.what}: {kind.fix}."


# ---- which files, and what their names say -------------------------------------------------------------

def data_files(folder: str, glob: str | None = None) -> Iterator[str]:
    """The files below a local folder that are not hidden, as Spark lists a table's files: names and folders
    starting with '.' or '_' (``_SUCCESS``, ``.crc`` files, ``_staging/``) are left out, and with ``glob`` (the
    reader's ``pathGlobFilter``) names it does not match."""
    patterns = expand_braces(glob) if glob else []
    for where, subs, names in os.walk(local_path(folder)):
        subs[:] = sorted(d for d in subs if not d.startswith((".", "_")))
        yield from (os.path.join(where, n) for n in sorted(names) if not n.startswith((".", "_"))
                    and (not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)))


def check_folder_links(root: str, paths: Sequence[str]) -> None:
    """InputError when a local input has a folder below ``paths`` that is a symbolic link into the table's own
    folder ``root`` or above it (``ds=2026-11-21/loop -> ..``): Spark follows such a link and reads the files under
    it again, a loop up to 40 times (a day of 400 rows counted 16,400), without a word. Links to folders elsewhere
    (a day's folder on another disk) are read as they are. Folders Spark leaves out ('.', '_') are not looked at."""
    from ctcalc_spark.errors import InputError

    top = os.path.realpath(local_path(root))
    for path in paths:
        for where, subs, _ in os.walk(local_path(path)):
            subs[:] = sorted(d for d in subs if not d.startswith((".", "_")))
            for d in subs:
                link = os.path.join(where, d)
                target = os.path.realpath(link)
                if not os.path.islink(link) or not (_inside(target, top) or _inside(top, target)):
                    continue
                raise InputError(
                    f"The evaluation table {root!r} holds a folder that links back into it: "
                    f"{os.path.relpath(link, top)} -> {target}. Spark follows the link and reads the files under it "
                    "again (a link to a folder above it, over and over), so rows would count more than once. Remove "
                    "the link, or point it at a folder outside the table's.")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


TABLE_FORMAT_MARKS = {"delta": "_delta_log", "hudi": ".hoodie", "iceberg": "metadata"}
"""Table formats whose folder keeps the files of earlier versions, and the folder that marks a table of each."""


def table_format(folder: str) -> str | None:
    """The table format a local folder is a table of (``delta``: it holds ``_delta_log/``; ``hudi``:
    ``.hoodie/``; ``iceberg``: ``metadata/*.metadata.json``), else None. Such a folder read as plain Parquet
    files gives the rows of every version, those since deleted or replaced too."""
    for fmt, mark in TABLE_FORMAT_MARKS.items():
        marker = os.path.join(folder, mark)
        if os.path.isdir(marker) and (fmt != "iceberg"
                                      or any(n.endswith(".metadata.json") for n in os.listdir(marker))):
            return fmt
    return None


def recursive_lookup(options: Mapping[str, Any]) -> bool:
    """Whether reader ``options`` set Spark's ``recursiveFileLookup`` (any letter case of key and value): every
    file below the folder is read, in key=value folders or not."""
    return any(str(k).lower() == "recursivefilelookup" and str(v).strip().lower() == "true"
               for k, v in options.items())


def in_plain_folder(relative: str) -> bool:
    """Whether a file below a table's folder (its path relative to it, '/' or os.sep between folders) lies in a
    folder that is not a ``key=value`` folder (``2026/01/05/a.csv``): Spark lists a table's own files and those
    of key=value folders only, unless ``recursiveFileLookup`` is set."""
    return any("=" not in seg for seg in relative.replace(os.sep, "/").split("/")[:-1])


def has_data_files(folder: str, glob: str | None = None) -> bool:
    """Whether a local folder holds a file below it that is not hidden (:func:`data_files`)."""
    return next(data_files(folder, glob), None) is not None


def expand_braces(glob: str) -> list[str]:
    """A Hadoop glob's ``{a,b}`` alternatives as fnmatch patterns: ``*.{csv,tsv}`` -> ``*.csv``, ``*.tsv``."""
    m = re.search(r"\{([^{}]*)\}", glob)
    if m is None:
        return [glob]
    return [x for alt in m.group(1).split(",") for x in expand_braces(glob[:m.start()] + alt + glob[m.end():])]


def input_glob(options: Mapping[str, Any]) -> str | None:
    """The reader's ``pathGlobFilter`` among ``input.options`` (Spark matches option keys in any case)."""
    return next((str(v) for k, v in options.items() if str(k).lower() == "pathglobfilter"), None)


TEMPORARY_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".inprogress", ".crdownload", ".download", ".filepart",
                      ".swp", ".writing", ".copying")
"""Name endings of files still being written, which their writers rename when done."""


def temporary_suffix(name: str) -> str | None:
    """The temporary ending of a file's name (``day.csv.tmp`` -> '.tmp'), or None."""
    return next((x for x in TEMPORARY_SUFFIXES if name.lower().endswith(x)), None)


def own_encoding(options: Mapping[str, Any]) -> bool:
    """Whether reader options name an encoding (Spark's keys, in any case)."""
    return any(str(k).lower() in ("encoding", "charset") for k in options)


COMPRESSION_SUFFIXES = (".gz", ".bz2", ".lz4", ".snappy", ".deflate", ".zst")
"""Endings of the compressed files Spark's text readers decompress by name."""


def name_kind(name: str) -> str:
    """The type a data file's name tells, compression left off, in lower case: 'part-0.CSV.gz' -> '.csv'."""
    low = name.lower()
    return os.path.splitext(low[:len(low) - len(compression(low))])[1]


def names_glob(names: Sequence[str]) -> str:
    """The ``pathGlobFilter`` that matches files named as ``names`` end, as they spell it, compression included:
    ``*.csv``, or ``*{.csv,.csv.gz}`` (not ``*.csv*``, which a ``day.csv.tmp`` matches too)."""
    endings = sorted({n[len(os.path.splitext(n[:len(n) - len(compression(n))])[0]):] for n in names})
    return f"*{endings[0]}" if len(endings) == 1 else "*{" + ",".join(endings) + "}"


def compression(name: str) -> str:
    """The compression ending of a file's name ('' for none)."""
    return next((s for s in COMPRESSION_SUFFIXES if name.lower().endswith(s)), "")


def header_slips(present: Sequence[str], missing: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """The usual reasons a table lacks named columns: (the delimiter, when the table has one column whose name
    holds ';', a tab or '|', i.e. a CSV read with the wrong one; each missing name's present column that differs
    only in letter case or surrounding spaces)."""
    have = list(present)
    sep = next((s for s in (";", "\t", "|") if len(have) == 1 and s in have[0]), None)
    folded = {h.strip().casefold(): h for h in have}
    return sep, {m: folded[m.strip().casefold()] for m in missing if m.strip().casefold() in folded}


def excel_sep_line(present: Sequence[str], sep: str = ",") -> str | None:
    """The delimiter that Excel's ``sep=;`` first line names, when a CSV's header came out as that line (columns
    ``sep=;``, or ``sep=`` and ``_c1`` where it names the reader's own ``sep``); None for any other header."""
    m = next((m for m in (re.fullmatch(r"\s*sep=(.?)\s*", h, re.IGNORECASE) for h in present) if m), None)
    return None if m is None else (m.group(1) or sep)


def sep_line_fix(delimiter: str, sep: str, option: str) -> str:
    """The error's sentence for a CSV whose first line is Excel's ``sep=`` line (:func:`excel_sep_line`):
    ``option`` is how the delimiter is given (``"input.options: {sep: ';'}"``) when it is not ``sep``."""
    return (f"The files' first line is 'sep={delimiter}', the line Excel writes (and reads) to name a CSV's "
            "delimiter, not the header: it was taken for the header and the header for a row. Remove that line "
            "from the files (e.g. sed -i 1d FILE, or export them without it)"
            + ("." if delimiter == sep else f", and give the delimiter: {option}."))
