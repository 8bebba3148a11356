"""MS2: BP-cell skipping (spec §2.2, paper §IV-B, eqs. 4-5, Fig. 9).

Decisions on what the paper leaves open [U], each used by :class:`SkipController`:

* Index base: ``layer`` and ``timestamp`` are 0-based (layer 0 is the lowest, timestamp 0
  the first): with 1-based indices eq. 4 divides by zero at the last cell [D].
* The loss of eq. 4: single loss, the loss of the last timestamp (cross-entropy at the
  final layer's last cell); per-timestamp loss, the loss "accumulated from the last
  timestamp to the current one", taken as ``loss * (LL - timestamp)`` with ``loss`` the
  mean per-timestamp loss: the per-timestamp losses are not known before FW, eq. 5
  predicts one number per epoch, so they are assumed equal.
* The loss of eq. 5: the epoch's mean training loss (mean of its batches' losses). Guard:
  when the last three epochs' losses are not strictly decreasing (denominator 0 or a
  rising loss) the prediction is the last epoch's loss; the prediction is clamped to
  ``[0, loss_{n-1}]`` (the geometric extrapolation can overshoot below 0).
* α: ``sum(measured) / sum(eq. 4 with α = 1)`` over all cells, from the epoch-1 mean of
  the measured per-cell magnitudes (``sum |δW_t| + sum |δU_t|``, Fig. 8) and the epoch-1
  mean loss (a least-squares fit would weight the largest cells only).
* Threshold: one global threshold, given as ``skip_threshold``, a fraction of the largest
  δW_Mag eq. 4 predicts for epoch 1 (α fitted, epoch-1 loss); it is fixed from then on,
  so the skip set grows as the loss falls. A cell is skipped when ``δW_Mag < threshold``:
  threshold 0 skips nothing. No cell is skipped in epochs 1-3 (eq. 5 needs three losses).
* At least one cell per layer is kept (the one of largest δW_Mag), so the scaling factor
  is finite.
* Convergence-aware scaling (Fig. 9): ``factor = sum over all cells of the layer of
  δW_Mag / sum over its kept cells`` (``LL / kept`` when the magnitudes are flat), applied
  to δW, δU and δb of the layer. What it sums is ``scaling`` (:data:`SCALINGS`): eq. 4's
  predicted δW_Mag (``predicted``, the default), epoch 1's measured per-cell magnitudes
  (``measured``: restores the share the skipped cells really carried where eq. 4's
  profile fails) or a count (``count``, ``LL / kept``); :mod:`.studies.accuracy_sweep`
  compares them.
* A skipped cell emits nothing: no δH_{t-1}, δS_{t-1} (the BP chain restarts at 0 below a
  skipped cell) and a zero δX_t for the layer below.

Eq. 4 is monotone in the timestamp, so the skip set of a layer is contiguous: the earliest
timestamps for a single loss (truncated BPTT), the latest ones for a per-timestamp loss.

Where eq. 4's profile does not hold (flat per-cell magnitudes, as on the language model of
:mod:`.studies.accuracy`), the skipped cells carry gradient the predicted-magnitude factor
does not restore: :meth:`SkipController.dropped_share` reports both shares.
"""

import numpy as np

from ..errors import UsageError

__all__ = ["LOSS_TYPES", "SCALINGS", "magnitude_map", "predict_loss", "fit_alpha", "kept_cells",
           "scale_factors", "SkipController"]

LOSS_TYPES = ("single", "per-timestamp")
#: What the convergence-aware scaling factor of a layer (``sum over all its cells / sum
#: over its kept cells``) sums: ``predicted`` eq. 4's δW_Mag of the plan, ``measured``
#: epoch 1's measured per-cell magnitudes, ``count`` 1 per cell (``LL / kept``).
SCALINGS = ("predicted", "measured", "count")


def _check_loss_type(loss_type):
    if loss_type not in LOSS_TYPES:
        raise UsageError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, not "
                         f"{loss_type!r}")


def magnitude_map(alpha, loss, layers, length, loss_type):
    """Eq. 4 for every cell: an LN x LL array, ``[layer, timestamp]`` 0-based.

    ``δW_Mag = α · loss · (LN - layer) / (LL - timestamp)^β``, β = 1 for a single loss,
    β = -1 for a per-timestamp loss (whose ``loss`` is accumulated: ``loss · (LL - t)``)."""
    _check_loss_type(loss_type)
    depth = (layers - np.arange(layers, dtype=np.float64))[:, None]
    distance = (length - np.arange(length, dtype=np.float64))[None, :]
    if loss_type == "single":
        return alpha * loss * depth / distance
    return alpha * (loss * distance) * depth * distance


def predict_loss(history):
    """Eq. 5: the predicted loss of epoch n from the losses of epochs n-1, n-2, n-3
    (``history``, oldest first); ``None`` with fewer than three. Guards in the module
    docstring."""
    if len(history) < 3:
        return None
    l3, l2, l1 = (float(value) for value in history[-3:])
    if not (l3 > l2 > l1):
        return l1
    predicted = l1 - (l2 - l1) ** 2 / (l3 - l2)
    return min(max(predicted, 0.0), l1)


