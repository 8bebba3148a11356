"""FPDeep (Wang et al., CNN training on a 1-D chain of FPGAs): the mapping framework.

* :mod:`.network`: the layer chain (AlexNet, VGG-16, VGG-19 built in; any CNN of the model
  layer);
* :mod:`.partition`: coarse and fine partitions, eq. 5's V;
* :mod:`.cost`: the "paper" (fixed16) and fp32 cost models, MAC-unit allocation;
* :mod:`.mapper`: :func:`map_network`, storage, parameter balancing, the period;
* :mod:`.links`: link traffic per boundary; :mod:`.config`: :class:`NodePlan`;
* :mod:`.table`: the per-node table; :mod:`.hooks`: the engine's ``map`` hook.
"""

from .config import HostedBanks, NodePlan, SegmentConfig
from .cost import COST_MODELS, PRECISIONS
from .mapper import Mapping, map_network
from .network import BUILTIN, Chain, ChainLayer, alexnet, builtin, from_network, vgg16, vgg19

__all__ = ["NodePlan", "HostedBanks", "SegmentConfig", "COST_MODELS", "PRECISIONS",
           "Mapping", "map_network", "BUILTIN", "Chain", "ChainLayer", "alexnet", "builtin",
           "from_network", "vgg16", "vgg19"]
