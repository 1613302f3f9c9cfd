"""The nouns of the scheduler: hosts, workloads, runs, the budget tree and decisions.

Everything here is plain data. The rules that act on it live in the sibling modules:
``fairshare`` (who comes first), ``contract`` (what a workload may ask for and when it may
be preempted), ``placement`` (which GPUs), ``preemption`` (whom to displace) and
``scheduling`` (one pass that puts them together).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from operator import itemgetter

ROOT = ""  # the budget tree's root (the organisation) has the empty path


class HostState(StrEnum):
    AVAILABLE = "AVAILABLE"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"
    REPAIRING = "REPAIRING"
    DOWN = "DOWN"
    ESCALATED = "ESCALATED"


@dataclass(slots=True)
class Host:
    name: str
    gpus: int
    group: str = ""  # network group (rail, leaf switch): multi-host work prefers one group
    state: HostState = HostState.AVAILABLE


_host_of, _indices_of = itemgetter(0), itemgetter(1)  # of a placement's slot, in C


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a run sits: ``((host name, (gpu index, ...)), ...)``, indices real and sorted."""

    slots: tuple[tuple[str, tuple[int, ...]], ...]
    # number of GPUs held, counted once: asked for millions of times in a contended run
    gpus: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", sum(map(len, map(_indices_of, self.slots))))

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(map(_host_of, self.slots))

    def pairs(self) -> list[tuple[str, int]]:
        """Every ``(host, gpu index)`` held: what the live loop stores with a unique constraint."""
        return [(host, index) for host, indices in self.slots for index in indices]


@dataclass(frozen=True, slots=True)
class Workload:
    id: str
    budget: str  # leaf path, e.g. "prog-a/proj-a1"
    gpus: int
    min_runtime: float  # seconds; 0 means unallocated
    resumable: bool
    submitted: float  # ORIGINAL submission time: the order inside a leaf, kept on requeue
    user: str = ""
    duration: float | None = None  # expected run time (simulator / fleet); None if unknown
    name: str = ""  # what people call it ("train-7"); reasons say "workload #42 (train-7)"

    @property
    def allocated(self) -> bool:
        return self.min_runtime > 0

    @property
    def label(self) -> str:
        """How reasons name a workload: "workload #3008 (train-7)", or "workload #3008"."""
        return f"workload #{self.id} ({self.name})" if self.name else f"workload #{self.id}"


@dataclass(slots=True, eq=False)
class Run:
    """One attempt at a workload on a placement. Identity-hashed: a run is a thing, not a value."""

    workload: Workload
    started: float
    placement: Placement
    protected_until: float
    signalled_at: float | None = None
    number: int = 1

    @property
    def allocated(self) -> bool:
        return self.workload.allocated

    @property
    def gpus(self) -> int:
        return self.placement.gpus

    def preemptible(self, now: float) -> bool:
        """Unallocated work always is; allocated work once its minimum runtime has passed."""
        return not self.workload.allocated or now >= self.protected_until

    def grace_ends(self, params: Params) -> float | None:
        """When a signalled run is stopped: after the grace period its kind of work gets."""
        if self.signalled_at is None:
            return None
        return self.signalled_at + params.grace_for(self.workload)


# ---------------------------------------------------------------------------------------------
# The budget tree


def parent_of(path: str) -> str:
    return path.rpartition("/")[0] if "/" in path else ROOT


@lru_cache(maxsize=65536)  # a few hundred budget paths, asked millions of times in a contended run
def ancestors(path: str) -> tuple[str, ...]:
    """``"a/b/c" -> ("a", "a/b", "a/b/c")``: the path from just below the root down to ``path``."""
    parts = path.split("/")
    return tuple("/".join(parts[: i + 1]) for i in range(len(parts)))


