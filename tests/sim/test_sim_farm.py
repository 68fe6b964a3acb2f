"""A farm run of real and simulated chips (review finding 7): modeled times never teach a real chip."""

from __future__ import annotations

from types import SimpleNamespace

from autosched.farm_cli import _link_peers, local_targets
from autosched.hai.registry import spec_of
from autosched.target import is_simulated

SIM = "sim -chip=avx2-desktop"


def test_simulated_chips_are_peers_of_simulated_chips_only():
    targets = ["llvm-cpu", "llvm-cpu -mcpu=haswell", SIM, "sim -chip=neon-server", "null -dialect=cuda"]
    tuners = [SimpleNamespace(target=t) for t in targets]
    _link_peers(tuners)  # type: ignore[arg-type]
    peers = {t.target: [p.target for p in t.peers] for t in tuners}
    assert peers["llvm-cpu"] == ["llvm-cpu -mcpu=haswell"]
    assert peers["llvm-cpu -mcpu=haswell"] == ["llvm-cpu"]
    assert peers[SIM] == ["sim -chip=neon-server"]  # both modeled, both CPU style
    assert peers["null -dialect=cuda"] == []


def test_the_spec_declares_what_is_simulated_and_all_offers_only_real_chips():
    assert spec_of("sim").simulated and spec_of("sim").runs_on_host
    assert not spec_of("llvm-cpu").simulated and is_simulated(SIM) and not is_simulated("llvm-cpu")
    assert not any(spec_of(kind).simulated for kind in local_targets())
