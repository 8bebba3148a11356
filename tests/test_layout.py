"""The repository layout and the two-command setup stay as the README says."""

import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP_DIRS = {"hw": "nnrtl.hw", "gen": "nnrtl.gen", "sim": "nnrtl.sim", "boards": "nnrtl.boards"}


def test_fixed_layout_exists():
    for name in ("pyproject.toml", "Makefile", "README.md", ".ci/run", "hw", "gen", "sim",
                 "boards", "tests"):
        assert (ROOT / name).exists(), name


def test_every_package_is_listed_in_pyproject():
    """A wheel only holds the packages pyproject lists; a missing one would work in the
    editable install and break after ``pip install nnrtl``."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = set()
    for top, package in TOP_DIRS.items():
        for init in (ROOT / top).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((package, *relative)))
    assert found == listed


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci/run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^make demo$", readme, re.M) and re.search(r"^make test$", readme, re.M)
