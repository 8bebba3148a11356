"""gen/omni/accounting.py: footprint and data movement per iteration."""

import numpy as np
import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.accounting import (TABLE_I, Workload, data_movement, footprint,
                                       parameter_bytes, reduction, table_one)

SMALL = Workload(input_size=3, hidden_size=2, layers=2, length=4, batch=5)
KEPT = np.array([[True] * 4, [False, False, True, True]])


def test_footprint_by_hand():
    assert [parameter_bytes(SMALL, layer) for layer in (0, 1)] == [192, 160]
    assert footprint(SMALL) == dict(weights=704, activations=720, intermediates=1600,
                                    total=3024)
    # MS1 at density 1/2: per cell 30 bitmaps of 1 byte + 30 survivors of 4 bytes
    assert footprint(SMALL, density=0.5)["intermediates"] == 8 * 150
    kept = footprint(SMALL, kept=KEPT)
    assert (kept["activations"], kept["intermediates"]) == (560, 1200)


def test_data_movement_by_hand():
    base = data_movement(SMALL)
    assert (base["weights"], base["weight_gradients"]) == (2816, 2816)
    assert base["weight_matrices"] == 5632
    assert (base["activations"], base["intermediates"]) == (1440, 3200)
    ms2 = data_movement(SMALL, kept=KEPT)
    assert (ms2["weights"], ms2["weight_gradients"]) == (2496, 2176)
    ms1 = data_movement(SMALL, density=0.5)
    assert ms1["activations"] == base["activations"]
    assert ms1["weight_gradients"] == base["weight_gradients"] / 2


def test_table_one_sizes_match_the_spec():
    """Spec §1.3: parameters and baseline intermediates of the six Table I shapes."""
    params = {name: sum(parameter_bytes(w, layer) for layer in range(w.layers)) / 1e6
              for name, w in TABLE_I.items()}
    assert [round(params[n]) for n in TABLE_I] == [604, 302, 403, 101, 134, 262]
    inter = [footprint(w)["intermediates"] / 1e9 for w in TABLE_I.values()]
    assert [round(v, 2) for v in inter] == [0.28, 0.55, 1.57, 1.01, 1.58, 4.96]


def test_table_one_signs():
    table = table_one()
    average = table.pop("average")
    for row in table.values():
        assert row["ms1"]["activations"] == 0
        assert row["ms2"]["activations"] == pytest.approx(100 * row["skipped"])
        assert row["ms1+ms2"]["intermediates"] >= row["ms1"]["intermediates"] > 0
        assert row["ms1+ms2"]["footprint"] >= row["ms2"]["footprint"]
    assert 0 < average["ms1"]["footprint"] < average["ms1+ms2"]["footprint"] < 100


def test_reduction_and_errors():
    assert reduction({"a": 4, "b": 0}, {"a": 1, "b": 0}) == {"a": 75.0, "b": 0.0}
    with pytest.raises(TypeError, match=r"^hidden_size must be a positive integer, "
                                        r"not 0$"):
        Workload(input_size=1, hidden_size=0, layers=1, length=1, batch=1)
    with pytest.raises(UsageError, match=r"^kept must be layers x length = 2 x 4, not "
                                         r"\(4, 2\)$"):
        footprint(SMALL, kept=np.ones((4, 2)))
