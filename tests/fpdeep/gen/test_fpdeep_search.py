"""The mapping ``nnrtl map fpdeep`` returns (gen/fpdeep/search.py): pinned options kept, the
free ones (``fc_batch``, balancing) chosen as the fastest mapping whose buffers fit, and
refusals that name the node, the buffer, the overflow and the options that fit."""

import re

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import builtin, map_network
from nnrtl.gen.fpdeep.search import choose_mapping, overflows

VC709 = get_board("vc709")


@pytest.fixture(scope="module")
def alexnet():
    return builtin("alexnet", 224)


@pytest.fixture(scope="module")
def chosen(alexnet):
    """AlexNet on 15 VC709s, the paper's setting, nothing pinned."""
    return choose_mapping(alexnet, 15, VC709)


def test_paper_setting_fits_with_the_largest_batch(alexnet, chosen):
    assert not chosen.infeasible and not overflows(chosen)
    batch = chosen.fc_batch
    assert batch > 1 and chosen.balance
    # one more sample per weight pass overflows a node; the chosen one is the fastest
    larger = map_network(alexnet, 15, VC709, fc_batch=batch + 1, check_storage=False)
    assert larger.infeasible and larger.period <= chosen.period
    smaller = map_network(alexnet, 15, VC709, fc_batch=batch - 1, check_storage=False)
    assert smaller.period > chosen.period
    why = dict(chosen.chosen)
    assert set(why) == {"balance", "fc_batch"}
    assert re.match(rf"^{batch} \(the largest whose buffers fit: at {batch + 1} node \d+ needs "
                    r"[\d,]+ BRAM36, [\d,]+ over vc709's 1,470; its largest buffer is \w+ "
                    r"\([\d,]+ words\)", why["fc_batch"])
    assert chosen.storage_limit == f"storage at fc_batch={batch + 1}"
    options = chosen.as_json()["options"]
    assert options["fc_batch"] == batch and options["chosen"] == why


def test_pinned_values_are_kept(alexnet):
    mapping = choose_mapping(alexnet, 15, VC709, fc_batch=2, balance=True)
    assert mapping.fc_batch == 2 and mapping.chosen == () and not mapping.infeasible


def test_unbounded_batch_when_everything_fits():
    """AlexNet on 67 x 67 images over 8 boards: the batch the DDR needs fits."""
    chain = builtin("alexnet", 67)
    mapping = choose_mapping(chain, 8, VC709)
    assert mapping.fc_batch == map_network(chain, 8, VC709, check_storage=False).fc_batch
    assert re.match(r"^\d+ \(the least the DDR bandwidth needs at the compute rate\)$",
                    dict(mapping.chosen)["fc_batch"])
    assert mapping.storage_limit is None


def test_pinned_batch_that_overflows_names_it_and_the_fit(alexnet, chosen):
    with pytest.raises(UsageError, match=(
            r"^--param fc_batch=30 \(pinned\): node 1 needs [\d,]+ BRAM36, [\d,]+ over "
            r"vc709's 1,470; its largest buffer is act_ram \([\d,]+ words\); it fits with "
            rf"--param fc_batch={chosen.fc_batch} \(or any smaller\)")):
        choose_mapping(alexnet, 15, VC709, fc_batch=30)


def test_nothing_fits_names_the_buffer_and_the_options():
    with pytest.raises(UsageError, match=(
            r"^no fc_batch fits: at fc_batch=1 node \d+ needs [\d,]+ BRAM36, [\d,]+ over "
            r"vc709's 1,470; its largest buffer is \w+ \([\d,]+ words\)( \(and \d+ other "
            r"node\(s\)\))?; (it fits with --fpgas 30 \(fc_batch \d+\)|neither fc_batch 1 nor "
            r"parameter balancing nor --fpgas 30 fits \(a smaller --image-size or a board "
            r"with more BRAM36 shortens the buffers\)$)")):
        choose_mapping(builtin("vgg16", 224), 15, VC709, precision="fp32")


def test_balancing_pinned_off_names_balancing():
    """VGG-16 on 32 x 32 images over 15 boards overflows a node without balancing."""
    chain = builtin("vgg16", 32)
    assert not map_network(chain, 15, VC709, fc_batch=1, check_storage=False).infeasible
    assert map_network(chain, 15, VC709, fc_batch=1, balance=False,
                       check_storage=False).infeasible
    with pytest.raises(UsageError, match=r"^no fc_batch fits: .*; it fits with --param "
                                         r"balance=1"):
        choose_mapping(chain, 15, VC709, balance=False)
    assert choose_mapping(chain, 15, VC709).balance
