"""What the ``nnrtl sim`` tests check of every engine's output."""

import json

#: Keys every engine's ``nnrtl sim`` JSON line has.
REQUIRED = ("bit_exact", "mismatches", "first_mismatch", "cycles", "model_cycles",
            "useful_macs", "utilization", "stall_cycles")


def sim_json_line(capsys, code):
    """The result of a ``nnrtl sim`` call that returned ``code``: exit code 0, exactly one
    line of JSON on stdout with the :data:`REQUIRED` keys, bit-exact."""
    out = capsys.readouterr().out
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    for key in REQUIRED:
        assert key in result
    assert result["bit_exact"] is True
    assert result["mismatches"] == 0 and result["first_mismatch"] is None
    return result
