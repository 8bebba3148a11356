"""Multi-seed threshold sweep of MS1 and MS2 against unmodified PyTorch training.

One seed cannot resolve the 1 % criterion of issue 13 (PyTorch alone moves -0.7 .. +1.5 %
between seeds on the text task, :mod:`.accuracy`). :func:`sweep` trains, for every seed,
the PyTorch baseline (``nn.LSTM`` and autograd), the η-LSTM decomposition without MS
(``exact``: MS1 θ = 0 and MS2 threshold 0 give its gradients bit for bit), MS1 at each θ,
MS2 at each skip threshold and both together (``both``, at θ/F pairs; the CLI's default
pair is :class:`~.training.MsConfig`'s defaults), all from the same seed's initial weights
and batch order, and reports per setting:

* ``relative_difference`` per seed, ``(value - pytorch) / pytorch`` of the same seed,
  and its ``mean``, ``min``, ``max`` and ``std`` (population) over the seeds;
* ``degradation``: the relative difference signed so that positive is worse
  (perplexity up, accuracy down) -- mean and worst over the seeds;
* ``within_1_percent``: the mean degradation over the seeds is at most 1 % (being better
  than the baseline by more than 1 % is not a failure [U]: the issue's criterion is
  "stay within 1 % of baseline accuracy", a bound on the loss of quality);
  ``all_seeds_within_1_percent``: the worst seed's is;
* ``relative_difference_sem``: the standard error of the mean difference (sample std /
  sqrt n); ``degradation_upper_95``: the one-sided 95 % upper confidence bound of the
  mean degradation (Student's t, n - 1 degrees of freedom) and ``within_1_percent_95``:
  that bound is at most 1 % -- "within 1 %" shown with the confidence the seeds give,
  not only on the mean (``None`` with one seed);
* ``vs_exact``: the run's relative difference from ``exact`` of the same seed (same
  initial weights, batch order and float rounding order of the decomposition, so the
  rounding-order chaos between PyTorch and the decomposition cancels: what MS itself
  changes), with ``vs_exact_mean``, ``_sem``, ``_min``, ``_max``,
  ``_degradation_mean``, ``_degradation_worst``, ``_degradation_upper_95`` and
  ``_within_1_percent_95`` (rows other than ``pytorch`` and ``exact``);
* ``final_loss_vs_exact``: per seed, the last epoch's mean training loss minus
  ``exact``'s (nats; positive: MS trained less far), where the runs carry their losses;
* the savings the runs measure (:func:`.accuracy.train_run`): ``stored_reduction``, the
  bytes kept between FW and BP per iteration against ``exact`` (same seed), ``p1_density``
  (MS1: share of the BP-EW-P1 values that survive θ), ``skipped`` (MS2: share of the BP
  cells skipped, mean over the epochs).

:func:`quick_sweep` is the tiny version (seconds) for the bench; ``python -m
nnrtl.gen.omni.studies.accuracy --sweep [--seed K] [--seeds N] [--both θ/F,...] [--scaling S]
[--quick] [-o DIR]`` (seeds K .. K + N - 1; ``--prune-thresholds none
--skip-thresholds none``: only PyTorch, ``exact`` and the ``--both`` pairs) prints one
JSON line per run and per setting and a summary table; with ``-o DIR`` it writes
``sweep.jsonl`` and ``sweep.png`` (metric difference against stored-bytes saving per
threshold). :func:`rows_from_files` (CLI ``--summarise PATH...``) pools recorded
sweeps, e.g. one per seed, into setting rows;
:func:`.accuracy_report.markdown_tables` renders them (the omni bench's accuracy
section).

Latency/throughput: software, no hardware timing; a full-size run takes 0.5 to 2 minutes
per training run on one thread (the measured wall time is in :mod:`.accuracy`).

Measured, session 2 (issue 13: MS1 and MS2 together; the defaults). Commands, one
process at a time on the shared 2-core machine (load 4 to 8), 2026-11-23::

    python -m nnrtl.gen.omni.studies.accuracy --sweep --task text --seeds 3 --grad-clip 1.0 \
        --prune-thresholds 0.03 --skip-thresholds 0.001 --both 0.03/0.001,0.05/0.005 -o DIR
    python -m nnrtl.gen.omni.studies.accuracy --sweep --task digits --seeds 3 \
        --prune-thresholds 0.05 --skip-thresholds 0.005 \
        --both 0.1/0.005,0.05/0.005,0.03/0.001 -o DIR

(20.5 and 5.9 minutes wall). Columns as in session 1's tables below; "both θ/F" is MS1
at θ with MS2 at F; "stored" is the change of the bytes kept FW -> BP per iteration
against ``exact`` (negative = saved). The runs repeated from session 1 reproduced its
values to the last digit (PyTorch text 4.629 / 4.675 / 4.490 clipped, digits 96.94 /
98.61 / 94.17 %; MS1 θ 0.03 and MS2 0.001 text, MS1 θ 0.05 and MS2 0.005 digits).

======  ===============  ============================  =======  =====  =======  =====  =====
task    run              difference mean [min, max]    median   within stored   P1     skip
======  ===============  ============================  =======  =====  =======  =====  =====
text    exact            -0.35 % [-1.22 %, +0.70 %]    -0.52 %  all    0
text    ms1 θ 0.03       +0.19 % [-0.56 %, +1.11 %]    +0.03 %  yes    +6.62 %  0.883
text    ms2 0.001        +1.78 % [+0.79 %, +3.32 %]    +1.24 %  no     -3.25 %         3.3 %
text    both 0.03/0.001  +2.63 % [+1.75 %, +3.73 %]    +2.42 %  no     +3.02 %  0.881  3.2 %
text    both 0.05/0.005  +4.43 % [+4.29 %, +4.61 %]    +4.39 %  no     -9.02 %  0.805  9.3 %
digits  exact            +0.29 % [+0.00 %, +0.88 %]    +0.00 %  all    0
digits  ms1 θ 0.05       +1.47 % [-0.85 %, +3.83 %]    +1.43 %  all    -10.24 % 0.690
digits  ms2 0.005        +1.47 % [-0.28 %, +4.13 %]    +0.57 %  all    -37.54 %        37.3 %
digits  both 0.1/0.005   +0.62 % [-1.41 %, +3.83 %]    -0.57 %  yes    -55.94 % 0.557  43.2 %
digits  both 0.05/0.005  +1.96 % [-0.85 %, +4.72 %]    +2.01 %  all    -46.73 % 0.683  40.1 %
digits  both 0.03/0.001  +0.80 % [-1.15 %, +3.54 %]    +0.00 %  yes    -17.26 % 0.750  14.5 %
======  ===============  ============================  =======  =====  =======  =====  =====

Noise floor: the baseline's seed-to-seed spread (PyTorch alone) is 4.490 .. 4.675 on the
text (4.1 %) and 94.17 .. 98.61 % on the digits (4.7 points; seed 3's test split is
hard, every run of seed 3 beats its PyTorch by +0.9 .. +4.7 %). The criterion compares
each run with PyTorch of the same seed, so what limits it is the difference of the
exact decomposition from PyTorch: text -0.35 % [-1.22, +0.70] with the gradient clipped
(std 0.8 %, so a three-seed mean resolves about +-0.5 %), digits +0.29 % [0, +0.88].

Decisions, each from the table:

* Combined on the text task: no. MS1 saves bytes only above density ~0.80 (the record is
  6 values and a bitmap where the baseline stores 5 values: 4 * 6 * d + 6 / 8 < 20 needs
  d < 0.802, i.e. θ above 0.05 on this model: 0.05 gives 0.805), and θ 0.05 alone costs
  +2.3 % (session 1);
  MS2 costs +1.8 % at 3 % skipped. Together the costs add (0.03/0.001: +2.6 %, and it
  still stores 3 % more; 0.05/0.005: +4.4 %, 9 % saved). At the task's 20 epochs no
  swept setting, alone or together, keeps the per-timestamp text task within 1 % while
  storing less; at 40 epochs 0.05/0.005 does on the mean of three seeds (last item).
* Combined on the digits task: yes. 0.05/0.005 is within 1 % on every seed and saves
  46.7 %; 0.1/0.005 saves 55.9 % (the paper: 57.5 % of a footprint that includes the
  weights) but seed 2 loses
  1.41 %. So :class:`~.training.MsConfig`'s defaults are θ 0.05 and F 0.005 (before:
  0.1 and 0.02, which fail the digits: MS2 0.02 alone -1.85 %, session 1).
* θ relative to the tensor's scale (θ · max|p| per vector, or the σ'-products' bound
  1/4): session 1 measured it worse than a plain θ at equal density (:mod:`.accuracy`:
  density 0.873 with gradient error 0.059 against 0.859 and 0.036); not re-run.
* Index encoding: the bitmap costs 1/32 of a dense fp32 vector, so it is not what keeps
  MS1 from saving: the values are (density 0.805 at θ 0.05 still stores 0.6 % more than
  the 5 baseline vectors). Explicit 16-bit indices would cost more above density 1/16.
* MS2's scaling (:data:`.skipping.SCALINGS`): the epoch-1 measured profile instead of
  eq. 4's, one seed, text, 0.005: +16.9 % (:mod:`.skipping`); eq. 4's stays the default.
* Optimizer: Adam (lr 0.01, clipped) on the text, seed 1: PyTorch 5.286 (worse than
  SGD's 4.629), the exact decomposition +1.8 %, MS1 θ 0.1 +12.7 % at density 0.358 (Adam
  saturates the gates, so the paper's ~35 % density appears, but the error grows); not
  adopted.
* More epochs: the text task at 40 epochs instead of 20 (both trainings), clipped, the
  default pair 0.05/0.005, seeds 1-3 (``train_run(dataclasses.replace(TASKS["text"],
  epochs=40, grad_clip=1.0), MsConfig(ms1=True, ms2=True, loss_type="per-timestamp"),
  seed)`` against ``train_run(same spec, None, seed)``; 2.5 to 3.5 minutes per MS run):
  PyTorch 4.120 / 4.245 / 4.200, both 4.207 / 4.238 / 4.122, difference +2.12 / -0.17 /
  -1.83 %, mean +0.04 % (within 1 % on the mean, not on seed 1), 10.7 / 11.1 / 10.7 %
  stored saved (P1 density 0.81 / 0.80 / 0.81, 11.3 / 11.2 / 11.3 % of the cells
  skipped). ``exact`` (``MsConfig(loss_type="per-timestamp")``, same spec, 1.3 to 1.5
  minutes a run): 4.221 / 4.242 / 4.120, +2.45 / -0.07 / -1.90 % from PyTorch (mean
  +0.16 %): at 40 epochs the rounding-order chaos is back (std 1.8 %, so three seeds
  resolve about +-1 % against PyTorch). Against ``exact`` of the same seed, MS1+MS2 is
  -0.32 / -0.10 / +0.07 %: the 20-epoch gap (+4.4 %, every seed) is slower convergence,
  which 40 epochs closes to below the noise; this is the one text setting measured
  within 1 % with memory saved. Session 3 repeated this at 10 seeds (``exact`` and
  both against PyTorch and against ``exact``, standard errors): :mod:`.accuracy`.
  Not measured (machine time): MS1 and MS2 alone at 40 epochs, θ 0.1 at 40 epochs.

Measured, session 1 (MS1 and MS2 alone; issue 13's 1 % criterion). Command,
one process on the shared 2-core machine, 2026-11-23: ``python -m nnrtl.gen.omni.studies.accuracy
--sweep --task text --seeds 3 -o DIR`` (30.0 minutes wall, 11.4 min CPU) and ``... --task
digits ...`` (4.2 minutes wall). Seeds 1-3, full size (:data:`.accuracy.TASKS`), each
run against PyTorch of the same seed; "difference" is the metric's relative difference
(accuracy: negative is worse; perplexity: positive is worse), mean [min, max] / median
over the three seeds; "within" is the mean degradation <= 1 % ("all" if every seed's is);
"stored" the bytes kept FW -> BP per iteration (activations + intermediates, all cells)
against the decomposition without MS ("exact"), so MS1's figure here is smaller than
the P1-record-only figure of :mod:`.accuracy`; "P1" MS1's survivor density, "skip"
MS2's skipped share of the BP cells (mean over epochs):

=====  ======  ============================  ======  ======  ======  =====  =====
task   run     difference mean [min, max]    median  within  stored  P1     skip
=====  ======  ============================  ======  ======  ======  =====  =====
text   exact   +8.54 % [+0.70 %, +13.11 %]   +11.82  no      0
text   θ 0.1   +6.99 % [+5.79 %, +8.30 %]    +6.89   no      -12.7   0.648
text   θ 0.05  +11.21 % [+1.58 %, +27.18 %]  +4.89   no      +0.8    0.812
text   θ 0.03  +0.12 % [-1.69 %, +1.86 %]    +0.18   yes     +6.7    0.883
text   θ 0.01  +1.21 % [-0.58 %, +4.04 %]    +0.19   no      +12.5   0.954
text   0.02    +26.10 % [+5.45 %, +66.58 %]  +6.26   no      -19.1          19.2 %
text   0.005   +2.71 % [+0.63 %, +4.58 %]    +2.92   no      -10.5          10.6 %
text   0.001   +0.15 % [-1.10 %, +0.79 %]    +0.76   all     -3.2           3.3 %
digits exact   +0.29 % [+0.00 %, +0.88 %]    +0.00   all     0
digits θ 0.1   +0.71 % [-1.41 %, +3.24 %]    +0.29   yes     -21.3   0.569
digits θ 0.05  +1.47 % [-0.85 %, +3.83 %]    +1.43   all     -10.2   0.690
digits θ 0.03  +0.79 % [-0.85 %, +2.36 %]    +0.86   all     -3.0    0.770
digits θ 0.01  +1.77 % [-0.85 %, +4.42 %]    +1.72   all     +8.4    0.894
digits 0.02    -1.85 % [-5.01 %, +0.86 %]    -1.41   no      -60.8          60.4 %
digits 0.005   +1.47 % [-0.28 %, +4.13 %]    +0.57   all     -37.5          37.3 %
digits 0.001   +0.50 % [-0.86 %, +2.65 %]    -0.28   all     -20.5          20.3 %
=====  ======  ============================  ======  ======  ======  =====  =====

(θ rows: MS1 alone; bare thresholds: MS2 alone. PyTorch values, seeds 1-3: text 4.629 /
4.700 / 4.596, digits 96.94 / 98.61 / 94.17 %. MS1+MS2 combined was not swept.)

Conclusions (mean over three seeds, against the same seeds' PyTorch):

* The text task cannot resolve 1 % with this training recipe. The decomposition
  *without* MS -- PyTorch's gradients up to float32 rounding order -- ends +0.70 %,
  +13.1 % and +11.8 % from PyTorch (seeds 1/2/3): SGD at lr 1.0 with momentum 0.9 is
  chaotic here, a rounding-sized perturbation grows into a different trajectory, and
  the final-epoch perplexity catches one-epoch spikes (exact seed 2: training loss
  1.201 -> 1.206 in the last epoch, validation 5.317; MS2 0.02 seed 2 diverges, 7.83).
  So a single run's difference is noise of up to +13 % (+27 %, +67 % in spikes), and
  three seeds do not average it down to 1 %.
* Within that noise, the largest settings that meet the criterion on the mean: text --
  MS1 θ 0.03 (+0.12 %, but it stores 6.7 % *more* than the baseline: the compressed P1
  record outweighs the five vectors above density ~0.8) and MS2 0.001 (+0.15 %, every
  seed within, 3.2 % stored saved, 3.3 % of the cells skipped). Digits -- MS1 θ 0.1
  (+0.71 %, one seed -1.41 %; 21.3 % saved at density 0.569) and MS2 0.005 (37.5 %
  saved, 37.3 % skipped); MS2 0.02 (60.8 % saved) loses 1.85 % on the mean (seed 3
  -5.0 %). The digits' rows are not monotone in θ: 360 test images, 0.28 % each.
* Against the paper (57.5 % footprint with both MS, PTB +0.54 % perplexity): on the
  per-timestamp text task the savings left within 1 % are 3.2 % (MS2) and none (MS1);
  on the single-loss digits task up to 37.5 % (MS2 alone) or 21.3 % (MS1 alone), below
  57.5 % even before weights are counted (the paper's footprint includes them; this
  "stored" does not). Issue 13's "with them on, the two real tasks stay within 1 %"
  holds for digits at θ 0.1 or MS2 0.005, and for text only at thresholds that save
  almost nothing, and even there the baseline's own seed-to-seed chaos is larger than
  the margin being measured.

The same text sweep with the gradient norm clipped to 1.0 in both trainings (``--grad-clip
1.0``; 0 to 0.6 % of the steps clipped, so the spikes, not the ordinary steps), two runs:
``--sweep --task text --seeds 3 --grad-clip 1.0 --prune-thresholds 0.1 --skip-thresholds
0.02`` (3.4 min wall) and ``... --prune-thresholds 0.05,0.03,0.01 --skip-thresholds
0.005,0.001`` (8.5 min wall; the machine was less loaded than for the runs above). PyTorch
4.629 / 4.675 / 4.490; exact -0.35 % [-1.22 %, +0.70 %], within: the chaos is gone and
1 % becomes resolvable:

=====  ==========================  ======  ======  ======  =====  =====
run    difference mean [min, max]  median  within  stored  P1     skip
=====  ==========================  ======  ======  ======  =====  =====
θ 0.1  +7.77 % [+5.67 %, +9.41 %]  +8.22   no      -12.5   0.650
θ 0.05 +2.30 % [+0.44 %, +3.98 %]  +2.48   no      +0.6    0.809
θ 0.03 +0.19 % [-0.56 %, +1.11 %]  +0.03   yes     +6.6    0.883
θ 0.01 -0.62 % [-1.27 %, +0.06 %]  -0.65   all     +12.4   0.953
0.02   +6.34 % [+4.83 %, +7.94 %]  +6.26   no      -19.1          19.2 %
0.005  +3.71 % [+2.00 %, +5.35 %]  +3.78   no      -9.2           9.3 %
0.001  +1.78 % [+0.79 %, +3.32 %]  +1.24   no      -3.3           3.3 %
=====  ==========================  ======  ======  ======  =====  =====

With the noise removed the gaps are systematic and monotone in the threshold: on the
per-timestamp task MS2 is outside 1 % at every swept threshold (even 0.001, 3.3 % of the
cells skipped), and MS1 is within 1 % only from θ 0.03 down, where its compressed record
stores more than the uncompressed baseline. On this task neither MS saves memory within
1 %; the seed-1 analysis above (the σ'-products pruned at θ 0.1 carry real mass; eq. 4's
magnitude profile does not hold, so skipped cells carry real gradient) is what the
sweep confirms. Clipping is not the tasks' default (:data:`.accuracy.TASKS` unchanged, so the
figures above stay reproducible); MS1+MS2 combined was not swept.
"""