class BudgetTree:
    """Budget nodes of one cluster with their shares.

    A node's fraction of the cluster is the product down its path of
    ``shares / sum(shares of all its siblings)``: all siblings count, busy or not, so a
    program with 70 of 100 shares whose project has 50 of 100 holds 35% whatever else queues.
    """

    __slots__ = ("shares", "_children", "_fraction", "_depth", "_nodes", "_compared")

    def __init__(self, shares: dict[str, float]):
        self.shares: dict[str, float] = {}
        self._children: dict[str, list[str]] = {ROOT: []}
        for path, value in shares.items():
            for node in ancestors(path):
                if node not in self.shares:
                    self.shares[node] = 0.0
                    self._children.setdefault(node, [])
                    self._children[parent_of(node)].append(node)
            self.shares[path] = float(value)
        for kids in self._children.values():
            kids.sort()
        self._fraction = {ROOT: 1.0}
        self._depth = {ROOT: 0}
        for node in self._preorder():
            kids = self._children[node]
            total = sum(self.shares[k] for k in kids)
            for k in kids:
                own = self.shares[k] / total if total > 0 else 0.0
                self._fraction[k] = self._fraction[node] * own
                self._depth[k] = self._depth[node] + 1
        self._nodes = [n for n in self._preorder() if n != ROOT]
        self._compared: tuple[list, list] | None = None

    @classmethod
    def from_shares(cls, shares: dict[str, float]) -> BudgetTree:
        return cls(shares)

    def compared(self) -> tuple[list[tuple[str, float]], list[tuple[str, float, str, float]]]:
        """What verdicts of over-use and the Fair Tree order compare (``next_crossing``), with
        the fractions they divide by: every node with a share, and such siblings pair by pair.
        Worked out on first use: only a tick plan asks, and a wide project has many pairs."""
        if self._compared is None:
            fraction = self._fraction
            entitled = [(n, fraction[n]) for n in self._nodes if fraction[n] > 0]
            rivals = []
            for parent in [ROOT, *self._nodes]:
                kids = [(k, fraction[k]) for k in self._children[parent] if fraction[k] > 0]
                for i, (a, fa) in enumerate(kids):
                    rivals += [(a, fa, b, fb) for b, fb in kids[i + 1 :]]
            self._compared = (entitled, rivals)
        return self._compared

    def _preorder(self) -> list[str]:
        out, stack = [], [ROOT]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(self._children[node]))
        return out

    @property
    def nodes(self) -> list[str]:
        """Every node except the root, in path order."""
        return list(self._nodes)

    @property
    def leaves(self) -> list[str]:
        return [n for n in self.nodes if not self._children[n]]

    def __contains__(self, path: str) -> bool:
        return path in self._fraction

    def children(self, path: str = ROOT) -> list[str]:
        return list(self._children.get(path, ()))

    def parent(self, path: str) -> str:
        return parent_of(path)

    def depth(self, path: str) -> int:
        return self._depth[path]

    def fraction(self, path: str) -> float:
        """Share of the whole cluster; 0 for a node without shares or unknown to the tree."""
        return self._fraction.get(path, 0.0)

    def fractions(self) -> dict[str, float]:
        return {n: self._fraction[n] for n in self.nodes}


def fractions(shares: dict[str, float]) -> dict[str, float]:
    """``{path: shares} -> {path: fraction of the cluster}`` for every node (the 35% rule).

    The single source of truth the budgets app uses to show "% of cluster".
    """
    return BudgetTree(shares).fractions()


# ---------------------------------------------------------------------------------------------
# Parameters and the state a pass sees


