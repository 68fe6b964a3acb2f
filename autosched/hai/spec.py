"""What an adapter declares about itself: the one place the rest of autosched learns about a chip.

:class:`AdapterSpec` is defined in :mod:`autosched.target` (below lowering and the sketch rules, which
read it) and named here too, where adapters have always imported it from.
"""

from ..target import STYLES as STYLES
from ..target import AdapterSpec as AdapterSpec
