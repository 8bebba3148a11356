"""gen/omni/skipping.py: MS2's eq. 4, eq. 5, α, the skip map and the scaling factor."""

import numpy as np
import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.skipping import (SkipController, fit_alpha, kept_cells, magnitude_map,
                                     predict_loss, scale_factors)


def test_eq4_by_hand():
    single = magnitude_map(2.0, 0.5, 2, 3, "single")
    # α·loss·(LN - layer)/(LL - t): layer 0 -> 2/3, 2/2, 2/1; layer 1 -> 1/3, 1/2, 1/1
    np.testing.assert_allclose(single, [[2 / 3, 1.0, 2.0], [1 / 3, 0.5, 1.0]])
    per_step = magnitude_map(1.0, 1.0, 2, 3, "per-timestamp")
    # accumulated loss (LL - t), times (LN - layer) · (LL - t)
    np.testing.assert_allclose(per_step, [[18, 8, 2], [9, 4, 1]])
    with pytest.raises(UsageError, match=r"^loss_type must be one of single, "
                                         r"per-timestamp, not 'x'$"):
        magnitude_map(1, 1, 1, 1, "x")


def test_eq5_by_hand_and_guards():
    assert predict_loss([4.0, 2.0]) is None
    assert predict_loss([4.0, 2.0, 1.0]) == pytest.approx(0.5)      # 1 - 1²/2
    assert predict_loss([9.0, 4.0, 2.0, 1.0]) == pytest.approx(0.5)  # last three only
    assert predict_loss([3.0, 3.0, 2.0]) == 2.0                     # denominator 0
    assert predict_loss([3.0, 2.0, 2.5]) == 2.5                     # rising
    assert predict_loss([3.0, 2.9, 1.0]) == 0.0                     # clamped at 0


def test_alpha_recovers_a_scaled_map():
    shape = magnitude_map(1.0, 2.0, 3, 5, "single")
    assert fit_alpha(0.25 * shape, 2.0, "single") == pytest.approx(0.25)


@pytest.mark.parametrize("loss_type", ["single", "per-timestamp"])
def test_skip_sets_are_contiguous(loss_type):
    magnitudes = magnitude_map(1.0, 1.0, 3, 20, loss_type)
    for threshold in np.linspace(0, magnitudes.max() * 1.1, 23):
        kept = kept_cells(magnitudes, threshold)
        for row in kept:
            edges = np.flatnonzero(np.diff(row.astype(int)))
            assert len(edges) <= 1
            assert row.any()
            if not row.all():
                # single loss keeps the latest cells, per-timestamp the earliest
                assert row[-1] if loss_type == "single" else row[0]
        if threshold == 0:
            assert kept.all()


def test_scale_factor_flat_and_weighted():
    kept = np.array([[False, True, True, True]])
    assert scale_factors(np.ones((1, 4)), kept).tolist() == [pytest.approx(4 / 3)]
    magnitudes = np.array([[1.0, 2.0, 3.0, 4.0]])
    assert scale_factors(magnitudes, kept).tolist() == [pytest.approx(10 / 9)]


def test_controller_no_skip_in_first_three_epochs_then_skips():
    controller = SkipController(2, 10, "single", 0.2)
    for epoch, loss in zip((1, 2, 3), (2.0, 1.0, 0.6)):
        kept, factors, predicted = controller.plan(epoch)
        assert kept.all() and predicted is None and (factors == 1).all()
        if controller.wants_measurements(epoch):
            controller.observe(magnitude_map(0.5, loss, 2, 10, "single"), loss)
        controller.end_epoch(loss)
    assert controller.alpha == pytest.approx(0.5)
    kept, factors, predicted = controller.plan(4)
    assert predicted == pytest.approx(0.6 - 0.16 / 1.0)
    assert not kept.all() and kept[:, -1].all()
    assert (factors > 1).any()


def test_controller_threshold_zero_never_skips():
    controller = SkipController(1, 4, "per-timestamp", 0.0)
    for epoch in range(1, 8):
        kept, factors, _ = controller.plan(epoch)
        assert kept.all() and (factors == 1).all()
        assert not controller.wants_measurements(epoch)
        controller.end_epoch(1.0 / epoch)


def test_controller_errors():
    with pytest.raises(UsageError, match=r"^skip_threshold must be a number from 0 to "
                                         r"below 1, not -1$"):
        SkipController(1, 1, "single", -1)


def test_dropped_share_predicted_against_measured_flat_profile():
    """A per-timestamp task whose measured magnitudes are flat (as the character model's,
    see gen/omni/skipping.py): eq. 4 predicts the skipped tail carries 14/30 of the
    gradient, the measured profile says 3/4; the factor restores the predicted share."""
    controller = SkipController(1, 4, "per-timestamp", 0.2)
    assert controller.dropped_share(np.ones((1, 4), dtype=bool)) == (None, None)
    for epoch, loss in zip((1, 2, 3), (2.0, 1.0, 0.6)):
        controller.plan(epoch)
        if controller.wants_measurements(epoch):
            controller.observe(np.ones((1, 4)), loss)
        controller.end_epoch(loss)
    # α = 4 / (2.0 * (16 + 9 + 4 + 1)); threshold = 0.2 * α * 2.0 * 16 = 6.4 α;
    # epoch 4: predicted loss 0.44, α * 0.44 * (16, 9, 4, 1) = α * (7.04, 3.96, 1.76, 0.44)
    assert controller.alpha == pytest.approx(4 / 60)
    kept, factors, predicted = controller.plan(4)
    assert predicted == pytest.approx(0.44)
    assert kept.tolist() == [[True, False, False, False]]
    assert factors.tolist() == [pytest.approx(30 / 16)]
    magnitudes = magnitude_map(controller.alpha, predicted, 1, 4, "per-timestamp")
    assert controller.dropped_share(kept, magnitudes) == (pytest.approx(14 / 30),
                                                          pytest.approx(3 / 4))


@pytest.mark.parametrize("scaling, factor", [
    ("predicted", 30 / 16),      # eq. 4's (16, 9, 4, 1), one kept: 30 / 16
    ("measured", 10 / 4),        # epoch 1 measured (4, 3, 2, 1), one kept: 10 / 4
    ("count", 4 / 1),            # LL / kept
])
def test_scaling_factor_sums(scaling, factor):
    """Same plan as above (epoch 4 keeps the first of four cells); only what the factor
    sums changes."""
    controller = SkipController(1, 4, "per-timestamp", 0.2, scaling=scaling)
    for epoch, loss in zip((1, 2, 3), (2.0, 1.0, 0.6)):
        controller.plan(epoch)
        if controller.wants_measurements(epoch):
            controller.observe(np.array([[4.0, 3.0, 2.0, 1.0]]), loss)
        controller.end_epoch(loss)
    kept, factors, _ = controller.plan(4)
    assert kept.tolist() == [[True, False, False, False]]
    assert factors.tolist() == [pytest.approx(factor)]


def test_scaling_errors():
    with pytest.raises(UsageError, match=r"^scaling must be one of predicted, measured, "
                                         r"count, not 'x'$"):
        SkipController(1, 1, "single", 0.1, scaling="x")