@dataclass(slots=True)
class Params:
    window: float = 7 * 86400.0
    half_life: float | None = None  # exponential decay instead of the hard window
    max_min_runtime: float = 8 * 3600.0
    hysteresis: float = 0.1  # a branch is over-used for preemption when ratio > 1 + hysteresis
    grace: float = 300.0
    policy: str = "fairshare"  # a name of ``policies.POLICIES``
    partition_policy: str = "fifo"  # the policy inside each partition under "partitions"
    # Unallocated work promised nothing, so it gets a shorter grace when preempted: the
    # difference between a debug session starting in a minute and in five (notes/SIMULATION.md,
    # "Grace for unallocated victims", for the sweep that chose it).
    unallocated_grace: float = 30.0
    # The live loop's cadence (TIMESHARE_TICK_SECONDS): while allocated work waits, a pass runs
    # at least this often, so ratios that cross a threshold as the window slides are acted on.
    pass_interval: float = 5.0

    def grace_for(self, workload: Workload) -> float:
        """Grace period of a preempted run of ``workload``: never longer than ``grace``."""
        if workload.min_runtime <= 0:
            return min(self.unallocated_grace, self.grace)
        return self.grace


@dataclass(frozen=True, slots=True)
class Claim:
    """GPUs released by a preemption, set aside for the workload whose request caused it.

    Plain data the driver keeps between passes (``Pass.claims`` in, ``ClusterState.claims``
    out): the claimant keeps them until it starts or is no longer pending; nobody else starts
    on them. ``gpus`` is ``((host, number of GPUs), ...)``; ``displaced`` the budgets of the
    allocated runs preempted for it (empty when only unallocated work made way); ``since`` when
    the claim was made (kept across passes, so reasons stay the same).
    """

    workload_id: str
    gpus: tuple[tuple[str, int], ...]
    displaced: tuple[str, ...] = ()
    since: float = 0.0

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(host for host, _ in self.gpus)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.gpus)


@dataclass(slots=True)
class ClusterState:
    now: float
    hosts: list[Host]
    running: list[Run]
    # a list, or the driver's ``pending.PendingQueue`` kept across passes (ranked without a sort)
    pending: Iterable[Workload]
    usage: dict[str, float] = field(default_factory=dict)  # leaf -> allocated GPU-s in window
    capacity: float = 0.0  # GPU-s healthy hosts could give in the (existing part of the) window
    claims: list[Claim] = field(default_factory=list)  # the previous pass's ``Pass.claims``
    # optional, driver-owned ``scheduling.EngineMemo`` reused across passes of ONE cluster:
    # lets a pass update its picture of hosts and runs by what changed instead of re-reading
    memo: object | None = None


# ---------------------------------------------------------------------------------------------
# Decisions of a pass. The driver applies them in list order.


@dataclass(slots=True)
class Start:
    workload: Workload
    placement: Placement
    reason: str


@dataclass(slots=True)
class Preempt:
    run: Run
    reason: str
    for_workload_id: str | None = None


@dataclass(slots=True)
class Stop:
    run: Run
    requeue: bool
    reason: str
    end_reason: str = "preempted"  # "preempted" | "drained"


@dataclass(slots=True)
class Hold:
    workload: Workload
    reason: str
    hosts: tuple[str, ...]
    until: float | None = None  # when the held hosts are expected to be free


@dataclass(slots=True)
class HostDrained:
    host: Host
    reason: str


Decision = Start | Preempt | Stop | Hold | HostDrained


@dataclass(frozen=True, slots=True)
class Wait:
    """Why a pending workload did not start, as data: ``blocker`` is the kind of obstacle
    ("held", "claim", "no victim", "final share", "quota", "no preemption", "unallocated",
    "behind" (a strict order's first in line cannot start), "no partition"),
    ``hosts`` the hosts it waits on, ``until`` when they are expected free (None: unknown)."""

    reason: str
    blocker: str
    hosts: tuple[str, ...] = ()
    until: float | None = None


def materially_changed(before: Wait | None, after: Wait, now: float) -> bool:
    """Whether a workload's timeline should get a new waiting event: other hosts, a different
    blocker, or an expected start moving by more than 10% of the time that was left; never
    the sentence the reader already has (the hosts of another workload's reservation, say,
    which it does not name, can move without anything new to read)."""
    if before is None:
        return True
    if before.reason == after.reason:
        return False
    if before.blocker != after.blocker or before.hosts != after.hosts:
        return True
    if (before.until is None) != (after.until is None):
        return True
    if before.until is None or after.until is None:
        return False
    left = max(before.until - now, 0.0)
    return abs(after.until - before.until) > 0.1 * left


