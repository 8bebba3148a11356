"""The mapping ``nnrtl map fpdeep`` returns (gen/fpdeep/search.py, remedy.py): pinned options
kept, the free ones (``fc_batch``, balancing, the Act-RAM placement) chosen as the fastest
mapping whose buffers fit, and refusals that name the node, the resource and the changes
that fit, each of which the test then maps."""

import math
import re

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import builtin, map_network
from nnrtl.gen.fpdeep.remedy import fits
from nnrtl.gen.fpdeep.search import choose_mapping, overflows

VC709 = get_board("vc709")
#: VC709: 1,470 BRAM36 of 2,048 16-bit words; two DDR3-1866 64-bit channels (29.856 GB/s).
BRAM36, WORDS16, DDR_BYTES_PER_S = 1470, 2048, 2 * 8 * 1866e6
#: AlexNet's FC weights: 9216·4096 + 4096·4096 + 4096·1000.
ALEXNET_FC_WEIGHTS = 58_621_952


@pytest.fixture(scope="module")
def alexnet():
    return builtin("alexnet", 224)


@pytest.fixture(scope="module")
def chosen(alexnet):
    """AlexNet on 15 VC709s, the paper's setting, nothing pinned."""
    return choose_mapping(alexnet, 15, VC709)


def test_paper_setting_is_compute_bound_and_every_buffer_fits(chosen):
    assert not chosen.infeasible and not overflows(chosen)
    for node in chosen.nodes:          # every node's on-chip words in 1,470 BRAM36
        assert math.ceil(sum(words for _, words in node.storage) / WORDS16) <= BRAM36
    assert chosen.bound == "compute" and chosen.period == chosen.compute_period
    # the FC batch: the least whose weight pass (4 words of 2 bytes per weight) the DDR
    # carries in a compute period
    rate = 200e6 / chosen.compute_period
    assert chosen.fc_batch == math.ceil(4 * 2 * ALEXNET_FC_WEIGHTS * rate / DDR_BYTES_PER_S)
    assert set(dict(chosen.chosen)) == {"balance", "act_ram", "fc_batch"}


def test_conv1_input_waits_in_the_second_ddr_channel(chosen):
    """Node 1's Act-RAM (conv1's input, 3 · 224² words a sample) waits in DDR: written and
    read once a sample on one of the two channels, within the period; its DDR depth the
    residency's samples of it."""
    node = chosen.nodes[0]
    conv1 = node.segments[0]
    assert conv1.layer == "conv1" and conv1.act_ram_in_ddr
    assert node.act_ram_ddr_words == math.ceil(conv1.residency * 3 * 224 ** 2)
    least = 2 * 3 * 224 ** 2 * 2 / (DDR_BYTES_PER_S / 2) * 200e6   # without the SFU masks
    assert least <= node.act_ddr_cycles <= chosen.period
    assert chosen.act_ddr_period == max(n.act_ddr_cycles for n in chosen.nodes)


def test_pinned_values_are_kept(alexnet):
    mapping = choose_mapping(alexnet, 15, VC709, fc_batch=2, balance=True, act_ram="chip")
    assert mapping.fc_batch == 2 and mapping.chosen == () and not mapping.infeasible
    assert not any(s.act_ram_in_ddr for n in mapping.nodes for s in n.segments)
    # everything pinned: the mapper's own mapping
    same = map_network(alexnet, 15, VC709, fc_batch=2, balance=True)
    assert mapping.period == same.period and mapping.nodes == same.nodes


def test_on_chip_when_it_fits():
    """AlexNet on 67 x 67 images over 8 boards: every Act-RAM fits on chip."""
    chain = builtin("alexnet", 67)
    mapping = choose_mapping(chain, 8, VC709)
    assert dict(mapping.chosen)["act_ram"] == "overflow: all on chip"
    assert mapping.act_ddr_period == 0 and not mapping.infeasible


