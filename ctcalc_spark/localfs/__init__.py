"""A faster file system for ``file://`` paths in local Spark sessions (``spark.fast_local_files``).

pyspark ships Hadoop without its native library, so Hadoop's local file system sets every permission by
starting a ``chmod`` process: about 26 processes for each Parquet partition file Spark writes. A job that
writes a year of daily partitions spends most of its time there. ``NioLocalFileSystem.java`` (built into
``ctcalc-localfs.jar`` by ``scripts/build_localfs_jar.sh``) is Hadoop's ``LocalFileSystem`` setting the same
permission bits through java.nio. Files, folders, checksums and the commit protocol are Hadoop's own.

It is used only where ctcalc starts the JVM itself for a local master: the jar must be on the JVM's class
path at launch. Under spark-submit, on Spark Connect and on cluster masters nothing changes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

JAR = Path(__file__).with_name("ctcalc-localfs.jar")
CLASS = "ctcalc.localfs.NioLocalFileSystem"
IMPL_KEY = "spark.hadoop.fs.file.impl"
CLASS_PATH_KEY = "spark.driver.extraClassPath"


def launch_settings(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The launch settings that make a local session's ``file://`` paths use :data:`CLASS`; empty where they do
    not apply: a non-local master, a config that chooses its own ``fs.file.impl``, or no jar in the install."""
    if not master.startswith("local") or IMPL_KEY in conf or not JAR.is_file():
        return {}
    path = conf.get(CLASS_PATH_KEY)
    return {IMPL_KEY: CLASS, CLASS_PATH_KEY: f"{path}{os.pathsep}{JAR}" if path else str(JAR)}


PROBE_SQL = f"SELECT reflect('java.lang.Class', 'forName', '{CLASS}') AS loaded"
"""Fails when the JVM cannot load :data:`CLASS` (a JVM this process started earlier without the jar)."""
