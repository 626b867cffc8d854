"""Bad input and a dying peer give errors that name the cause, never a hang or a crash."""

from __future__ import annotations

import re

import pytest
from ranks import expect_success, run_ranks


def test_bad_input_is_refused_and_the_group_keeps_working(tmp_path):
    results = expect_success(run_ranks("bad_input", tmp_path, timeout=90))
    for rank, result in enumerate(results):
        errors = result["errors"]
        other = (rank + 1) % 2
        assert errors["other_device"] == (
            f"ValueError: orccl: allreduce: tensor 0 is on openreg:{other}, but this call uses openreg:{rank} "
            "(the group's bound device)"
        )
        assert errors["mixed_devices"] == "ValueError: orccl: allgather takes openreg tensors, but tensor 2 is on cpu"
        assert errors["dtype"] == "ValueError: orccl: allreduce does not support dtype UInt32"
        # Bitwise ops take integer and bool tensors (as Gloo's); a float tensor is refused at the call.
        assert errors["op"] == (
            "ValueError: orccl: allreduce cannot apply a bitwise reduce op (5) to Float tensors; "
            "it takes integer and bool tensors"
        )
        assert errors["premul_sum"] == "ValueError: orccl: allreduce cannot apply PREMUL_SUM to bool tensors"
        assert errors["list_length"] == "ValueError: orccl: allgather needs 2 output tensors (one per rank), got 1"
        assert errors["output_size"] == (
            "ValueError: orccl: all_gather_into_tensor: the output has 5 elements, expected 8 (input x group size)"
        )
        assert errors["non_contiguous"] == "ValueError: orccl: allreduce: tensor 0 must be dense and contiguous"
        reserved = (
            "is reserved for orccl's own messages (the first exchange of every collective and the chunks of large ones)"
        )
        assert errors["reserved_tag"] == f"ValueError: orccl: send: tag 1869767523 {reserved}"
        assert errors["pipeline_tag"] == f"ValueError: orccl: recv: tag 1869767524 {reserved}"
        assert result["still_works"] is True
        # Sizes that differ across ranks: caught before Gloo (which would abort the process), on both ranks.
        mine, theirs = (4, 20000) if rank == 0 else (20000, 4)
        # The blocking barrier after it reports the failure: as the failure itself, as the barrier not run
        # because of it, or (when it had failed before the barrier was called) as the group's earlier failure;
        # which of the three is timing. Each names the failed allreduce.
        assert re.match(
            r"DistBackendError: orccl(: the group is unusable after an earlier failure: orccl allreduce"
            r"| barrier \(group '0' default_pg, seq 3, .*\) failed: not run, the group failed before: orccl allreduce"
            r"| allreduce) \(group '0' default_pg, seq 2, rank \d of 2, peer ranks \[\d\]\) failed: ranks disagree",
            result["mismatch"],
        ), result["mismatch"]
        assert (
            f"ranks disagree: this rank's allreduce has {mine} x Float, rank {other}'s allreduce has {theirs} x Float"
        ) in result["mismatch"]


def test_sizes_that_differ_around_the_pipeline_are_named(tmp_path):
    results = expect_success(run_ranks("large_mismatch", tmp_path, timeout=90))
    cases = {
        "one_pipelines": ("allreduce", (4, 400000)),
        "both_pipeline": ("allreduce", (300000, 2100000)),
        "all_gather": ("_allgather_base", (300000, 2100000)),
    }
    for rank, result in enumerate(results):
        other = 1 - rank
        for name, (collective, sizes) in cases.items():
            error = result["errors"][name]
            assert error is not None and error.startswith("DistBackendError: orccl"), (name, error)
            assert (
                f"ranks disagree: this rank's {collective} has {sizes[rank]} x Float, "
                f"rank {other}'s {collective} has {sizes[other]} x Float"
            ) in error, (name, error)
        assert result["still_works"] is True


def test_a_silent_peer_fails_the_collective_by_the_group_timeout(tmp_path):
    # The harness's 90 s bound is what "not a hang" means here; the group's timeout is 4 s.
    outcomes = run_ranks("silent_peer", tmp_path, timeout=90)
    [result] = expect_success(outcomes[:1])
    error = result["error"]
    assert error.startswith(
        "DistBackendError: orccl barrier (group '0' default_pg, seq 2, rank 0 of 2, "
        "peer ranks [1]) failed: not run, the group failed before: orccl allreduce (group '0' "
        "default_pg, seq 1, rank 0 of 2, peer ranks [1]) failed: "
    ), error
    assert "Timed out waiting 4000ms" in error
    assert outcomes[1].returncode == 0, outcomes[1].output[-3000:]


def test_a_dying_rank_fails_its_peer_naming_the_collective_and_the_peer(tmp_path):
    outcomes = run_ranks("dying_rank", tmp_path, timeout=90)
    assert outcomes[1].returncode == 17, outcomes[1].output[-3000:]
    [result] = expect_success(outcomes[:1])
    # The barrier behind the failed all_reduce reports the dead peer (as its own failure, or, had the
    # all_reduce failed before the barrier was called, as the group's).
    first = result["first"]
    assert first.startswith(
        (
            "DistBackendError: orccl barrier (group '0' default_pg, seq 3, rank 0 of 2, peer ranks [1]) failed",
            "DistBackendError: orccl: the group is unusable",
        )
    ), first
    assert "peer ranks [1]" in first and ("Connection closed by peer" in first or "Connection reset" in first)
    assert result["later"].startswith("DistBackendError: orccl: the group is unusable after an earlier failure: orccl")
    assert "peer ranks [1]" in result["later"]
    # The device reports the failed collective at its next synchronisation, by its event name.
    assert result["device_sync"].startswith(
        "AcceleratorError: openreg: orErrorLaunchFailure: collective 'openregComm_AllReduce_Sum_f32' failed on device 0"
    )
    assert "orccl allreduce (group '0' default_pg, seq 2, rank 0 of 2, peer ranks [1]) failed" in result["device_sync"]


@pytest.mark.parametrize(
    "collective,name",
    [("all_reduce", "allreduce"), ("all_gather", "_allgather_base"), ("reduce_scatter", "_reduce_scatter_base")],
)
def test_a_rank_dying_inside_a_pipelined_collective_fails_its_peer_cleanly(tmp_path, collective, name):
    outcomes = run_ranks("dying_mid_pipeline", tmp_path, timeout=90, env={"COLLECTIVE": collective})
    assert outcomes[1].returncode == 17, outcomes[1].output[-3000:]
    [result] = expect_success(outcomes[:1])
    error = result["error"]
    assert error is not None, result
    assert re.search(rf"orccl {name} \(group '0' default_pg, seq \d+, rank 0 of 2, peer ranks \[1\]\) failed", error), (
        error
    )
    # Gloo fails a receive whose message was half read when the connection closed only by the group's timeout
    # (it does not count that read among the operations a closed connection fails): bounded, and named alike.
    assert any(
        cause in error for cause in ("Connection closed by peer", "Connection reset", "Timed out waiting 6000ms")
    )
    assert result["later"].startswith("DistBackendError: orccl: the group is unusable after an earlier failure"), result
    print(f"{collective}: {result['arrived']} of {result['expected']} elements from rank 1 arrived")


def test_a_second_device_in_one_group_is_refused(tmp_path):
    results = expect_success(run_ranks("second_device", tmp_path, timeout=90))
    assert results[0]["refused"] == (
        "ValueError: orccl: allreduce: tensor 0 is on openreg:1, but this call uses openreg:0 (the group's device "
        "since its first call: one group serves one device per process)"
    )
    assert [r["still_works"] for r in results] == [True, True]