import json
import math
from pathlib import Path

import numpy as np

from ...errors import UsageError
from ..training import MsConfig

__all__ = ["PRUNE_THRESHOLDS", "SKIP_THRESHOLDS", "BOTH_THRESHOLDS", "LIMIT", "sweep",
           "quick_sweep", "rows_from_lines", "rows_from_files", "check_thresholds",
           "check_pairs", "label"]

#: MS1's θ swept by default (the paper's "around 0.1" down to 0.01).
PRUNE_THRESHOLDS = (0.1, 0.05, 0.03, 0.01)
#: MS2's skip threshold swept by default (the default 0.02 and below).
SKIP_THRESHOLDS = (0.02, 0.005, 0.001)
#: MS1+MS2 together (``both`` rows), ``(θ, skip threshold)`` pairs swept by default: the
#: documented defaults of :class:`~.training.MsConfig`.
BOTH_THRESHOLDS = ((MsConfig.prune_threshold, MsConfig.skip_threshold),)
#: The criterion of issue 13: within 1 % of the baseline's metric.
LIMIT = 0.01


def check_thresholds(values, name, allow_empty=False):
    """``values`` as a tuple of floats in [0, 1) (at least one unless ``allow_empty``);
    else :class:`UsageError` naming ``name``."""
    values = tuple(values)
    if not values and not allow_empty:
        raise UsageError(f"{name} must name at least one threshold")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 <= value < 1 or math.isnan(value):
            raise UsageError(f"{name} must be numbers from 0 to below 1, not {value!r}")
    return tuple(float(v) for v in values)


