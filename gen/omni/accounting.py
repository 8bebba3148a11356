"""Memory footprint and data movement of one training iteration (spec §5.5-5.6).

Counts in bytes, fp32, in the paper's three categories (Figs. 17-18): weight matrices,
activation data (``x_t``, ``h_{t-1}``) and intermediate variables (``i, f, c, o, s``, or
MS1's compressed BP-EW-P1 records of :mod:`.compress`). The bench and the cycle model use
:func:`footprint` and :func:`data_movement`; :func:`table_one` gives the six Table I
shapes beside the paper's averages.

Model [U, the paper gives no formula; decided here]
    * Weights do not stay on chip from one cell to the next (Table I's weights are
      101-604 MB; the VCU128 has tens of MB on chip): every FW cell reads its layer's
      weights once for the batch; every BP cell that runs reads the weight rows eq. 2
      needs and reads and writes the δW rows eq. 3 updates. ``rows`` is the fraction of
      the 4H gate rows BP fetches (1 without MS1; with MS1 the rows whose δgate survived:
      the decoder fetches only those, spec §3.5).
    * Footprint: weights and their gradients (both live during BP), plus what every kept
      cell stores between FW and BP. Activations and intermediates are written in FW and
      read in BP, so they move twice.
    * A skipped cell (MS2) stores nothing and moves no BP weights.
    * Per-cell BP gradients (δH, δS, δX) stay on chip.
"""

import numpy as np

from ...hw.omni.workload import Workload
from ..errors import UsageError
from .compress import record_bytes
from .skipping import kept_cells, magnitude_map
from .workload import kept_mask

__all__ = ["Workload", "TABLE_I", "TABLE_I_LOSS", "PAPER_FOOTPRINT", "PAPER_DATA_MOVEMENT",
           "PAPER_DENSITY", "parameter_bytes", "footprint", "data_movement", "reduction",
           "table_one_kept", "table_one", "main"]

#: Fraction of BP-EW-P1 values at or above θ = 0.1 (paper Fig. 6: about 65 % below).
PAPER_DENSITY = 0.35
#: Paper §VI-B3 average footprint reduction, %.
PAPER_FOOTPRINT = {"ms1": 32.37, "ms2": 41.65, "ms1+ms2": 57.52}
#: Paper §VI-B2 average data-movement reduction, % (weight matrices, activations,
#: intermediates).
PAPER_DATA_MOVEMENT = {"ms1": (31.79, 0.0, 60.27), "ms2": (24.67, 32.89, 49.34),
                       "ms1+ms2": (40.85, 32.89, 80.04)}


#: Table I [P] (input size = hidden size, spec §1.3 [D]), batch 128.
TABLE_I = {
    "TREC-10": Workload(input_size=3072, hidden_size=3072, layers=2, length=18, batch=128),
    "PTB": Workload(input_size=1536, hidden_size=1536, layers=4, length=35, batch=128),
    "IMDB": Workload(input_size=2048, hidden_size=2048, layers=3, length=100, batch=128),
    "WAYMO": Workload(input_size=1024, hidden_size=1024, layers=3, length=128, batch=128),
    "WMT": Workload(input_size=1024, hidden_size=1024, layers=4, length=151, batch=128),
    "BABI": Workload(input_size=1280, hidden_size=1280, layers=5, length=303, batch=128),
}
#: Loss type per benchmark: IMDB and WMT from the paper, the others [U] by task (language
#: modelling and tracking predict every step; classification and QA answer once).
TABLE_I_LOSS = {"TREC-10": "single", "PTB": "per-timestamp", "IMDB": "single",
                "WAYMO": "per-timestamp", "WMT": "per-timestamp", "BABI": "single"}


def parameter_bytes(workload, layer):
    """fp32 bytes of one layer's W, U and b: ``4 * 4H * (I + H + 1)``."""
    hidden = workload.hidden_size
    return 4 * 4 * hidden * (workload.layer_input(layer) + hidden + 1)


def _intermediate_cell(workload, density):
    batch, hidden = workload.batch, workload.hidden_size
    if density is None:
        return 4 * 5 * batch * hidden
    return record_bytes(6 * batch, hidden, density * 6 * batch * hidden)


