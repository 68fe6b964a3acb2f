"""A Tuner given a farm's measurer takes the chip from it: no such chip is needed here (finding 5)."""

from autosched.chip import ChipInfo
from autosched.measure.fake import FakeMeasurer
from autosched.tune import TuneOptions, Tuner

from .common import cost, records, small_matmul

H200 = ChipInfo("NVIDIA H200", "gpu", "sm_90", cores=132, vector_bits=1024, l2_bytes=50 << 20,
                shared_mem_bytes=48 << 10, max_threads_per_block=1024, peak_gflops=60000.0,
                bandwidth_gbs=4800.0)  # fmt: skip


class FarmStub(FakeMeasurer):
    """What a FarmMeasurer offers the Tuner: measurements and the chip of the workers timing them."""

    def chip_facts(self, target=None):
        return H200


def test_a_cuda_tuner_with_a_farm_measurer_needs_no_cuda_gpu_here(tmp_path):
    log = tmp_path / "cuda.jsonl"
    options = TuneOptions(trials=4, batch_size=4, baseline=False, strategy="random")
    tuner = Tuner([small_matmul()], "cuda", log, options, measurer=FarmStub(cost))
    assert tuner.chip == H200 and tuner.fingerprint.startswith("cuda:sm_90")
    (task,) = tuner.run()
    got = records(log)
    assert task.trials == 4 and len(got) == 4 and all(r.ok for r in got)
    assert {r.chip["name"] for r in got} == {"NVIDIA H200"}