def check_pairs(pairs, name="both_thresholds"):
    """``pairs`` as a tuple of ``(θ, skip threshold)`` float pairs, each in [0, 1); else
    :class:`UsageError` naming ``name``."""
    pairs = tuple(pairs)
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise UsageError(f"{name} must be (θ, skip threshold) pairs, not {pair!r}")
    return tuple(tuple(check_thresholds(pair, name)) for pair in pairs)


def label(threshold):
    """A setting's threshold as text: ``0.1``, or ``0.1/0.005`` for a ``both`` pair."""
    if isinstance(threshold, (tuple, list)):
        return "/".join(f"{value:g}" for value in threshold)
    return f"{threshold:g}"


def _settings(spec, prune_thresholds, skip_thresholds, both_thresholds=(),
              scaling=MsConfig.scaling):
    """``(run, threshold, config)`` in the order they are trained; a ``both`` setting's
    threshold is the pair ``(θ, skip threshold)``; ``scaling`` MS2's."""
    out = [("exact", 0.0, MsConfig(loss_type=spec.loss_type))]
    out += [("ms1", theta, MsConfig(ms1=True, prune_threshold=theta,
                                      loss_type=spec.loss_type))
            for theta in prune_thresholds]
    out += [("ms2", threshold, MsConfig(ms2=True, skip_threshold=threshold,
                                        loss_type=spec.loss_type, scaling=scaling))
            for threshold in skip_thresholds]
    out += [("both", (theta, threshold), MsConfig(ms1=True, prune_threshold=theta, ms2=True,
                                                   skip_threshold=threshold,
                                                   loss_type=spec.loss_type,
                                                   scaling=scaling))
            for theta, threshold in both_thresholds]
    return out


