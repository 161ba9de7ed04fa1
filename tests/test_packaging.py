"""The wheel ships schemas/ and prompts/, and an installed `ralph` finds them from anywhere."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from .conftest import EXAMPLE_LOOP, REPO


def fresh_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A new venv that sees this environment's dependencies (offline) but not its ralph."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_dir = venv / "lib" / version / "site-packages"
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_dir / "_test_deps.pth").write_text("\n".join(deps) + "\n")
    return venv, site_dir


def pip_into(venv: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-deps", "--no-index", "--no-build-isolation", "-q", *args],
        check=True,
    )  # fmt: skip


def run_installed(venv: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(venv / "bin" / "ralph"), *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(REPO / ".aiwg", project / ".aiwg")
    (project / "src" / "deep").mkdir(parents=True)
    return project / "src" / "deep"


def test_wheel_contains_package_data_and_installed_ralph_uses_it(
    tmp_path: Path, project: Path
) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    # the build backend's PEP 517 hook, as `pip wheel` calls it (without pip's second of startup)
    build = f"from hatchling.build import build_wheel; build_wheel({str(dist)!r})"
    subprocess.run([sys.executable, "-c", build], cwd=REPO, check=True)
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "ralph/schemas/reflection-memory.schema.json",
        "ralph/schemas/loop-state.schema.json",
        "ralph/schemas/config.schema.json",
        "ralph/prompts/actor.mustache",
        "ralph/prompts/reflection.mustache",
        "ralph/prompts/repair.mustache",
    ):
        assert expected in names
    venv, site_dir = fresh_venv(tmp_path)
    pip_into(venv, str(wheel))
    located = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import ralph, ralph.schemas as s;"
         "print(ralph.__file__); print(s.package_data('schemas'))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.splitlines()  # fmt: skip
    assert all(line.startswith(str(site_dir)) for line in located)
    validate = run_installed(venv, project, "reflections", "validate")
    assert validate.returncode == 0, validate.stderr
    assert "4 valid, 0 invalid" in validate.stdout
    listing = run_installed(venv, project, "reflections", "list")
    assert EXAMPLE_LOOP in listing.stdout


def test_editable_install_finds_package_data(tmp_path: Path, project: Path) -> None:
    venv, _ = fresh_venv(tmp_path)
    pip_into(venv, "-e", str(REPO))
    validate = run_installed(venv, project, "reflections", "validate")
    assert validate.returncode == 0, validate.stderr
    assert "4 valid, 0 invalid" in validate.stdout


DISTRIBUTION = "ralph-reflexion"  # free on PyPI (2026-11-29); `ralph-loop` is another project
INSTALL_HINT = re.compile(r"pip install [\"']([\w.-]+)\[([\w,]+)\]")


def test_the_distribution_name_is_ours_and_every_install_hint_names_it() -> None:
    """`ralph-loop` on the package index is another project (an autonomous development loop,
    0.6.0): `pip install 'ralph-loop[mcp]'`, as ralph's hints said, installed someone else's
    code. Every hint, doc and workflow names this project's distribution and a real extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    extras = set(project["optional-dependencies"])
    texts = [*(REPO / "ralph").rglob("*.py"), REPO / "README.md", *(REPO / "docs").rglob("*.md")]
    texts += [*(REPO / "examples").rglob("*.yml"), REPO / "action.yml"]
    hints = [m for path in texts for m in INSTALL_HINT.finditer(path.read_text())]
    assert len(hints) >= 5
    for hint in hints:
        assert hint[1] == DISTRIBUTION, hint[0]
        assert set(hint[2].split(",")) <= extras, hint[0]
    for path in texts:
        assert "ralph-loop[" not in path.read_text(), path
