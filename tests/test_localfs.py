"""ctcalc_spark.localfs: the checked-in jar is its source's build, local sessions write through it with the
permissions Hadoop's own local file system gives, and a JVM started without it falls back to Hadoop's."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctcalc_spark import localfs

ROOT = Path(__file__).resolve().parents[1]


def _javac_major() -> int | None:
    if shutil.which("javac") is None:
        return None
    out = subprocess.run(["javac", "-version"], capture_output=True, text=True).stdout.split()
    return int(out[-1].split(".")[0]) if out else None


def test_checked_in_jar_is_the_build_of_its_source(tmp_path):
    if _javac_major() != 17:  # another javac may emit other bytes for the same source
        pytest.skip("needs javac 17 to rebuild the jar byte for byte")
    out = tmp_path / "rebuilt.jar"
    subprocess.run(["bash", str(ROOT / "scripts" / "build_localfs_jar.sh"), str(out)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHON": sys.executable}, capture_output=True)
    assert out.read_bytes() == localfs.JAR.read_bytes(), "run scripts/build_localfs_jar.sh and commit the jar"


def test_launch_settings_only_for_local_masters_and_never_over_the_users_choice():
    jar = str(localfs.JAR)
    assert localfs.launch_settings("local[2]", {}) == {localfs.IMPL_KEY: localfs.CLASS, localfs.CLASS_PATH_KEY: jar}
    assert localfs.launch_settings("spark://127.0.0.1:7077", {}) == {}
    assert localfs.launch_settings("yarn", {}) == {}
    assert localfs.launch_settings("local", {localfs.IMPL_KEY: "org.apache.hadoop.fs.RawLocalFileSystem"}) == {}
    assert localfs.launch_settings("local", {localfs.CLASS_PATH_KEY: "/opt/x.jar"})[localfs.CLASS_PATH_KEY] == \
        f"/opt/x.jar{os.pathsep}{jar}"


def test_local_session_writes_through_it_with_hadoops_permissions(spark, tmp_path):
    assert spark.conf.get(localfs.IMPL_KEY, None) == localfs.CLASS
    df = spark.createDataFrame([(f"d{i}", float(i)) for i in range(6)], "ds string, x double")
    out = tmp_path / "t"
    df.repartition(2, "ds").write.partitionBy("ds").parquet(str(out))
    # Hadoop's default umask is 022: files rw-r--r--, folders rwxr-xr-x (the modes its chmod process would set)
    files = [p for p in out.rglob("*") if p.is_file()]
    folders = [p for p in out.rglob("*") if p.is_dir()]
    assert len([p for p in files if p.suffix == ".parquet"]) == 6 and len(folders) == 6
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o644}
    assert {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o755}
    assert sorted(r.x for r in spark.read.parquet(str(out)).collect()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.slow
def test_a_jvm_started_without_the_jar_falls_back_to_hadoops_file_system(tmp_path):
    script = textwrap.dedent(f"""
        import logging
        logging.basicConfig(level=logging.INFO)
        from pyspark.sql import SparkSession
        SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate().stop()
        from ctcalc_spark.config import SparkConfig
        from ctcalc_spark.spark.session import build_session
        spark = build_session(SparkConfig(master="local[1]", shuffle_partitions=1))
        spark.range(3).write.parquet({str(tmp_path / "t")!r})
        print("impl", spark.conf.get("{localfs.IMPL_KEY}", None), "rows", spark.read.parquet({str(tmp_path / "t")!r}).count())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "impl None rows 3" in done.stdout
    assert "started earlier in this process without ctcalc's local file system" in done.stderr