def _sem(values):
    """The standard error of the mean of ``values`` (sample std / sqrt n); ``None`` for
    fewer than two."""
    if len(values) < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def _upper(values):
    """The one-sided 95 % upper confidence bound of the mean of ``values`` (Student's t,
    n - 1 degrees of freedom); ``None`` for fewer than two."""
    if len(values) < 2:
        return None
    from ...optional import require
    require("scipy", "the accuracy sweep's confidence bound")
    from scipy.stats import t
    return float(np.mean(values) + t.ppf(0.95, len(values) - 1) * _sem(values))


def _paired(relative, sign):
    """The statistics of one list of per-seed relative differences (``sign`` -1 for
    accuracy, +1 for perplexity: degradation = sign * difference), as row fields."""
    degradation = [sign * d for d in relative]
    upper = _upper(degradation)
    return dict(mean=float(np.mean(relative)), sem=_sem(relative),
                min=float(np.min(relative)), max=float(np.max(relative)),
                degradation_mean=float(np.mean(degradation)),
                degradation_worst=float(np.max(degradation)),
                degradation_upper_95=upper,
                within_1_percent_95=None if upper is None else upper <= LIMIT)


def _summarise(task, run, threshold, per_seed, baselines, exact=None):
    """One setting's row (task name ``task``) from its per-seed :func:`train_run`
    results; ``exact``: the ``exact`` run's results of the same seeds (adds the
    ``vs_exact`` fields)."""
    relative = [(r["value"] - b["value"]) / b["value"] for r, b in zip(per_seed, baselines)]
    sign = -1.0 if per_seed[0]["metric"] == "accuracy" else 1.0
    degradation = [sign * d for d in relative]
    row = dict(kind="setting", task=task, metric=per_seed[0]["metric"], run=run,
               threshold=threshold, seeds=len(per_seed),
               seed_list=[r.get("seed") for r in per_seed],
               values=[r["value"] for r in per_seed],
               baseline_values=[b["value"] for b in baselines],
               relative_difference=relative,
               relative_difference_mean=float(np.mean(relative)),
               relative_difference_min=float(np.min(relative)),
               relative_difference_max=float(np.max(relative)),
               relative_difference_median=float(np.median(relative)),
               relative_difference_std=float(np.std(relative)),
               degradation_mean=float(np.mean(degradation)),
               degradation_worst=float(np.max(degradation)))
    row["within_1_percent"] = row["degradation_mean"] <= LIMIT
    row["all_seeds_within_1_percent"] = row["degradation_worst"] <= LIMIT
    stats = _paired(relative, sign)
    row.update(relative_difference_sem=stats["sem"],
               degradation_upper_95=stats["degradation_upper_95"],
               within_1_percent_95=stats["within_1_percent_95"])
    if exact is not None and run not in ("pytorch", "exact"):
        versus = [(r["value"] - e["value"]) / e["value"] for r, e in zip(per_seed, exact)]
        row["vs_exact"] = versus
        row.update({f"vs_exact_{key}": value for key, value in _paired(versus, sign).items()})
        if all("losses" in r for r in per_seed + list(exact)):
            # how far training itself got: the last epoch's mean training loss, minus
            # exact's of the same seed (nats; positive = less trained)
            row["final_loss_vs_exact"] = [r["losses"][-1] - e["losses"][-1]
                                          for r, e in zip(per_seed, exact)]
    if "stored_reduction" in per_seed[0]:
        row["stored_reduction"] = float(np.mean([r["stored_reduction"] for r in per_seed]))
    if "p1_density" in per_seed[0]:
        row["p1_density"] = float(np.mean([r["p1_density"] for r in per_seed]))
    if run in ("ms2", "both"):
        row["skipped"] = float(np.mean([np.mean(r["skipped_per_epoch"]) for r in per_seed]))
    row["seconds"] = round(sum(r["seconds"] for r in per_seed), 1)
    return row