def fit_alpha(measured, loss, loss_type):
    """α of eq. 4 from measured per-cell magnitudes (LN x LL) at ``loss``."""
    measured = np.asarray(measured, dtype=np.float64)
    shape = magnitude_map(1.0, loss, *measured.shape, loss_type)
    total = shape.sum()
    return float(measured.sum() / total) if total > 0 else 0.0


def kept_cells(magnitudes, threshold):
    """The cells that run BP: ``magnitudes >= threshold``, plus each layer's largest
    (LN x LL bool array)."""
    magnitudes = np.asarray(magnitudes)
    kept = ~(magnitudes < threshold)
    kept[np.arange(len(kept)), np.argmax(magnitudes, axis=1)] = True
    return kept


def scale_factors(magnitudes, kept):
    """The convergence-aware scaling factor of each layer (LN floats)."""
    magnitudes = np.asarray(magnitudes, dtype=np.float64)
    total = magnitudes.sum(axis=1)
    partial = np.where(kept, magnitudes, 0.0).sum(axis=1)
    return np.where(partial > 0, total / np.where(partial > 0, partial, 1.0), 1.0)


class SkipController:
    """MS2's state over the epochs of one training run.

    Parameters
    ----------
    layers, length : int
        LN and LL.
    loss_type : str
        ``"single"`` or ``"per-timestamp"``.
    skip_threshold : float
        Fraction of epoch 1's largest predicted δW_Mag (module docstring); 0 = no skip.
    scaling : str
        One of :data:`SCALINGS`: the magnitudes the scaling factor sums.

    Use: :meth:`plan` at the start of every epoch (1-based) gives the kept map and the
    factors; during epoch 1, :meth:`observe` each batch's measured per-cell magnitudes and
    loss; :meth:`end_epoch` with the epoch's mean loss.
    """

    def __init__(self, layers, length, loss_type, skip_threshold, *, scaling="predicted"):
        _check_loss_type(loss_type)
        if scaling not in SCALINGS:
            raise UsageError(f"scaling must be one of {', '.join(SCALINGS)}, not "
                             f"{scaling!r}")
        self.scaling = scaling
        if not (isinstance(skip_threshold, (int, float)) and 0 <= skip_threshold < 1):
            raise UsageError(f"skip_threshold must be a number from 0 to below 1, not "
                             f"{skip_threshold!r}")
        self.layers, self.length = layers, length
        self.loss_type = loss_type
        self.skip_threshold = float(skip_threshold)
        self.history = []
        self.alpha = None
        self.threshold = None
        self._measured = []
        self._losses = []
        self.measured = None

    def wants_measurements(self, epoch):
        """Whether batches of ``epoch`` must report per-cell magnitudes (epoch 1)."""
        return epoch == 1 and self.skip_threshold > 0

    def observe(self, magnitudes, loss):
        """One epoch-1 batch: measured per-cell magnitudes (LN x LL) and its loss."""
        self._measured.append(np.asarray(magnitudes, dtype=np.float64))
        self._losses.append(float(loss))

    def end_epoch(self, mean_loss):
        """Record the epoch's mean loss; after epoch 1, fit α and fix the threshold."""
        self.history.append(float(mean_loss))
        if len(self.history) == 1 and self._measured:
            loss = float(np.mean(self._losses))
            self.alpha = fit_alpha(np.mean(self._measured, axis=0), loss, self.loss_type)
            first = magnitude_map(self.alpha, loss, self.layers, self.length, self.loss_type)
            self.threshold = self.skip_threshold * float(first.max())
            self.measured = np.mean(self._measured, axis=0)
            self._measured.clear()

    def dropped_share(self, kept, magnitudes=None):
        """The share of the gradient magnitude in the cells ``kept`` skips: ``(predicted,
        measured)``, each ``sum over skipped / sum over all`` cells. ``predicted`` from
        ``magnitudes`` (eq. 4 of the plan; ``None`` gives ``None``), ``measured`` from the
        epoch-1 measured per-cell magnitudes (``None`` before epoch 1 ends). The two differ
        when eq. 4's profile does not hold for the task (module docstring); the scaling
        factor compensates only the predicted share."""
        skipped = ~np.asarray(kept, dtype=bool)

        def share(values):
            if values is None:
                return None
            values = np.asarray(values, dtype=np.float64)
            total = values.sum()
            return float(values[skipped].sum() / total) if total > 0 else 0.0
        return share(magnitudes), share(self.measured)

    def plan(self, epoch):
        """``(kept, factors, predicted_loss)`` for ``epoch`` (1-based): all cells kept and
        factors 1 in epochs 1-3, with threshold 0, or before α is known."""
        predicted = predict_loss(self.history) if epoch >= 4 else None
        if predicted is None or self.threshold is None or self.skip_threshold == 0:
            return (np.ones((self.layers, self.length), dtype=bool), np.ones(self.layers),
                    predicted)
        magnitudes = magnitude_map(self.alpha, predicted, self.layers, self.length,
                                   self.loss_type)
        kept = kept_cells(magnitudes, self.threshold)
        summed = dict(predicted=magnitudes, measured=self.measured,
                      count=np.ones_like(magnitudes))[self.scaling]
        return kept, scale_factors(summed, kept), predicted