def test_pinned_values_that_do_not_fit_name_what_fits(alexnet):
    with pytest.raises(UsageError, match=(
            r"^alexnet does not fit 15 x vc709 in fixed16 with --param fc_batch=30, --param "
            r"act_ram=chip \(pinned\): node 1 needs [\d,]+ BRAM36, [\d,]+ over vc709's 1,470; "
            r"its largest buffer is act_ram \([\d,]+ words\), with the free choices at their "
            r"most storage-saving \(balancing on\); it fits with fc_batch unpinned or act_ram "
            r"unpinned$")):
        choose_mapping(alexnet, 15, VC709, fc_batch=30, act_ram="chip")
    assert not choose_mapping(alexnet, 15, VC709, fc_batch=30).infeasible
    assert not choose_mapping(alexnet, 15, VC709, act_ram="chip").infeasible


@pytest.mark.slow
def test_nothing_fits_names_the_binding_resource_and_the_least_fpgas():
    """VGG-16's fp32 weights and their gradients (14.7 M each, 32-bit) do not fit 15 VC709s
    (22,050 BRAM36 of 1,024 words); the refusal's FPGA count fits and one fewer does not,
    and fixed16 fits."""
    chain = builtin("vgg16", 32)
    with pytest.raises(UsageError) as error:
        choose_mapping(chain, 15, VC709, precision="fp32")
    text = str(error.value)
    assert re.match(r"^vgg16 does not fit 15 x vc709 in fp32: node \d+ needs [\d,]+ BRAM36, "
                    r"[\d,]+ over vc709's 1,470; its largest buffer is lpram ", text), text
    more = int(re.search(r"--fpgas (\d+)", text).group(1))
    assert not choose_mapping(chain, more, VC709, precision="fp32").infeasible
    assert not fits(chain, more - 1, VC709, options={"precision": "fp32"})
    assert 2 * 14_710_464 > 15 * BRAM36 * 1024 > 0          # the weights alone overflow
    assert text.endswith("--precision fixed16")
    assert not choose_mapping(chain, 15, VC709).infeasible


@pytest.mark.slow
def test_balancing_pinned_off_names_balancing():
    """VGG-16 on 32 x 32 images over 15 boards overflows a node without balancing."""
    chain = builtin("vgg16", 32)
    with pytest.raises(UsageError, match=r"with --param balance=0 \(pinned\): .*; it fits "
                                         r"with balance unpinned"):
        choose_mapping(chain, 15, VC709, balance=False)
    assert choose_mapping(chain, 15, VC709).balance


def test_act_ram_pinned_on_chip_names_the_buffer_that_bounds(alexnet):
    """Act-RAMs pinned on chip: the FC batch is the largest whose buffers fit, the DDR
    bounds the period and the buffer that holds the next batch back is named."""
    mapping = choose_mapping(alexnet, 15, VC709, act_ram="chip")
    batch = mapping.fc_batch
    assert mapping.bound == "ddr" and not mapping.infeasible
    assert re.match(rf"^storage at fc_batch={batch + 1}: node 1 needs [\d,]+ BRAM36, [\d,]+ "
                    r"over vc709's 1,470; its largest buffer is act_ram",
                    mapping.storage_limit), mapping.storage_limit
    assert map_network(alexnet, 15, VC709, fc_batch=batch + 1, check_storage=False).infeasible
    # the DDR period: 4 words of 2 bytes per FC weight a pass, one pass per batch
    assert mapping.period == math.ceil(4 * 2 * ALEXNET_FC_WEIGHTS / batch / DDR_BYTES_PER_S
                                       * 200e6)


@pytest.mark.parametrize("name", ["vgg16", "vgg19"])
def test_vgg_maps_onto_15_vc709s_with_no_option(name):
    """VGG-16/19 at 224 x 224 on 15 VC709s in fixed16: compute-bound, every node's on-chip
    words within its 1,470 BRAM36, the Act-RAMs of conv1_2 (64 · 224² words a sample) in
    DDR, their channel's traffic inside the period."""
    mapping = choose_mapping(builtin(name, 224), 15, VC709)
    assert not mapping.infeasible and mapping.bound == "compute"
    for node in mapping.nodes:
        assert math.ceil(sum(words for _, words in node.storage) / WORDS16) <= BRAM36
        assert node.act_ddr_cycles <= mapping.period
    conv1_2 = [s for n in mapping.nodes for s in n.segments if s.layer == "conv1_2"]
    assert conv1_2 and all(s.act_ram_in_ddr for s in conv1_2)
