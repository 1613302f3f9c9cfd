"""The scheduling contract: allocated vs unallocated, protection, validation."""

from __future__ import annotations

import pytest
from engine_builders import HOUR, hosts, job, run

from scheduler.engine import BudgetTree, ContractError, Params, preemptible, protected, validate

TREE = BudgetTree.from_shares({"a": 1, "a/a1": 1, "broke": 0})


def test_allocated_run_is_protected_until_start_plus_min_runtime():
    r = run(job("j", min_runtime=HOUR), "h0", [0], started=100.0)
    assert protected(r, 100.0 + HOUR - 1)
    assert preemptible(r, 100.0 + HOUR)


def test_unallocated_run_is_never_protected():
    r = run(job("j", min_runtime=0), "h0", [0], started=100.0)
    assert preemptible(r, 100.0)


def test_valid_workload_passes():
    validate(job("j", "a/a1", gpus=8, min_runtime=HOUR), hosts(2), TREE, Params())


def test_min_runtime_above_cluster_maximum_is_refused():
    with pytest.raises(ContractError, match="between 0 and 8 h"):
        validate(job("j", "a/a1", min_runtime=9 * HOUR), hosts(2), TREE, Params())


def test_negative_min_runtime_is_refused():
    with pytest.raises(ContractError):
        validate(job("j", "a/a1", min_runtime=-1), hosts(2), TREE, Params())


def test_more_gpus_than_the_cluster_has_is_refused():
    with pytest.raises(ContractError, match="16 GPUs"):
        validate(job("j", "a/a1", gpus=17), hosts(2), TREE, Params())


def test_zero_gpus_is_refused():
    with pytest.raises(ContractError):
        validate(job("j", "a/a1", gpus=0), hosts(2), TREE, Params())


def test_budget_without_allocation_asking_for_allocated_time_is_refused_clearly():
    with pytest.raises(ContractError, match="broke has no allocation on this cluster"):
        validate(job("j", "broke", min_runtime=HOUR), hosts(2), TREE, Params())


def test_budget_without_allocation_may_run_unallocated_work():
    validate(job("j", "broke", min_runtime=0), hosts(2), TREE, Params())


def test_contract_error_is_a_value_error():
    assert issubclass(ContractError, ValueError)