@dataclass(slots=True)
class RestWaits:
    """The waits of the waiting workloads a pass left out of ``Pass.waits`` (FIFO with backfill
    on a kept queue, ``scheduling._Walk.run_sizes``). Nothing could happen to those, so each
    has the wait of its size, kind and budget as the walk stood where it passed them in
    submission order: the free GPUs and whether hosts were held after the last workload before
    it that the walk looked at. Drivers ask for it when they need it, as a workload leaves the
    queue: working it out for every workload in every pass is what would cost."""

    order: Callable[[Workload], tuple]  # the walk's order (``policies.submission_order``)
    marks: list[tuple]  # where the walk's standing changed, in that order
    standings: list[tuple[int, bool]]  # (free GPUs, hosts held): before the first mark, after each
    wait_as: Callable[[int, bool, str, int, bool], Wait]  # (size, unallocated, budget, standing)

    def of(self, w: Workload) -> Wait:
        free, held = self.standings[bisect_right(self.marks, self.order(w))]
        return self.wait_as(w.gpus, w.min_runtime <= 0, w.budget, free, held)


@dataclass(slots=True)
class TailWaits:
    """The waits of the waiting workloads a fair-share pass on a kept queue left out of
    ``Pass.waits``: the rest of each line the walk left once none of it could start, claim,
    preempt nor hold (``scheduling._Walk._leave``). Every workload of such a line the pass did
    not list has the wait of its size there. As with
    ``RestWaits``, drivers ask for a wait when they need it, as a workload leaves the queue: at
    saturation, naming every waiting workload in every pass is what a pass would cost most."""

    # line (a budget leaf; None for the unallocated work) -> size -> what ``wait_as`` makes the
    # wait of its workloads there from
    tails: dict[str | None, dict[int, tuple]]
    wait_as: Callable[..., Wait]

    def of(self, w: Workload) -> Wait:
        return self.wait_as(*self.tails[w.budget if w.min_runtime > 0 else None][w.gpus])


@dataclass(slots=True)
class RestWaitsByGroup:
    """``RestWaits`` of a pass of partitions: each workload has its group's."""

    group_of: Callable[[str], str | None]  # a budget's group
    groups: dict[str, RestWaits]

    def of(self, w: Workload) -> Wait:
        return self.groups[self.group_of(w.budget)].of(w)