def footprint(workload, density=None, kept=None):
    """Bytes held at the FW/BP boundary: ``{"weights", "activations", "intermediates",
    "total"}``.

    Parameters
    ----------
    workload : Workload
    density : float, optional
        MS1 on: the fraction of BP-EW-P1 values that survive the pruning (``None``: MS1
        off, five fp32 vectors per cell).
    kept : LN x LL bool array, optional
        MS2's kept cells (``None``: all).
    """
    kept = kept_mask(workload, kept)
    per_layer = kept.sum(axis=1)
    weights = 2 * sum(parameter_bytes(workload, layer) for layer in range(workload.layers))
    activations = sum(int(count) * 4 * workload.batch * (workload.layer_input(layer)
                                                        + workload.hidden_size)
                      for layer, count in enumerate(per_layer))
    intermediates = int(kept.sum()) * _intermediate_cell(workload, density)
    return dict(weights=weights, activations=activations, intermediates=intermediates,
                total=weights + activations + intermediates)


def data_movement(workload, density=None, kept=None, rows=None):
    """Bytes moved between the chip and DRAM in one iteration: ``{"weights" (reads of W,
    U, b), "weight_gradients" (reads and writes of δW, δU, δb), "weight_matrices" (the
    two: the paper's category), "activations", "intermediates", "total"}``.

    ``rows`` is the fraction of weight rows a BP cell fetches (default: ``density`` with
    MS1, per-sample row skipping, else 1); ``density`` and ``kept`` as in
    :func:`footprint`."""
    kept = kept_mask(workload, kept)
    if rows is None:
        rows = 1.0 if density is None else density
    held = footprint(workload, density, kept)
    weights = gradients = 0.0
    for layer, count in enumerate(kept.sum(axis=1)):
        size = parameter_bytes(workload, layer)
        weights += workload.length * size + count * rows * size
        gradients += 2 * count * rows * size
    matrices = weights + gradients
    activations, intermediates = 2 * held["activations"], 2 * held["intermediates"]
    return dict(weights=weights, weight_gradients=gradients, weight_matrices=matrices,
                activations=activations, intermediates=intermediates,
                total=matrices + activations + intermediates)


def reduction(baseline, other):
    """Per key, the reduction of ``other`` against ``baseline`` in % (0 where the
    baseline is 0)."""
    return {key: (100.0 * (1 - other[key] / value) if value else 0.0)
            for key, value in baseline.items()}


def table_one_kept(workload, loss_type, skip_threshold, loss_ratio=1.0):
    """MS2's kept cells for a Table I shape: eq. 4 (α = 1) at ``loss_ratio`` times the
    loss the threshold was fixed at (1 = the first skipping epoch with no progress)."""
    magnitudes = magnitude_map(1.0, loss_ratio, workload.layers, workload.length, loss_type)
    return kept_cells(magnitudes, skip_threshold * float(
        magnitude_map(1.0, 1.0, workload.layers, workload.length, loss_type).max()))


def table_one(density=PAPER_DENSITY, skip_threshold=0.02, loss_ratio=1.0, rows=None):
    """For each Table I shape and MS1, MS2, MS1+MS2: the footprint reduction (%) and the
    data-movement reductions (%) of weight matrices, activations and intermediates, plus
    the skipped-cell fraction; last row ``"average"``. See :func:`table_one_kept`."""
    result = {}
    for name, workload in TABLE_I.items():
        kept = table_one_kept(workload, TABLE_I_LOSS[name], skip_threshold, loss_ratio)
        base_f, base_d = footprint(workload), data_movement(workload)
        row = dict(skipped=float(1 - kept.mean()),
                   intermediate_share=100.0 * base_f["intermediates"] / base_f["total"])
        for label, dens, kp in (("ms1", density, None), ("ms2", None, kept),
                                ("ms1+ms2", density, kept)):
            moved = reduction(base_d, data_movement(workload, dens, kp, rows))
            row[label] = dict(
                footprint=reduction(base_f, footprint(workload, dens, kp))["total"],
                weight_matrices=moved["weight_matrices"],
                activations=moved["activations"], intermediates=moved["intermediates"])
        result[name] = row
    rows_ = list(result.values())
    average = dict(skipped=float(np.mean([r["skipped"] for r in rows_])),
                   intermediate_share=float(np.mean([r["intermediate_share"] for r in rows_])))
    for label in PAPER_FOOTPRINT:
        average[label] = {key: float(np.mean([r[label][key] for r in rows_]))
                          for key in rows_[0][label]}
    result["average"] = average
    return result



def main(argv=None):
    """``python -m nnrtl.gen.omni.accounting``: :func:`table_one` as JSON, one line per
    shape, and the paper's averages."""
    import json
    for name, row in table_one().items():
        print(json.dumps({"shape": name, **row}))
    print(json.dumps({"paper": {"footprint": PAPER_FOOTPRINT,
                                "data_movement": PAPER_DATA_MOVEMENT}}))


if __name__ == "__main__":
    main()
