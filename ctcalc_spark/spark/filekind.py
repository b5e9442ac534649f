"""What a local input file is, from its first bytes, for the errors of a job that could not read it as
``input.format`` says: a Feather file read as CSV gave column names like ``'ARROW1\\x00…'`` and "lacks
column(s)", a CSV file read as Parquet gave "Could not read footer". Nothing here reads more than a file's
first bytes, and only on those error paths.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

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
