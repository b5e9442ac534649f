"""Paths and small file operations on the output file system, without Spark (pyarrow's file systems).

Used to look at the input before a scan (folders, headers, Parquet footers), by the output tables for their
locations, and by the streaming job for its error records and the footers of the files it reads. Local paths,
``file://``, ``hdfs://`` (needs libhdfs), ``s3://``/``s3a://``, ``gs://`` and ``abfs://`` go through ``pyarrow.fs``;
the same credentials as the Spark job are expected in the environment.
"""
from __future__ import annotations

import datetime as dt
import os
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctcalc_spark.errors import ConfigError
from ctcalc_spark.pathsafe import write_atomic

if TYPE_CHECKING:
    import pyarrow.fs as pafs


@dataclass(frozen=True)
class Entry:
    """One name in a folder: its name, whether it is a folder, its modification time (seconds)."""

    name: str
    is_dir: bool
    mtime: float


def is_local(path: str) -> bool:
    """Whether ``path`` is on the local file system."""
    return path.startswith("file:") or "://" not in path


def absolute(path: str) -> str:
    """Local paths (``file:`` URIs as their path, ``~`` expanded) made absolute here, so that this process's
    notion of a relative path and Spark's cannot differ (a Spark Connect server resolves one against its own
    working folder); other URIs without a trailing '/'."""
    return os.path.abspath(os.path.expanduser(local_path(path))) if is_local(path) else path.rstrip("/")


