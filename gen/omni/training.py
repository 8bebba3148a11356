"""LSTM training with the η-LSTM FW/BP decomposition, MS1 and MS2 (spec §1, §2).

:func:`forward` runs the FW cells of a stack of LSTM layers and keeps what BP needs (the
"tape"); :func:`backward` runs the BP cells and returns every weight's gradient. What the
tape holds per cell is what the hardware stores in memory between FW and BP:

* baseline: ``x_t``, ``h_{t-1}`` (activations) and ``i, f, c, o, s`` (intermediates);
  BP-EW-P1 runs at BP time;
* MS1: ``x_t``, ``h_{t-1}`` and the compressed BP-EW-P1 record (:mod:`.compress`),
  computed in FW right after FW-EW, pruned at ``prune_threshold``; BP decodes it;
* MS2: cells not in ``kept`` store nothing and run no BP (:mod:`.skipping`); the layer's
  δW, δU, δb are multiplied by its scaling factor.

Gradients. With MS1 off (or at threshold 0, bit-identical) and MS2 off (or threshold 0)
the gradients are those of PyTorch autograd on ``nn.LSTM`` with the same weights, up to
floating-point rounding order: measured (tests/omni/gen/test_omni_training.py) within
``1e-12`` relative to the largest gradient of each tensor in float64 and within
:data:`FLOAT32_BOUND` in float32, against float64 autograd.

The weights of a layer are a dict of ``nn.LSTM``'s tensors: ``weight_ih``, ``weight_hh``,
``bias_ih``, ``bias_hh`` (:func:`layers_from_module`). Inputs are time first (T x B x I).
"""

import dataclasses

import numpy as np

from ..errors import UsageError
from .cell import (bp_ew_part1, bp_ew_part2, bp_matmul_inner, bp_matmul_outer, fw_ew,
                   fw_matmul, input_projection)
from .compress import check_threshold, compress, decompress
from .skipping import LOSS_TYPES, SCALINGS

__all__ = ["MsConfig", "Tape", "FIELDS", "FLOAT32_BOUND", "layers_from_module", "forward",
           "backward"]

FIELDS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
#: Largest gradient difference from float64 autograd in float32, relative to the largest
#: gradient of the tensor (sizes up to H = 64, T = 32; float32's epsilon is 1.2e-7, the
#: error grows with T as the BP chain lengthens).
FLOAT32_BOUND = 1e-5


@dataclasses.dataclass(frozen=True)
class MsConfig:
    """The memory-saving options of one training run.

    Parameters
    ----------
    ms1 : bool
        BP-EW-P1 in FW, pruned and stored compressed.
    prune_threshold : float
        MS1's θ (paper: "around 0.1"); values ``|v| < θ`` are pruned. Default 0.05 and
        ``skip_threshold`` 0.002 [U, decided by the multi-seed sweeps of
        :mod:`.studies.accuracy`]: with both MS on, the single-loss digits task (8 seeds) is
        +0.52 % ± 0.66 % in accuracy against PyTorch, the one-sided 95 % bound of its loss
        0.73 %, with 36.9 % of the bytes stored between FW and BP saved; the per-timestamp
        text task (10 seeds, 40 epochs, clipped) -0.34 % ± 0.40 % in perplexity, bound
        +0.40 %, 6.2 % saved. At F 0.005 (the default before) digits save 46.7 % (bound
        0.85 %) but text is +0.96 % ± 0.48 %, bound +1.83 %: MS2 skips too much there.
    ms2 : bool
        BP-cell skipping.
    skip_threshold : float
        MS2's threshold, a fraction of epoch 1's largest predicted δW_Mag
        (:mod:`.skipping`).
    loss_type : str
        ``"single"`` (loss at the last timestamp) or ``"per-timestamp"``.
    scaling : str
        MS2's convergence-aware scaling factor, one of :data:`.skipping.SCALINGS`.
    """

    ms1: bool = False
    prune_threshold: float = 0.05
    ms2: bool = False
    skip_threshold: float = 0.002
    loss_type: str = "single"
    scaling: str = "predicted"

    def __post_init__(self):
        check_threshold(self.prune_threshold, "prune_threshold")
        if not (isinstance(self.skip_threshold, (int, float)) and 0 <= self.skip_threshold
                < 1):
            raise UsageError(f"skip_threshold must be a number from 0 to below 1, not "
                             f"{self.skip_threshold!r}")
        if self.loss_type not in LOSS_TYPES:
            raise UsageError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, not "
                             f"{self.loss_type!r}")
        if self.scaling not in SCALINGS:
            raise UsageError(f"scaling must be one of {', '.join(SCALINGS)}, not "
                             f"{self.scaling!r}")

    @property
    def name(self):
        """``baseline``, ``ms1``, ``ms2`` or ``ms1+ms2``."""
        return "+".join(n for n, on in (("ms1", self.ms1), ("ms2", self.ms2)) if on) or (
            "baseline")


@dataclasses.dataclass
class Tape:
    """What FW stored for BP, and the counts of what it stored.

    Attributes
    ----------
    layers : list of dict
        Per layer: ``xs`` (the layer input, T x B x I), ``hs`` (h_{t-1} for each t,
        T x B x H), ``cells`` (per timestamp: ``None`` when skipped, else the baseline's
        ``(gates, s)`` or MS1's :class:`~.compress.Compressed` record), ``s_prev``.
    kept : ndarray, LN x LL bool
    stored : dict
        Bytes stored between FW and BP: ``activations`` (x_t, h_{t-1}), ``intermediates``
        (i, f, c, o, s or the compressed records); and ``p1_values``/``p1_survivors``
        (MS1's P1 values and those that survived the pruning).
    """

    layers: list
    kept: np.ndarray
    ms1: bool
    threshold: float
    stored: dict