def sweep(spec, seeds=(1, 2, 3), prune_thresholds=PRUNE_THRESHOLDS,
          skip_thresholds=SKIP_THRESHOLDS, emit=None, both_thresholds=(),
          scaling=MsConfig.scaling):
    """Sweep MS1's θ and MS2's skip threshold on the task ``spec`` over ``seeds``.

    Trains per seed the PyTorch baseline, ``exact`` (the decomposition without MS),
    MS1 at each of ``prune_thresholds``, MS2 at each of ``skip_thresholds`` and both
    together (run ``both``) at each ``(θ, skip threshold)`` of ``both_thresholds`` (MS2
    with the factor ``scaling``, :data:`.skipping.SCALINGS`), one
    setting across all seeds before the next (so a cut-off run leaves whole settings).
    ``emit``, if given, is called with every per-run result and every setting row as
    they are made. Returns the setting rows (module docstring), ``pytorch`` first.
    """
    from .accuracy import load_task, train_run
    seeds = tuple(seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                        for s in seeds):
        raise UsageError(f"seeds must be non-negative integers, at least one, not {seeds!r}")
    prune_thresholds = check_thresholds(prune_thresholds, "prune_thresholds", True)
    skip_thresholds = check_thresholds(skip_thresholds, "skip_thresholds", True)
    both_thresholds = check_pairs(both_thresholds)
    emit = emit or (lambda row: None)
    task = load_task(spec)

    def run(config, seed, name, threshold):
        result = train_run(spec, config, seed, task)
        result.update(kind="run", seed=seed, run=name, threshold=threshold)
        return result

    baselines = [run(None, seed, "pytorch", 0.0) for seed in seeds]
    for result in baselines:
        emit(result)
    rows = [_summarise(spec.name, "pytorch", 0.0, baselines, baselines)]
    emit(rows[-1])
    exact = None
    for name, threshold, config in _settings(spec, prune_thresholds, skip_thresholds,
                                             both_thresholds, scaling):
        per_seed = []
        for index, seed in enumerate(seeds):
            result = run(config, seed, name, threshold)
            reference = exact[index] if exact else result
            result["stored_reduction"] = 1 - (result["stored_bytes_per_iteration"]
                                              / reference["stored_bytes_per_iteration"])
            result["relative_difference"] = ((result["value"] - baselines[index]["value"])
                                             / baselines[index]["value"])
            emit(result)
            per_seed.append(result)
        exact = exact or per_seed
        rows.append(_summarise(spec.name, name, threshold, per_seed, baselines, exact))
        emit(rows[-1])
    return rows


