"""The hash-locked sets the images install (docker/locks/*.txt, made by docker/lock.sh): offline checks that fail
when a lock drifts from requirements*.txt or from the wheel's declared dependencies. Regenerate with
``bash docker/lock.sh``."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "docker" / "locks"
# target -> (its hash-locked file, the wheel's extras it carries, further requirements it installs)
TARGETS = {
    "jobs": ("jobs.txt", ["spark", "reports"], []),
    "scoring": ("scoring.txt", ["spark", "reports", "torch"], []),
    "airflow": ("airflow.txt", ["spark", "reports", "airflow"],
                ["apache-airflow[postgres]", "apache-airflow-providers-fab", "pyspark-client"]),
}
FIX = "run `bash docker/lock.sh` (uv 0.13) and commit docker/locks/"


def _entries(path: Path) -> dict[str, tuple[str, list[str]]]:
    """{normalised name: (requirement as written, its --hash values)} of a pip requirements file."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, *options = re.split(r"\s+(?=--)", line)
        req = Requirement(spec)
        out[canonicalize_name(req.name)] = (spec, [o.split("=", 1)[1] for o in options if o.startswith("--hash=")])
    return out


def _versions(path: Path) -> dict[str, str]:
    """{normalised name: version} of the exact (==) pins of a requirements or lock file."""
    return {name: spec.split("==", 1)[1] for name, (spec, _) in _entries(path).items() if "==" in spec}


def _our_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for path in sorted(ROOT.glob("requirements*.txt")):
        pins.update(_versions(path))
    return pins


def _declared(extras: list[str], extra_requirements: list[str]) -> set[str]:
    """Names of what pyproject.toml makes the wheel require with these extras, and of the further requirements."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [r for e in extras for r in project["optional-dependencies"][e]]
    return {canonicalize_name(Requirement(r).name) for r in specs + extra_requirements}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_line_of_a_lock_is_pinned_with_a_hash(target):
    entries = _entries(LOCKS / TARGETS[target][0])
    assert len(entries) > 10
    unpinned = [spec for spec, _ in entries.values() if not re.fullmatch(r"[\w.-]+(\[[\w,.-]+\])?==[\w.+!-]+", spec)]
    assert unpinned == [], f"{target}: not pinned with == : {unpinned}; {FIX}"
    unhashed = [spec for spec, hashes in entries.values()
                if not hashes or not all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes)]
    assert unhashed == [], f"{target}: no sha256 --hash for {unhashed}; {FIX}"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_lock_has_the_versions_of_requirements_txt(target):
    lock, ours = _versions(LOCKS / TARGETS[target][0]), _our_pins()
    differ = {name: f"lock {lock[name]}, requirements*.txt {ours[name]}" for name in lock
              if name in ours and Version(lock[name]) != Version(ours[name])}
    assert differ == {}, f"{target}: {differ}; {FIX}"
    if "pyspark-client" in lock:  # the two install into one pyspark/ folder
        assert lock["pyspark-client"] == lock["pyspark"]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_lock_holds_every_dependency_the_wheel_declares_for_its_extras(target):
    file, extras, more = TARGETS[target]
    held = set(_versions(LOCKS / file)) | ({"torch"} if "torch" in extras else set())  # torch: torch.txt
    missing = sorted(_declared(extras, more) - held)
    assert missing == [], f"{target}: {missing} declared (pyproject.toml [{','.join(extras)}]), not locked; {FIX}"
    if target == "airflow":  # the [postgres] extra's provider
        assert "apache-airflow-providers-postgres" in held


def test_the_layers_of_an_image_agree_on_every_shared_package():
    """scoring installs over jobs, airflow over jobs or scoring (AIRFLOW_BASE): no package may change version."""
    jobs, scoring, airflow = (_versions(LOCKS / f"{t}.txt") for t in ("jobs", "scoring", "airflow"))
    assert {n: (v, scoring.get(n)) for n, v in jobs.items() if scoring.get(n) != v} == {}, FIX
    assert {n: (v, airflow.get(n)) for n, v in jobs.items() if airflow.get(n) != v} == {}, FIX
    assert {n: (v, scoring[n]) for n, v in airflow.items() if n in scoring and scoring[n] != v} == {}, FIX


def test_torch_is_the_cpu_build_of_the_tested_version():
    entries = _entries(LOCKS / "torch.txt")
    assert list(entries) == ["torch"]
    spec, hashes = entries["torch"]
    assert spec == f"torch=={_our_pins()['torch']}+cpu" and hashes == [], FIX


def test_constraints_hold_the_pins_of_the_runtime_torch_and_airflow_sets():
    """docker/locks/constraints.txt (shipped in the wheel, `ctcalc where locks`) is what `pip install --constraint`
    takes: the pins of requirements.txt, requirements-torch.txt and requirements-airflow.txt, no more, no less."""
    want: dict[str, str] = {}
    for name in ("requirements.txt", "requirements-torch.txt", "requirements-airflow.txt"):
        want.update(_versions(ROOT / name))
    assert _versions(LOCKS / "constraints.txt") == want, "run `bash docker/lock.sh constraints`; commit docker/locks/"
