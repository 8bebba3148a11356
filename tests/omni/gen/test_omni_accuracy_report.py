"""gen/omni/studies/accuracy_report.py: the sweep's tables and markdown, on setting rows made from
hand-written runs (numbers by hand)."""

import json
import re

import pytest

from nnrtl.gen.omni.studies.accuracy_report import markdown_tables, summary_table
from nnrtl.gen.omni.studies.accuracy_sweep import rows_from_lines


def hand_runs():
    """Two seeds of PyTorch, exact and both (perplexity): both is +1 % / +2 % from
    PyTorch and -8.18 % / +2 % from exact."""
    lines = []
    for seed, (torch_value, exact, both) in enumerate(((4.0, 4.4, 4.04), (5.0, 5.0, 5.1)), 1):
        common = dict(kind="run", task="text", metric="perplexity", seed=seed, seconds=1.0)
        lines += [dict(common, run="pytorch", threshold=0.0, value=torch_value),
                  dict(common, run="exact", threshold=0.0, value=exact,
                       stored_reduction=0.0),
                  dict(common, run="both", threshold=[0.05, 0.005], value=both,
                       stored_reduction=0.1, p1_density=0.8, skipped_per_epoch=[0.0, 0.2])]
    return json.loads(json.dumps(lines))


def test_markdown_tables_by_hand():
    rows = rows_from_lines(hand_runs())
    both = rows[2]
    assert both["relative_difference"] == pytest.approx([0.01, 0.02])
    assert both["vs_exact"] == pytest.approx([4.04 / 4.4 - 1, 0.02])
    markdown = markdown_tables(rows, "Title")
    assert markdown.startswith("## Title\n\n| task | run | θ/F | seeds |")
    # mean 1.5 %, SE 0.5 %, bound 1.5 + t(0.95, 1) 0.5 = 1.5 + 6.3138 * 0.5
    assert "| text | both | 0.05/0.005 | 2 | +1.50 % ± 0.50 % [+1.00 %, +2.00 %] | " \
        "+4.66 % | no / no | " in markdown
    # against exact: mean (-8.18 + 2.00) / 2 = -3.09 %, SE 5.09 %
    assert "| -3.09 % ± 5.09 % [-8.18 %, +2.00 %] | " in markdown
    assert "| -10.00 % | 0.800 | 10.0 % |" in markdown           # stored, P1, skipped
    assert "| seed | pytorch | exact | both 0.05/0.005 |" in markdown
    assert "| 1 | 4.0000 | 4.4000 (+10.00 %) | 4.0400 (+1.00 %; -8.18 %) |" in markdown
    assert "| 2 | 5.0000 | 5.0000 (+0.00 %) | 5.1000 (+2.00 %; +2.00 %) |" in markdown


def test_summary_table_by_hand():
    table = summary_table(rows_from_lines(hand_runs()))
    assert table.count("\n") == 3 + 3
    line = next(line for line in table.splitlines() if line.split()[:2] == ["text", "both"])
    # mean [min, max], SE, median, upper 95, within, vs exact, its upper 95, stored, P1
    assert re.search(r"\+1\.50 % \[\+1\.00 %, \+2\.00 %\] +0\.50 % +\+1\.50 % +\+4\.66 % +"
                     r"no \(not all seeds\) +-3\.09 % ± 5\.09 % +\+29\.05 % +-10\.00 % +"
                     r"0\.800 +10\.0 %", line)
