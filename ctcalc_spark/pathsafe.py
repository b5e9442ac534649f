"""Turning user-supplied names (model, pipeline, run) into file and folder names that stay where they belong.

A name such as ``../../x`` or ``a/b`` must neither leave the output folder nor
create sub-folders. :func:`safe_component` keeps letters, digits, ``.``, ``_``
and ``-``, replaces everything else by ``_``, drops leading dots and dashes
(no hidden files, no ``..``, nothing that reads as an option) and, whenever it
changed the name, appends a short hash of the original so two different names
never share a folder (``a/b`` and ``a_b`` stay apart).
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path

from ctcalc_spark.errors import ConfigError

MAX_COMPONENT = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_component(name: str) -> str:
    """One path component for ``name``: ``'deepfm_bn'`` stays, ``'../../x'`` -> ``'_.._x-<hash>'``.

    >>> safe_component("deepfm_bn")
    'deepfm_bn'
    >>> safe_component("a/b") != safe_component("a_b")
    True
    """
    text = str(name)
    clean = _UNSAFE.sub("_", text).lstrip(".-")[:MAX_COMPONENT] or "_"
    if clean == text:
        return clean
    return f"{clean}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def child_path(root: str | Path, *names: str) -> Path:
    """``root / safe(name1) / safe(name2) ...``, checked to lie inside ``root``."""
    base = Path(root)
    out = base.joinpath(*(safe_component(n) for n in names))
    if not out.resolve().is_relative_to(base.resolve()):  # cannot happen with safe components; kept as a guard
        raise ConfigError(f"Expected a path inside {str(base)!r}, got {str(out)!r} from names {list(names)}.")
    return out


def unwritable_reason(path: str | Path) -> str | None:
    """Why a local folder cannot be created or written by this process (None when it can): the nearest existing
    folder on the way to it is a file, on a read-only file system, or not writable by this user. A check made
    before the work, so that a job does not scan first and fail in its first write."""
    here = os.path.abspath(os.path.expanduser(str(path)))
    while not os.path.isdir(here):
        if os.path.lexists(here):
            return f"{here!r} is a file, not a folder"
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    if os.access(here, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(here).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{here!r} is on a read-only file system" if read_only else f"{here!r} is not writable by this user"


def report_root(output_path: str) -> Path:
    """The local folder under which a report goes by default: ``output.path`` itself, a ``file:`` URI as its
    path. Reports are written by this process with Python's file functions, so a remote output.path (``s3a://``,
    ``hdfs://``, ...) cannot hold them: ConfigError naming ``--out``. (Read as a plain path, a ``file:`` URI
    would be a relative folder named ``file:``.)"""
    text = str(output_path)
    if text.startswith("file:"):
        rest = text[len("file:"):]
        return Path("/" + rest.lstrip("/")) if rest.startswith("/") else Path(rest)
    if "://" in text:
        raise ConfigError(f"output.path {text!r} is not on this machine's file system, and reports are written "
                          "here: pass --out with a local folder for the report (the tables are read from "
                          "output.path as before).")
    return Path(text).expanduser()


def check_report_folder(path: str | Path) -> None:
    """ConfigError before a report's work when its folder cannot be written (the tables it reads may well be
    read-only: a shared metrics store)."""
    why = unwritable_reason(path)
    if why is not None:
        raise ConfigError(f"The report folder {str(path)!r} cannot be written: {why}. Pass --out with a folder this "
                          "user can write (the tables are only read).")


def write_atomic(path: str | Path, text: str) -> Path:
    """Write a report file so that a reader (a browser, a dashboard, a rerun's reader) sees the old file or the
    whole new one, never a torn one: a hidden temporary file in the same folder, then one rename. A failed or
    interrupted write removes its temporary file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