def rows_from_lines(lines):
    """The setting rows again from the ``"kind": "run"`` lines of a sweep (its JSON
    output, possibly cut off: settings without every seed are left out)."""
    runs = [line for line in lines if line.get("kind") == "run"]
    rows = []
    for task in dict.fromkeys(line["task"] for line in runs):
        mine = [line for line in runs if line["task"] == task]
        baselines = [line for line in mine if line["run"] == "pytorch"]
        def key(line):
            threshold = line["threshold"]
            return line["run"], tuple(threshold) if isinstance(threshold, list) else threshold
        exact = [line for line in mine if line["run"] == "exact"]
        exact = exact if len(exact) == len(baselines) else None
        for run, threshold in dict.fromkeys(key(line) for line in mine):
            per_seed = [line for line in mine if key(line) == (run, threshold)]
            if len(per_seed) == len(baselines):
                rows.append(_summarise(task, run, threshold, per_seed, baselines, exact))
    return rows


def rows_from_files(paths):
    """The setting rows of one or more sweeps' ``sweep.jsonl`` files (or directories
    holding one, searched recursively), their runs pooled per task: seed by seed runs
    (``--seed K --seeds 1``) summarised together. Runs are ordered by seed; a seed's
    run repeated in two files is an error (:class:`UsageError`)."""
    lines, seen = [], set()
    for path in paths:
        path = Path(path)
        files = sorted(path.rglob("sweep.jsonl")) if path.is_dir() else [path]
        if not files:
            raise UsageError(f"no sweep.jsonl under {path}")
        for file in files:
            try:
                text = file.read_text()
            except OSError as error:
                raise UsageError(f"cannot read {file}: {error.strerror or error}") \
                    from None
            for line in map(json.loads, text.splitlines()):
                if line.get("kind") != "run":
                    continue
                key = (line["task"], line["run"], json.dumps(line["threshold"]),
                       line["seed"])
                if key in seen:
                    raise UsageError(f"{file}: run {key} appears twice")
                seen.add(key)
                lines.append(line)
    lines.sort(key=lambda line: line["seed"])
    return rows_from_lines(lines), lines


def quick_sweep(seeds=(1, 2), prune_thresholds=(0.1, 0.01), skip_thresholds=(0.02,),
                tasks=None, both_thresholds=BOTH_THRESHOLDS):
    """The sweep on the tiny tasks (:data:`.accuracy.QUICK`), for the omni bench: a dict
    task name -> setting rows of :func:`sweep`. About 10 s per task and seed on one
    thread at the defaults."""
    from .accuracy import QUICK
    return {name: sweep(QUICK[name], seeds, prune_thresholds, skip_thresholds,
                        both_thresholds=both_thresholds)
            for name in (tasks or sorted(QUICK))}
