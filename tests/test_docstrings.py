"""Docstrings and comments state the present contract.

A docstring says what a unit is, its parameters, latency and throughput and what it raises;
history lives in git and ``docs/changelog.md``, measured figures in bench output, and the
narrative on the engine's docs page. This test walks every ``.py`` file under ``hw/``,
``gen/``, ``sim/`` and ``boards/`` and fails, listing ``file:line``, on

* a date (``2026-11-23``, ``2026-11-2x``, ``November 2026``), in a docstring or a comment;
* a tracker reference (``issue 25``, ``issues #3``, ``PR #4``, ``session 7``, a bare
  ``#12``); an upstream one names its repository (``YosysHQ/yosys#4451``);
* a path outside the repository (``../shared``, ``shared/specs``, ``papers/x.txt``,
  ``briefs/x.md``, ``DESIGN.md``, ``CONVENTIONS.md``, ``omni.md §3``); the engine specs
  are ``docs/engines/<engine>/spec.md``, "spec §3.2" where the engine is plain;
* history in a docstring (``History``, ``Plan for``, ``previously``, ``used to be``,
  ``was ... now``);
* a module docstring longer than :data:`MAX_MODULE_LINES` lines, unless listed in
  :data:`LONG_MODULE_DOCSTRINGS` with the reason.
"""

import ast
import io
import pathlib
import re
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP_DIRS = ("hw", "gen", "sim", "boards")
MAX_MODULE_LINES = 40

# Module docstrings that are the reference of an arithmetic or protocol contract, and may
# be longer than MAX_MODULE_LINES: path -> reason.
LONG_MODULE_DOCSTRINGS = {
    "hw/farnn/__init__.py": "the FARNN arithmetic contract between the RTL and the golden model "
                            "(gate order, MAC order, splitting, every rounding of FW and BW)",
}

_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
          r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")

# Rules for docstrings and comments alike: (name, pattern).
ANYWHERE = [
    ("date", re.compile(r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])(?:-(?:[0-3][\dx]|xx))?\b")),
    ("date", re.compile(rf"\b{_MONTH}\.? (?:[0-3]?\d(?:st|nd|rd|th)?,? )?(?:19|20)\d\d\b")),
    ("date", re.compile(rf"\b[0-3]?\d {_MONTH} (?:19|20)\d\d\b")),
    ("tracker reference", re.compile(r"\b(?:issues?|PRs?|pull requests?|tickets?|sessions?)"
                                     r" #?\d+\b", re.I)),
    ("tracker reference", re.compile(r"(?:^|[\s(,;])#\d+\b")),
    ("path outside the repository", re.compile(r"\.\./shared\b")),
    ("path outside the repository", re.compile(r"\bshared/(?:specs|papers|reviews)\b")),
    ("path outside the repository", re.compile(r"\bpapers/[\w./-]*\.txt\b")),
    ("path outside the repository", re.compile(r"\b(?:DESIGN|CONVENTIONS)\.md\b")),
    ("path outside the repository", re.compile(r"\bbriefs/[\w./-]+")),
    ("path outside the repository", re.compile(r"(?<![/\w])(?:spec )?(?:farnn|omni|fpdeep)\.md"
                                               r",? *§")),
]

# Rules for docstrings only.
HISTORY = [
    ("history", re.compile(r"\bHistory\b")),
    ("history", re.compile(r"\bPlan for\b")),
    ("history", re.compile(r"\bpreviously\b", re.I)),
    ("history", re.compile(r"\bused to (?:be|have|take|run|use|give|return|read)\b", re.I)),
    ("history", re.compile(r"\bwas\b[^.;:]{0,60}?,? now\b")),
    ("history", re.compile(r"\bBuilt \(part\b")),
    ("history", re.compile(r"\bTried and dropped\b")),
]


def _python_files():
    for top in TOP_DIRS:
        yield from sorted((ROOT / top).rglob("*.py"))


def _docstrings(tree):
    """Yield (kind, first line, text) for the module's, classes' and functions' docstrings."""
    nodes = [tree] + [node for node in ast.walk(tree)
                      if isinstance(node, (ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))]
    for node in nodes:
        body = node.body
        if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            kind = "module" if node is tree else "definition"
            yield kind, body[0].value.lineno, body[0].value.value


def _comments(source):
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string.lstrip("#")


def _check_lines(where, first_line, text, rules):
    found = []
    for offset, line in enumerate(text.splitlines()):
        for name, pattern in rules:
            match = pattern.search(line)
            if match:
                found.append(f"{where}:{first_line + offset}: {name}: {match.group(0).strip()!r}")
    return found


def _violations(path):
    where = path.relative_to(ROOT).as_posix()
    source = path.read_text()
    tree = ast.parse(source)
    found = []
    for kind, line, text in _docstrings(tree):
        found += _check_lines(where, line, text, ANYWHERE + HISTORY)
        if kind == "module":
            length = len(text.strip().splitlines())
            if length > MAX_MODULE_LINES and where not in LONG_MODULE_DOCSTRINGS:
                found.append(f"{where}:{line}: module docstring of {length} lines "
                             f"(at most {MAX_MODULE_LINES})")
    for line, text in _comments(source):
        found += _check_lines(where, line, text, ANYWHERE)
    return found


def test_docstrings_state_the_present_contract():
    found = [violation for path in _python_files() for violation in _violations(path)]
    assert not found, f"{len(found)} docstring/comment violations:\n" + "\n".join(found)


def test_allow_list_is_current():
    """Every allow-listed module exists and still needs its entry."""
    for where in LONG_MODULE_DOCSTRINGS:
        path = ROOT / where
        assert path.exists(), where
        docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        assert len(docstring.strip().splitlines()) > MAX_MODULE_LINES, where


def test_rules_catch_what_they_name():
    bad = ["Measured on 2026-11-23.", "(2026-11-2x)", "in November 2026", "see issue 25",
           "issues #3 and #4", "from session 12", "fixed in #12",
           "../shared/specs/farnn.md", "shared/papers/x.txt", "papers/eta-lstm-2020.txt",
           "shared/DESIGN.md", "spec omni.md §3.6", "(farnn.md §4",
           "briefs/farnn-contract.md"]
    for text in bad:
        assert _check_lines("x", 1, text, ANYWHERE), text
    history = ["History.", "Plan for part 2", "previously 369 LUTs", "it used to be 3",
               "the FIFO was 4 deep, now 8"]
    for text in history:
        assert _check_lines("x", 1, text, HISTORY), text
    fine = ["was this the last beat", "IEEE 754-2008", "a register used to index the bank",
            "x[#0]", "2**20-1", "width 2026", "the pipe was full; it now drains",
            "May be None", "see spec §3.2 [U]", "docs/engines/farnn/spec.md §4",
            "YosysHQ/yosys#4451", "pytorch/pytorch#77573"]
    for text in fine:
        assert not _check_lines("x", 1, text, ANYWHERE + HISTORY), text
