"""orccl's operations on two ranks, against the same computation on CPU."""

from __future__ import annotations

import pytest
from ranks import expect_success, run_ranks


@pytest.fixture(scope="module")
def ops_results(tmp_path_factory):
    return expect_success(run_ranks("ops", tmp_path_factory.mktemp("ops"), timeout=240))


def test_every_operation_matches_cpu(ops_results):
    for rank, result in enumerate(ops_results):
        assert result["failures"] == [], f"rank {rank}:\n" + "\n".join(result["failures"])
        assert result["backend"] == "cpu:gloo,openreg:orccl"
        # torch 2.13 leaves a plugin's group without a default backend; torch_openreg.distributed repairs it.
        assert result["default"] == "custom"
    # The roots check more (gather), but every rank ran the whole list.
    assert min(r["checked"] for r in ops_results) > 100


def test_four_ranks_on_two_devices_match_cpu(tmp_path):
    results = expect_success(run_ranks("four_ranks", tmp_path, world=4, timeout=180))
    assert [r["device"] for r in results] == ["openreg:0", "openreg:1", "openreg:0", "openreg:1"]
    for rank, result in enumerate(results):
        assert result["failures"] == [], f"rank {rank}:\n" + "\n".join(result["failures"])
        # 7 sizes x 2 dtypes x (3 all_reduce + all_gather + reduce_scatter), each compared.
        assert result["checked"] == 7 * 2 * 5


def test_init_without_backend_uses_orccl_for_openreg(tmp_path):
    results = expect_success(run_ranks("default_backend", tmp_path, timeout=90))
    for result in results:
        assert result["backend_of_openreg"] == "orccl"
        assert result["sum"] == [float(3 + 2 * (i % 7)) for i in range(10)]


def test_ddp_matches_one_process_on_the_full_batch(tmp_path):
    results = expect_success(run_ranks("ddp", tmp_path, timeout=120))
    for variant in ("device_ids", "no_device_ids", "comm_hook"):
        for result in results:
            assert result[variant]["max_diff"] < 1e-5, result
        # The replicas stay bitwise identical: every rank applies the same averaged gradients.
        assert results[0][variant]["checksum"] == results[1][variant]["checksum"]
    # DDP's runtime statistics come from openreg's device-event timer (csrc/distributed/Timer.cpp).
    for result in results:
        assert all(value > 0 for value in result["timer"].values()), result["timer"]


def test_the_readme_example_trains_on_two_ranks(tmp_path):
    results = expect_success(run_ranks("readme", tmp_path, timeout=90))
    assert [r["device"] for r in results] == ["openreg:0", "openreg:1"]
    # DDP averages the gradients: both ranks hold the same one, from inputs 1 and 2.
    assert results[0]["grad_sum"] == results[1]["grad_sum"] != 0


def test_fsdp2_with_a_gradient_divide_factor_matches_cpu(tmp_path):
    # The divide factor makes FSDP2 reduce-scatter with PREMUL_SUM(1/3): orccl refused it before.
    # Gloo has no PREMUL_SUM, so the reference is the same steps in one process on CPU.
    results = expect_success(run_ranks("fsdp2_divide_factor", tmp_path, timeout=120))
    for result in results:
        assert result["max_diff"] < 1e-6, result
        assert len(result["losses"]) == 3
        assert result["losses"] == pytest.approx(result["cpu_losses"], rel=1e-6, abs=1e-7)


def test_set_pg_timeout_reaches_orccl(tmp_path):
    results = expect_success(run_ranks("set_timeout", tmp_path, timeout=90))
    for result in results:
        assert result["before_s"] == 60.0
        assert result["after_s"] == 17.0
        # torch 2.13 warns "only supported for either nccl or gloo" when it sets nothing.
        assert result["warnings"] == []
        assert result["sum"] == [2.0] * 8
