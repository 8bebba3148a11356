"""FPDeep's partitions: the coarse DP is exact (against brute force), eq. 5 by hand, the
fine cuts are contiguous and non-empty and do not raise V."""

import itertools

import numpy as np
import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import alexnet, vgg16, vgg19
from nnrtl.gen.fpdeep.partition import (UnitLine, coarse_partition, fine_partition,
                                        node_works, unit_mode, variance)


def test_variance_is_eq5():
    """V = Σ (Op_i − Op_min) / Op_min: (0 + 1 + 2) / 2 for works 2, 3, 4."""
    assert variance([2, 3, 4]) == pytest.approx(1.5)
    assert variance([5, 5]) == 0.0
    assert variance([0, 3]) == float("inf")


@pytest.mark.parametrize("seed", range(20))
def test_coarse_partition_is_exact(seed):
    rng = np.random.default_rng(seed)
    works = rng.integers(1, 100, size=rng.integers(1, 8)).tolist()
    nodes = int(rng.integers(1, 5))
    groups = coarse_partition(works, nodes)
    assert len(groups) == nodes and groups[0][0] == 0 and groups[-1][1] == len(works)
    assert all(a[1] == b[0] for a, b in zip(groups, groups[1:]))
    if len(works) >= nodes:
        assert all(b > a for a, b in groups)
    found = max(sum(works[a:b]) for a, b in groups)
    best = min(max(sum(works[a:b]) for a, b in zip((0, *cuts), (*cuts, len(works))))
               for cuts in itertools.combinations_with_replacement(range(len(works) + 1),
                                                                   nodes - 1))
    assert found == best


def test_unit_modes():
    """ICP by default; OCP for fewer than 16 input channels (AlexNet conv1, VGG conv1_1)."""
    assert unit_mode(alexnet().layers[0]) == "OCP" and unit_mode(vgg16().layers[0]) == "OCP"
    assert unit_mode(vgg16().layers[1]) == "ICP"
    line = UnitLine.of(alexnet())
    # conv1: 96 output-channel units; conv2..5: 96, 256, 384, 384 input channels; FC inputs
    assert len(line) == 96 + 96 + 256 + 384 + 384 + 9216 + 4096 + 4096
    assert line.work.sum() == pytest.approx(alexnet().work)


@pytest.mark.parametrize("make", [alexnet, vgg16, vgg19])
@pytest.mark.parametrize("nodes", [2, 5, 15, 40])
def test_fine_cuts_and_v(make, nodes):
    chain = make()
    line = UnitLine.of(chain)
    cuts, _ = fine_partition(line, nodes)
    bounds = [0, *cuts, len(line)]
    assert all(b > a for a, b in zip(bounds, bounds[1:]))
    works = node_works(line, cuts)
    assert works.sum() == pytest.approx(chain.work)
    coarse = coarse_partition([l.work for l in chain.layers], nodes)
    v_coarse = variance([sum(l.work for l in chain.layers[a:b]) for a, b in coarse])
    assert variance(works) <= v_coarse
    # the heaviest node is within one unit of the even share
    assert works.max() <= chain.work / nodes + line.work.max()


def test_too_many_fpgas():
    line = UnitLine.of(alexnet())
    with pytest.raises(UsageError, match=f"--fpgas {len(line) + 1}: the network has only "
                                         f"{len(line)} channel units"):
        fine_partition(line, len(line) + 1)