@dataclass(slots=True)
class Pass:
    decisions: list[Decision] = field(default_factory=list)
    waits: dict[str, Wait] = field(default_factory=dict)  # why each waiting workload waits
    claims: list[Claim] = field(default_factory=list)  # to hand to the next pass
    # the queue as the pass considered it (``order``): its ids, or copies of the queue's lines
    # (``consider_in``), listed only when a driver asks: a list of every id of a long queue
    # would be what a pass that decides nothing costs most. A fair-share pass leaves it empty
    # for a driver that reads none (``EngineMemo.reads_order``: the simulator)
    _order: list[str] = field(default_factory=list)
    _lines: list[list[Workload]] | None = None
    ratios: dict[str, float] = field(default_factory=dict)  # node path -> usage / entitlement
    # a claim this pass made, started on or gave back lets the next pass decide more
    # (``opens_room``)
    claims_open_room: bool = False
    # every workload a Stop of this pass requeued would only wait in the next pass at this
    # instant (``_Walk.requeued_wait``)
    requeued_wait: bool = False
    # GPUs this pass moved between branches may have lifted a block of the final-share rule
    # that kept a workload back
    # (``_Walk.lifts_share_block``)
    lifts_share_block: bool = False
    # under a strict policy, the first workload in line that could not start (one per partition):
    # nothing behind it starts before it does, so no pass decides anything new until it fits
    heads: list[Workload] = field(default_factory=list)
    # ``waits`` leaves out waiting workloads whose wait is still the one they had after the
    # previous pass on the same kept queue (``pending.PendingQueue`` with ``EngineMemo``, plan
    # step 3 in notes/CONTENTION.md): drivers keep the reasons they have for those
    rest_unchanged: bool = False
    # strict lines walked on kept queues (``_Walk.run_line``), by line: None for a pass's one
    # line, a group's name for each partition of a pass of partitions. The wait of every
    # workload behind the line's head (``heads``); ``waits`` lists only those new behind it,
    # drivers keep one reason per line for the rest
    behind: dict[str | None, Wait] = field(default_factory=dict)
    # FIFO with backfill, or fair share, walked on a kept queue: ``waits`` lists only the
    # workloads the walk looked at, every other waiting workload has ``rest.of(workload)``
    rest: RestWaits | RestWaitsByGroup | TailWaits | None = None

    @property
    def order(self) -> list[str]:
        """The ids of the waiting workloads, in the order the pass considered them."""
        if self._lines is not None:
            self._order = [w.id for line in self._lines for w in line]
            self._lines = None
        return self._order

    @order.setter
    def order(self, ids: list[str]) -> None:
        self._order, self._lines = ids, None

    def consider_in(self, lines: Iterable[list[Workload]]) -> None:
        """``order`` is these lines end to end (copied: drivers change their queue after)."""
        self._lines = [list(line) for line in lines]

    @property
    def waiting(self) -> dict[str, str]:
        """The reasons alone, by workload id (built on demand: drivers read ``waits``)."""
        return {wid: wait.reason for wid, wait in self.waits.items()}

    def of(self, kind: type) -> list:
        return [d for d in self.decisions if isinstance(d, kind)]

    @property
    def opens_room(self) -> bool:
        """Whether a next pass could decide what this one could not. Drivers run passes at one
        instant while it holds, at most ``PASSES_PER_INSTANT`` times (the live loop's next tick
        then takes over; the simulator plans a pass at that tick). It holds when this pass

        * stopped a run and requeued its work: requeued work joins only the next pass, unless
          the walk found it would only wait there (``requeued_wait``);
        * changed a claim so that the next pass may decide more (``claims_open_room``,
          ``_Walk._claim``): gave one back where work walked before it, or another claim,
          may use its GPUs (``_Walk.gives_back_room``); gave one back, made or started on one,
          or backfilled held hosts, after a reservation that, tried again on the floor the
          pass leaves, comes out otherwise (``_Walk.reservations_move``); made one whose GPUs are
          all free already (the next pass starts on them), whose victims release more than it
          claims (work walked before it may claim the rest), one a victim without grace
          period makes way for (the next pass stops it), or one beside a claim carried from
          this very instant (the next pass takes the two in another order);
        * gave GPUs, by starts or claims, to a branch the final-share rule weighed against
          someone it kept back (``lifts_share_block``): the GPUs that branch now holds may be
          what the rule waited for;
        * signalled runs of a draining host, or drained a host: the floor and the healthy
          GPUs every share is counted against changed.

        Other decisions do not: the walk already gave every later workload the room they
        leave, a start on free GPUs makes no host free sooner, victims keep their GPUs for
        their grace period, and the ranking cannot change within an instant."""
        if self.claims_open_room or self.lifts_share_block:
            return True
        return any(isinstance(d, HostDrained)
                   or (isinstance(d, Stop) and d.requeue and not self.requeued_wait)
                   or (isinstance(d, Preempt) and d.for_workload_id is None)
                   for d in self.decisions)


# The most passes a driver runs at one instant (``Pass.opens_room``): the live loop and the
# simulator alike, so they decide the same.
PASSES_PER_INSTANT = 6
