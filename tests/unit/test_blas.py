"""The BLAS kernel numpy runs is named, and a kernel forced below the CPU's vectors is warned about."""

from autosched.measure import blas


def test_describe_names_the_library_and_kernel(monkeypatch):
    monkeypatch.setattr(blas, "blas_info", lambda: [
        {"user_api": "blas", "internal_api": "openblas", "version": "0.3.31", "num_threads": 2,
         "architecture": "SkylakeX"}])  # fmt: skip
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_L2_SIZE", raising=False)
    assert blas.describe() == "numpy BLAS: openblas 0.3.31 (SkylakeX kernel, 2 threads)"
    assert blas.forced_warning({"avx512f"}) is None
    monkeypatch.setattr(blas, "blas_info", list)
    assert "unknown" in blas.describe()


def test_a_forced_older_kernel_is_warned_about(monkeypatch):
    monkeypatch.setattr(blas, "blas_info", lambda: [{"internal_api": "openblas", "architecture": "Haswell"}])
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert "OPENBLAS_CORETYPE=Haswell" in blas.describe()
    warning = blas.forced_warning({"avx2", "avx512f"})
    assert warning is not None and "unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE" in warning
    assert blas.forced_warning({"avx2"}) is None  # an AVX2 chip: the Haswell kernel is its best


def test_the_real_library_is_found():
    assert blas.describe().startswith("numpy BLAS: ")
