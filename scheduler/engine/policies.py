"""Named scheduling policies (DESIGN.md, "Policies").

A policy is a few traits the pass reads: the order of the queue, whether the walk stops at the
first workload that cannot start, how many blocked workloads may hold hosts for backfill,
whether allocated work may preempt, per-budget GPU quotas, and per-group partitions of hosts.
``fairshare`` is the product; the others are the baselines the field compares against.

Ties in every order are broken by submission time, then job id (compared as text), so that the
same trace always gives the same schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter

from .model import Workload


class PolicyError(ValueError):
    """An unknown policy name (bad input: the CLI prints it as one line)."""


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    summary: str  # one line for --help and the docs
    order: str  # "fair tree" | "submission" | "shortest"
    strict: bool  # the walk stops at the first workload that cannot start
    reservations: int  # blocked workloads that may hold hosts in one pass (backfill)
    preempts: bool = False
    quota: bool = False
    partitioned: bool = False

    @property
    def line(self) -> bool:
        """A strict line in submission order: nothing starts ahead of its first workload that
        cannot, and work that joins later stands behind it."""
        return self.strict and self.order == "submission"

    @property
    def reads_clock(self) -> bool:
        """Whether time alone may change what a pass decides or says: when held hosts free
        (a reservation), when protections and grace periods end (preemption)."""
        return self.reservations > 0 or self.preempts

    @property
    def backfill_line(self) -> bool:
        """Submission order with a reservation and backfill, nothing preempted nor counted
        against a quota: what may happen to a waiting workload depends only on its size and its
        span, so a pass may read the queue per size."""
        return (self.order == "submission" and not self.strict and not self.preempts
                and not self.quota and not self.partitioned)


FAIRSHARE = Policy(
    "fairshare", "Fair Tree ranking with preemption within the minimum-runtime contract "
    "(the product)", "fair tree", strict=False, reservations=1, preempts=True)
FIFO = Policy(
    "fifo", "strict FIFO: submission order, stops at the first workload that does not fit",
    "submission", strict=True, reservations=0)
FIFO_BACKFILL = Policy(
    "fifo-backfill", "FIFO with one reservation plus backfill: the first blocked workload "
    "holds hosts, later work starts where it is out of the way in time",
    "submission", strict=False, reservations=1)
SJF = Policy(
    "sjf", "shortest job first: strict, by expected duration (a trace's real duration)",
    "shortest", strict=True, reservations=0)
QUOTA = Policy(
    "quota", "static per-budget GPU counts (its fraction of the shared pool), submission "
    "order with one reservation plus backfill, no preemption",
    "submission", strict=False, reservations=1, quota=True)
PARTITIONS = Policy(
    "partitions", "each group on its own hosts (a host's network group; a budget's last path "
    "segment names its group), strict FIFO inside each partition unless "
    "--partition-policy names another", "submission", strict=True, reservations=0,
    partitioned=True)

POLICIES = {p.name: p for p in (FAIRSHARE, FIFO, FIFO_BACKFILL, SJF, QUOTA, PARTITIONS)}
# what may run inside each partition: the policies that never preempt nor share a pool
PARTITION_POLICIES = (FIFO.name, FIFO_BACKFILL.name, SJF.name)


def policy_of(name: str) -> Policy:
    policy = POLICIES.get(name)
    if policy is None:
        raise PolicyError(f"unknown policy {name!r}: use one of {', '.join(POLICIES)}")
    return policy


# the tie-break of every order: submission time, then job id
submission_order = attrgetter("submitted", "id")


def shortest_first(w: Workload) -> tuple:
    """Shortest expected duration first; work without one goes last, in submission order."""
    known = w.duration is not None
    return (not known, w.duration if known else math.inf, w.submitted, w.id)


def queue_order(pending: list[Workload], policy: Policy) -> list[Workload]:
    """The queue for the non-fair-share policies (fair share ranks with ``fairshare``)."""
    return sorted(pending, key=shortest_first if policy.order == "shortest" else submission_order)