def layers_from_module(module, dtype=None):
    """The per-layer weight dicts of an ``nn.LSTM`` (detached copies, ``dtype`` if given)."""
    import torch

    if not isinstance(module, torch.nn.LSTM) or module.proj_size or not module.bias or (
            module.bidirectional):
        raise UsageError("the Omni-PE training takes a unidirectional nn.LSTM with biases "
                         "and no projection")
    layers = []
    for index in range(module.num_layers):
        layer = {}
        for field in FIELDS:
            value = getattr(module, f"{field}_l{index}").detach().clone()
            layer[field] = value.to(dtype) if dtype is not None else value
        layers.append(layer)
    return layers


def forward(layers, xs, config=MsConfig(), kept=None):
    """The FW cells of every layer; returns ``(ys, tape)``, ``ys`` the last layer's h_t
    (T x B x H). ``kept`` (LN x LL bool) is MS2's plan, ``None`` = every cell."""
    import torch

    length, batch = xs.shape[:2]
    if kept is None:
        kept = np.ones((len(layers), length), dtype=bool)
    threshold = config.prune_threshold if config.ms1 else 0.0
    stored = dict(activations=0, intermediates=0, p1_values=0, p1_survivors=0)
    taped = []
    for index, layer in enumerate(layers):
        hidden = layer["weight_hh"].shape[1]
        inputs = xs.shape[-1]
        projected = input_projection(xs, layer["weight_ih"],
                                     layer["bias_ih"] + layer["bias_hh"])
        h = torch.zeros(batch, hidden, dtype=xs.dtype)
        s = torch.zeros(batch, hidden, dtype=xs.dtype)
        hs, outputs, cells, s_prevs = [], [], [], []
        for t in range(length):
            s_prev = s
            hs.append(h)
            gates, s, h = fw_ew(fw_matmul(projected[t], h, layer["weight_hh"]), s_prev)
            outputs.append(h)
            s_prevs.append(s_prev)
            if not kept[index, t]:
                cells.append(None)
                continue
            stored["activations"] += 4 * batch * (inputs + hidden)
            if config.ms1:
                record = compress(bp_ew_part1(gates, s, s_prev), threshold)
                cells.append(record)
                stored["intermediates"] += record.nbytes
                stored["p1_values"] += 6 * batch * hidden
                stored["p1_survivors"] += record.survivors
            else:
                cells.append((gates, s))
                stored["intermediates"] += 4 * 5 * batch * hidden
        taped.append(dict(xs=xs, hs=torch.stack(hs), cells=cells, s_prev=s_prevs))
        xs = torch.stack(outputs)
    return xs, Tape(taped, kept, config.ms1, threshold, stored)


def backward(layers, tape, dys, factors=None, measure=False):
    """The BP cells of every layer, top layer first.

    Parameters
    ----------
    layers : list of dict
        The weights :func:`forward` ran with.
    tape : Tape
    dys : tensor, T x B x H
        The loss gradient at the last layer's outputs (zero where a single loss has none).
    factors : sequence of float, optional
        MS2's scaling factor per layer (default 1).
    measure : bool
        Also return each cell's gradient magnitude ``sum |δW_t| + sum |δU_t|`` (LN x LL,
        0 for skipped cells; epoch 1 of MS2).

    Returns
    -------
    (grads, info) : ``grads`` a list of dicts (the :data:`FIELDS` of each layer); ``info``
        a dict with ``dxs`` (the gradient at the first layer's input), ``rows`` (per
        layer, the mean over kept cells of the fraction of the 4H gate rows with a
        non-zero δgate in some sample: the weight rows BP-MatMul needs) and, with
        ``measure``, ``magnitudes``.
    """
    import torch

    count = len(layers)
    factors = np.ones(count) if factors is None else factors
    magnitudes = np.zeros(tape.kept.shape)
    grads, rows = [None] * count, [0.0] * count
    for index in reversed(range(count)):
        layer, taped = layers[index], tape.layers[index]
        length, batch = dys.shape[:2]
        hidden = layer["weight_hh"].shape[1]
        dh_next = torch.zeros(batch, hidden, dtype=dys.dtype)
        ds_next = torch.zeros(batch, hidden, dtype=dys.dtype)
        dgates = torch.zeros(length, batch, 4 * hidden, dtype=dys.dtype)
        needed = []
        for t in reversed(range(length)):
            cell = taped["cells"][t]
            if cell is None:
                dh_next = torch.zeros_like(dh_next)
                ds_next = torch.zeros_like(ds_next)
                continue
            if tape.ms1:
                part1 = decompress(cell)
            else:
                gates, s = cell
                part1 = bp_ew_part1(gates, s, taped["s_prev"][t])
            dg, ds_next = bp_ew_part2(part1, dys[t] + dh_next, ds_next)
            dh_next = bp_matmul_inner(dg, layer["weight_hh"])
            dgates[t] = dg
            needed.append((dg != 0).any(0))
            if measure:
                magnitudes[index, t] = float(
                    bp_matmul_outer(dg, taped["xs"][t]).abs().sum()
                    + bp_matmul_outer(dg, taped["hs"][t]).abs().sum())
        factor = float(factors[index])
        dbias = dgates.sum((0, 1)) * factor
        grads[index] = dict(weight_ih=bp_matmul_outer(dgates, taped["xs"]) * factor,
                            weight_hh=bp_matmul_outer(dgates, taped["hs"]) * factor,
                            bias_ih=dbias, bias_hh=dbias.clone())
        rows[index] = float(torch.stack(needed).double().mean()) if needed else 0.0
        dys = bp_matmul_inner(dgates, layer["weight_ih"])
    info = dict(dxs=dys, rows=rows)
    if measure:
        info["magnitudes"] = magnitudes
    return grads, info

