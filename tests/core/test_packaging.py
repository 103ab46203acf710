"""The built wheel holds every subpackage of the mapped folders and their data files, and the
build warns of nothing setuptools will stop accepting (a licence table, a data folder that is no
package)."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"rubricgym": "rubricgym", "adapters": "rubricgym/adapters",
           "trainers": "rubricgym/trainers", "operator_libraries": "rubricgym/operator_libraries"}
DATA_SUFFIXES = {".yaml", ".json", ".md", ".tw-pddl"}


@pytest.mark.slow
@pytest.mark.xdist_group("source-tree-wheel")  # both build in the source tree (build/, *.egg-info)
def test_wheel_contains_all_packages_and_data(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", str(ROOT), "-w", str(tmp_path)],
                           check=True, capture_output=True, text=True)
    warned = [line.strip() for line in (build.stdout + build.stderr).splitlines() if "BuildBackendWarning" in line]
    assert not warned, warned
    names = set(zipfile.ZipFile(next(tmp_path.glob("rubricgym-*.whl"))).namelist())
    expected = []
    for folder, package_path in FOLDERS.items():
        for f in (ROOT / folder).rglob("*"):
            if "__pycache__" in f.parts or not f.is_file():
                continue
            if f.suffix == ".py" or (f.suffix in DATA_SUFFIXES and f.name != "README.md"):
                expected.append(f"{package_path}/{f.relative_to(ROOT / folder).as_posix()}")
    missing = [e for e in expected if e not in names]
    assert not missing, missing[:10]
    assert "rubricgym/operator_libraries/alfworld.yaml" in names