def local_path(path: str) -> str:
    """The local path of a ``file:`` URI or plain path."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if path.startswith("file:"):
        return path[len("file:"):]
    return path


_GLOB_CHARACTERS = re.compile(r"([\\{}\[\]*?])")


def literal_path(path: str) -> str:
    """``path`` for Spark's readers, which read ``[ ] { } * ?`` in a path as a glob pattern: a local file or
    folder that exists under that very name (``exports [v2]``, ``run{1}``, which Spark called a path that does
    not exist) with those characters escaped; any other path as it is (a glob stays a glob)."""
    if not is_local(path) or not _GLOB_CHARACTERS.search(path) or not os.path.exists(local_path(path)):
        return path
    return _GLOB_CHARACTERS.sub(r"\\\1", path)


def csv_first_record(data: bytes, sep: str = ",") -> tuple[list[str], bool]:
    """(the first record's fields, whether a non-blank line follows it) of a CSV file's first bytes ``data``,
    read as UTF-8 (a byte-order mark dropped)."""
    import csv

    first, _, rest = data.decode("utf-8", errors="replace").lstrip("\ufeff").partition("\n")
    return next(csv.reader([first.rstrip("\r")], delimiter=sep), []), bool(rest.strip())


def _arrow_kind(kind: Any) -> str:
    """text, number, boolean, time or the type's name, of a pyarrow type."""
    import pyarrow as pa

    checks = (("text", (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)),
              ("number", (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)),
              ("boolean", (pa.types.is_boolean,)), ("time", (pa.types.is_timestamp, pa.types.is_date)))
    return next((name for name, tests in checks if any(t(kind) for t in tests)), str(kind))


def _spark_kind(kind: Any) -> str:
    """text, number, boolean, time or the type's name, of a Spark type."""
    name = kind.typeName()
    if name in ("string", "varchar", "char"):
        return "text"
    if name in ("byte", "short", "integer", "long", "float", "double", "decimal"):
        return "number"
    return {"boolean": "boolean", "date": "time", "timestamp": "time", "timestamp_ntz": "time"}.get(name, name)


class FileStore:
    """File operations under one root URI; paths given to the methods are relative to nothing (full URIs)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self._fs = _filesystem(self.root)

    def _p(self, path: str) -> str:
        """The path in pyarrow's terms: local absolute path, ``bucket/key``, ``/path`` on HDFS."""
        path = path.rstrip("/")
        if is_local(path):
            return os.path.abspath(local_path(path))
        scheme, rest = path.split("://", 1)
        if scheme.lower() in ("hdfs", "viewfs"):
            return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        if scheme.lower() in ("abfs", "abfss"):
            authority, _, key = rest.partition("/")
            return f"{authority.split('@', 1)[0]}/{key}"
        return rest

    def exists(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return self._fs.get_file_info(self._p(path)).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return self._fs.get_file_info(self._p(path)).type == pafs.FileType.Directory

    def list(self, path: str) -> list[Entry]:
        """The entries of a folder (empty if it does not exist), sorted by name."""
        import pyarrow.fs as pafs

        if not self.is_dir(path):
            return []
        infos = self._fs.get_file_info(pafs.FileSelector(self._p(path), recursive=False, allow_not_found=True))
        out = [Entry(i.base_name, i.type == pafs.FileType.Directory,
                     i.mtime.timestamp() if i.mtime is not None else 0.0) for i in infos]
        return sorted(out, key=lambda e: e.name)

    def newest_mtime(self, path: str) -> float:
        """The latest modification time of anything below ``path`` (0 if nothing is there)."""
        import pyarrow.fs as pafs

        infos = self._fs.get_file_info(pafs.FileSelector(self._p(path), recursive=True, allow_not_found=True))
        times = [i.mtime.timestamp() for i in infos if i.mtime is not None]
        own = self._fs.get_file_info(self._p(path))
        if own.mtime is not None:
            times.append(own.mtime.timestamp())
        return max(times, default=0.0)

    def delete(self, path: str) -> None:
        """Remove a file or a folder with everything below it; nothing if it does not exist."""
        import pyarrow.fs as pafs

        info = self._fs.get_file_info(self._p(path))
        if info.type == pafs.FileType.Directory:
            self._fs.delete_dir(self._p(path))
        elif info.type != pafs.FileType.NotFound:
            self._fs.delete_file(self._p(path))

    def mkdirs(self, path: str) -> None:
        self._fs.create_dir(self._p(path), recursive=True)

    def parquet_rows(self, path: str) -> int:
        """The row count in a Parquet file's footer (raises OSError or pyarrow's ArrowInvalid if unreadable)."""
        import pyarrow.parquet as pq

        with self._fs.open_input_file(self._p(path)) as f:
            return int(pq.read_metadata(f).num_rows)

    def parquet_type_clash(self, path: str, schema: Any) -> str | None:
        """Where a Parquet file's footer gives a column of ``schema`` (a Spark StructType) a type of another kind
        (text where numbers are read, say): a phrase naming the column and both types; None when every kind agrees
        (raises OSError or pyarrow's ArrowInvalid if the footer is unreadable)."""
        import pyarrow.parquet as pq

        with self._fs.open_input_file(self._p(path)) as f:
            got = pq.read_schema(f)
        for field in schema.fields:
            if field.name in got.names and _arrow_kind(got.field(field.name).type) != _spark_kind(field.dataType):
                return (f"its column {field.name!r} is {got.field(field.name).type} where the stream reads "
                        f"{field.dataType.simpleString()}: a file written with other types")
        return None

    def csv_head(self, path: str, sep: str = ",", limit: int = 1 << 16) -> tuple[list[str], bool]:
        """(the first record's fields, whether a non-blank line follows it) of a CSV file, from its first
        ``limit`` bytes (a ``.gz``/``.bz2``/... file is decompressed by its extension); raises OSError or
        pyarrow's ArrowInvalid if the bytes cannot be read or decompressed."""
        return csv_first_record(self.head(path, limit), sep)

    def head(self, path: str, limit: int) -> bytes:
        """The first ``limit`` bytes of a file, decompressed by its extension (``.gz``, ``.bz2``, ...); raises
        OSError or pyarrow's ArrowInvalid if they cannot be read or decompressed."""
        with self._fs.open_input_stream(self._p(path), compression="detect") as f:
            return bytes(f.read(limit))

    def read_text(self, path: str) -> str:
        with self._fs.open_input_stream(self._p(path)) as f:
            return f.read().decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        """Write a file so that readers see the old content or the whole new one (temporary file, then move)."""
        parent, name = path.rstrip("/").rsplit("/", 1)
        self.mkdirs(parent)
        if is_local(path):
            write_atomic(self._p(path), text)
            return
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with self._fs.open_output_stream(self._p(tmp)) as f:
                f.write(text.encode("utf-8"))
            if self.exists(path):
                self.delete(path)  # object stores: move does not replace
            self._fs.move(self._p(tmp), self._p(path))
        except BaseException:  # a failed or interrupted write leaves no temporary file
            self.delete(tmp)
            raise


def _filesystem(root: str) -> pafs.FileSystem:
    """A pyarrow file system for a root URI."""
    import pyarrow.fs as pafs

    if is_local(root):
        return pafs.LocalFileSystem()
    scheme = root.split("://", 1)[0].lower()
    uri = root
    if scheme in ("s3a", "s3n"):
        uri = "s3://" + root.split("://", 1)[1]
    try:
        if scheme == "gs" and "?" not in root:
            # pyarrow leaves the retry period to the GCS client, which keeps retrying a call without network or
            # credentials (a silent hang); a call gives up after GCS_RETRY_S
            return pafs.GcsFileSystem(retry_time_limit=dt.timedelta(seconds=GCS_RETRY_S))
        fs, _ = pafs.FileSystem.from_uri(uri)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for unsupported schemes/missing libs
        raise ConfigError(
            f"Cannot open {root!r} for file operations ({e}); the file system must be one pyarrow reaches "
            "(local, hdfs with libhdfs, s3, gs, abfs), or use catalog tables ('output.database')."
        ) from e
    return fs


GCS_RETRY_S = 60.0
"""How long a file operation on gs:// retries before it fails (pyarrow's default leaves it to the GCS client)."""
