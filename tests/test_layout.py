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


#: The places of an engine's slice, ``{e}`` its name.
SLICE = ("hw/{e}", "gen/{e}", "gen/{e}/studies", "sim/golden/{e}", "sim/tb/{e}", "tests/{e}",
         "docs/engines/{e}/index.md")


def _owner(module, names):
    """The engine whose slice holds ``module`` (dotted, from the repository root), or
    ``None`` for a shared module."""
    parts = module.split(".")
    for prefix in (("hw",), ("gen",), ("sim", "golden"), ("sim", "tb")):
        if tuple(parts[:len(prefix)]) == prefix and len(parts) > len(prefix) \
                and parts[len(prefix)] in names:
            return parts[len(prefix)]
    return None


def test_every_engine_has_its_slice():
    """Each registered engine lives in the same places: its RTL, hooks and studies,
    golden model, testbenches, tests and documentation."""
    from nnrtl.gen.engines import engines
    for name in engines():
        for place in SLICE:
            assert (ROOT / place.format(e=name)).exists(), place.format(e=name)


def test_shared_modules_import_no_engine_and_engines_import_no_other():
    """By the import graph (every import, relative ones resolved): a module outside the
    slices imports no engine's module, and an engine's module no other engine's."""
    from nnrtl.gen.engines import engines
    from test_imports import imports
    names = set(engines())
    found = []
    for top in ("hw", "gen", "sim", "boards"):
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            owner = _owner(module, names)
            for target, line, _ in imports(path):
                used = _owner(target or "", names)
                if used is not None and used != owner:
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert found == []
