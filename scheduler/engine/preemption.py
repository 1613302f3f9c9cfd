"""Preemption: whom an allocated workload that does not fit may displace.

Victims, in order of preference:

1. unallocated runs: free work that promised nothing, preemptible by any allocated request;
2. preemptible allocated runs (past their minimum runtime) whose branch ranks below the
   requester's AND is over its entitlement (ratio > 1 + hysteresis) at the level where the two
   branches diverge, and every budget below that on the victim's path too: a budget within its
   entitlement is never preempted by rebalancing.

Protected runs are never victims of rebalancing. Among the sets that make the requester fit
on one host (or on whole hosts), the cheapest wins: fewest allocated GPUs lost (unallocated
first), then fewest GPUs lost, then fewest non-resumable GPUs, then the most over-used.

**Final share**: a rebalancing preemption between two sibling branches is allowed only while
the requester's branch, after the transfer, stays at or below the victim's (Kueue's
``LessThanOrEqualToFinalShare``) or within its own entitlement (KAI's reclaim: a branch may
always reclaim up to its share from a branch over its entitlement). Ratios are projected as GPU
shares: the GPUs a branch holds with allocated work over the GPUs it is entitled to
(``fraction x healthy GPUs``), the ratio its window usage heads to if the holdings stay. The
pass moves the holdings as it starts and preempts (``Holdings``), so one pass cannot flip a
cluster from one branch to another: it stops at the crossing.

A host held for a reservation is searched only for a requester that will be out of the way
before the reservation starts (``ends <= until``): the same rule as backfilling it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush

import numpy as np

from .fairshare import Standing, percent
from .model import Params, Run, Workload, ancestors
from .placement import Floor, choose_hosts

_ZERO = (0, 0, 0, 0.0)
_NO_INDEX = np.zeros(0, dtype=np.int64)
_UNKNOWN = object()


@dataclass(slots=True)
class Victims:
    runs: list[Run]  # to be signalled (empty: GPUs already being released suffice)
    hosts: list[str]  # where the requester will land once they are gone
    cost: tuple


class Holdings:
    """GPUs each budget node holds with allocated work, moved as a pass starts and preempts.

    Runs being released (signalled) are no longer held; GPUs claimed for a waiting workload
    are held by its budget. ``share(node)`` is held GPUs over entitled GPUs
    (``fraction x healthy GPUs``): 1 is exactly the node's share of the cluster.
    """

    __slots__ = ("fraction", "healthy", "held", "version", "index", "_held", "_entitled")

    def __init__(self, fraction, healthy_gpus: int):
        self.fraction = fraction  # BudgetTree.fraction
        self.healthy = healthy_gpus
        self.held: dict[str, int] = {}
        self.version = 0  # counts the moves: a verdict on the holdings holds until the next
        # the same as arrays, for the nodes given an index (``node``): shares at once
        self.index: dict[str, int] = {}
        self._held = np.zeros(0, dtype=np.int64)
        self._entitled = np.zeros(0)

    def add(self, leaf: str, gpus: int) -> None:
        self.version += 1
        held, index = self.held, self.index
        for node in ancestors(leaf):
            held[node] = held.get(node, 0) + gpus
            if node in index:
                self._held[index[node]] += gpus

    def share(self, node: str, change: int = 0) -> float:
        entitled = self.fraction(node) * self.healthy
        if entitled <= 0:
            return math.inf
        return (self.held.get(node, 0) + change) / entitled

    def number_as(self, index: dict[str, int]) -> None:
        """Number the nodes as ``index`` does: a board's numbering, kept from pass to pass, so
        that lines worked out in an earlier pass read the same nodes here (``Board.lines``)."""
        held, fraction, healthy = self.held, self.fraction, self.healthy
        self.index = index
        self._held = np.array([held.get(p, 0) for p in index], dtype=np.int64)
        self._entitled = np.array([fraction(p) * healthy for p in index], dtype=float)

    def basis(self, nodes: tuple[str, ...]) -> tuple:
        """What the final-share verdicts between ``nodes`` read of the holdings: the GPUs each
        holds and the GPUs each is entitled to."""
        held, fraction = self.held, self.fraction
        return self.healthy, [held.get(p, 0) for p in nodes], [fraction(p) for p in nodes]

    def node(self, path: str) -> int:
        """The index of ``path`` in the arrays ``shares`` reads."""
        i = self.index.get(path)
        if i is None:
            i = self.index[path] = len(self.index)
            self._held = np.append(self._held, self.held.get(path, 0))
            self._entitled = np.append(self._entitled, self.fraction(path) * self.healthy)
        return i

    def shares(self, nodes: np.ndarray, change) -> np.ndarray:
        """``share`` of each node (by index) after its ``change``, at once."""
        entitled = self._entitled[nodes]
        out = np.full(len(nodes), math.inf)
        np.divide(self._held[nodes] + change, entitled, out=out, where=entitled > 0)
        return out


def breaks_final_share(mine_after, theirs_after):
    """The final-share rule, on numbers or arrays alike: the requester's branch would end above
    the victim's and above its own entitlement (1)."""
    return mine_after > np.maximum(theirs_after, 1.0) + 1e-9


@dataclass(slots=True)
class Lines:
    """For one requester budget, over the first ``judged`` pairs of a board: the pairs whose
    budget it outranks (``among``), and for each of those the branches that compete
    (``Rules.branches``) as ``Holdings`` indexes, those branches' paths once each in
    ``nodes``. At saturation most requesters outrank nobody."""

    judged: int
    among: np.ndarray
    mine: np.ndarray
    theirs: np.ndarray
    nodes: tuple[str, ...] = ()

    def extend(self, more: Lines) -> Lines:
        return Lines(self.judged + more.judged,
                     np.concatenate((self.among, more.among + self.judged)),
                     np.concatenate((self.mine, more.mine)),
                     np.concatenate((self.theirs, more.theirs)),
                     tuple(dict.fromkeys(self.nodes + more.nodes)))


@dataclass(frozen=True, slots=True)
class FinalShareBlock:
    """Why a transfer breaks the final-share rule: ``mine`` would end above ``theirs``."""

    mine: str
    theirs: str
    mine_after: float
    theirs_after: float

    def reason(self) -> str:
        return (
            f"final-share rule: {self.mine} would hold {percent(self.mine_after)} of its GPU "
            f"share, above its own share and above {self.theirs} at {percent(self.theirs_after)}"
        )


class Rules:
    """Who may displace whom in one pass: rank and over-use from the ratios at the start of
    the pass, the final-share rule from the holdings as the pass moves them."""

    __slots__ = ("standing", "_holdings", "_held", "threshold", "now", "blocked", "_verdict",
                 "_cost", "_board", "_kept", "_transfer", "_branches")

    def __init__(self, standing: Standing, params: Params, now: float,
                 holdings: Holdings | Callable[[], Holdings], kept: Board | None = None):
        self.standing = standing
        # the holdings, or how to count them: only the final-share rule reads them, and a pass
        # whose searches all find nothing again (``Board.finds_nothing``) never does
        if isinstance(holdings, Holdings):
            self._holdings, self._held = holdings, None
        else:
            self._holdings, self._held = None, holdings
        self.threshold = 1.0 + params.hysteresis
        self.now = now
        # requester id -> the last final-share block that kept a run from being its victim
        self.blocked: dict[str, FinalShareBlock] = {}
        self._verdict: dict[tuple[str, str], bool] = {}
        self._cost: dict[int, tuple] = {}
        self._board: Board | None = None
        self._kept = kept  # a board an earlier pass over the same cluster left (``Board.rebase``)
        # (competing branches, GPUs each way, GPUs each branch holds) -> the final-share
        # verdict on moving one run: the same for every run of that shape
        self._transfer: dict[tuple, FinalShareBlock | None] = {}
        self._branches: dict[tuple[str, str], tuple[str, str]] = {}  # Standing.diverge

    def board(self, floor: Floor) -> Board:
        """The per-host summary of ``floor``, brought up to date: the board kept from an
        earlier pass when it follows the same hosts, else a new one."""
        board = self._board
        if board is not None and board.floor is floor:
            board.sync()
        elif board is None and self._kept is not None and self._kept.follows(floor, self):
            board = self._board = self._kept
            board.rebase(floor, self)
        else:
            board = self._board = Board(floor, self)
        self._number()
        return board

    @property
    def holdings(self) -> Holdings:
        if self._holdings is None:
            self._holdings = self._held()
            self._number()
        return self._holdings

    def _number(self) -> None:
        """Number the holdings' nodes as the board does (``Holdings.number_as``)."""
        holdings, board = self._holdings, self._board
        if holdings is not None and board is not None and holdings.index is not board.nodes:
            holdings.number_as(board.nodes)

    @property
    def kept_board(self) -> Board | None:
        """The board to hand to the next pass over the same cluster, if any was built."""
        return self._board if self._board is not None else self._kept

    def outranks(self, requester: Workload, budget: str) -> bool:
        """Whether ``requester``'s budget ranks above ``budget`` and ``budget``'s line is over
        its entitlement: the runs of ``budget`` that ``requester`` may weigh as victims (the
        final-share rule then judges each move, and says why when it refuses one)."""
        key = (requester.budget, budget)
        verdict = self._verdict.get(key)
        if verdict is None:
            verdict = self._verdict[key] = self._outranks(requester.budget, budget)
        return verdict

    def moving(self, requester: Workload, budget: str, gpus: int) -> FinalShareBlock | None:
        """The final-share verdict on moving a run of ``gpus`` GPUs of ``budget`` to
        ``requester``. It compares only the two competing branches, so it is the same for
        every such move between them while neither branch's holdings move."""
        mine, theirs = self.branches(requester.budget, budget)
        held = self.holdings.held
        shape = (mine, requester.gpus, theirs, gpus, held.get(mine, 0), held.get(theirs, 0))
        block = self._transfer.get(shape, _UNKNOWN)
        if block is _UNKNOWN:
            block = self._transfer[shape] = self._block(requester, [(budget, gpus)])
        return block

    def branches(self, mine: str, theirs: str) -> tuple[str, str]:
        """``Standing.diverge``, remembered for the pass."""
        key = (mine, theirs)
        branches = self._branches.get(key)
        if branches is None:
            branches = self._branches[key] = self.standing.diverge(mine, theirs)
        return branches

    def movable(self, requester: Workload, lines: Lines, gpus: np.ndarray) -> np.ndarray:
        """Whether moving one run of each pair ``lines`` outranks (with ``gpus`` GPUs) alone to
        ``requester`` breaks the final-share rule: the verdicts of ``moving``, at once."""
        mine = self.holdings.shares(lines.mine, requester.gpus)
        theirs = self.holdings.shares(lines.theirs, -gpus)
        return breaks_final_share(mine, theirs)

    def lines(self, requester: Workload, budgets: list[str]) -> Lines:
        """Whether ``requester`` outranks each of ``budgets``, and for those it outranks the two
        competing branches, as ``Holdings`` indexes (the holdings are not counted for a
        requester that outranks nobody)."""
        among = [i for i, b in enumerate(budgets) if self.outranks(requester, b)]
        if not among:
            return Lines(len(budgets), _NO_INDEX, _NO_INDEX, _NO_INDEX)
        node, branches = self.holdings.node, self.branches
        pairs = [branches(requester.budget, budgets[i]) for i in among]
        return Lines(len(budgets), np.array(among, dtype=np.int64),
                     np.array([node(m) for m, _ in pairs], dtype=np.int64),
                     np.array([node(t) for _, t in pairs], dtype=np.int64),
                     tuple(dict.fromkeys(b for pair in pairs for b in pair)))

    def final_share_block(self, requester: Workload, runs: list[Run]) -> FinalShareBlock | None:
        """The first pair of sibling branches where moving ``runs``' GPUs to ``requester`` would
        leave the requester's branch above the victim's AND above its own entitlement (GPU
        shares after the transfer), or None when the transfer keeps to the final-share rule.
        Unallocated victims hold no share."""
        return self._block(requester, [(r.workload.budget, r.gpus) for r in runs
                                       if r.workload.min_runtime > 0])

    def _block(self, requester: Workload, moved: list[tuple[str, int]]) -> FinalShareBlock | None:
        if not moved:
            return None
        change: dict[str, int] = {}
        for node in ancestors(requester.budget):
            change[node] = change.get(node, 0) + requester.gpus
        for budget, gpus in moved:
            for node in ancestors(budget):
                change[node] = change.get(node, 0) - gpus
        share = self.holdings.share
        for budget, _ in moved:
            mine, theirs = self.standing.diverge(requester.budget, budget)
            a, b = share(mine, change.get(mine, 0)), share(theirs, change.get(theirs, 0))
            if breaks_final_share(a, b):
                return FinalShareBlock(mine, theirs, a, b)
        return None

    def _outranks(self, mine: str, theirs: str) -> bool:
        s = self.standing
        if s.rank_of(theirs) <= s.rank_of(mine):
            return False  # their branch ranks above mine (or it is my own budget)
        _, their_branch = s.diverge(mine, theirs)
        return s.over_from(their_branch, theirs, self.threshold)

    def cost(self, run: Run) -> tuple:
        """(allocated GPUs lost, GPUs lost, non-resumable GPUs lost, -over-use): lower is better."""
        c = self._cost.get(id(run))
        if c is None:
            g = run.placement.gpus
            allocated = run.workload.min_runtime > 0
            over = self.over_use(run.workload.budget) if allocated else 0.0
            c = (g if allocated else 0, g, 0 if run.workload.resumable else g, -over * g)
            self._cost[id(run)] = c
        return c

    def over_use(self, budget: str) -> float:
        """How over-used ``budget`` is, as victims are preferred by (an unknown budget's
        infinite ratio capped, so that sums of costs stay finite)."""
        return min(self.standing.ratio(budget), 1e9)

    def reason(self, requester: Workload, run: Run) -> str:
        head = f"preempted to make room for {requester.label} of {requester.budget}"
        if run.workload.min_runtime <= 0:
            return f"{head}: unallocated work gives way to allocated work"
        mine, theirs = self.standing.diverge(requester.budget, run.workload.budget)
        s = self.standing
        return (
            f"{head}: {theirs} at {percent(s.ratio(theirs))} of entitlement, "
            f"{mine} at {percent(s.ratio(mine))}"
        )


def _add(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


class Reach:
    """What each host could offer one requester (``Board.reach``).

    ``open``: GPUs free, being released, of unallocated runs, and of allocated candidates it
    may displace one by one: it outranks their budget and moving the run alone keeps to the
    final-share rule. ``bound``: the same with the candidates the final-share rule keeps from
    it (outranked, refused), and ``refused``: whether a host has any. A host worth a close
    look has ``open`` enough; a host that only ``bound`` makes look enough is where the
    requester learns why it may not preempt (``Rules.blocked``).

    It holds while the lines it was worked out on and what they read of the holdings stay the
    same (``holds``), in this pass or a later one, and catches up with the rows the board
    remakes when it is read again (``catch_up``).
    """

    __slots__ = ("requester", "allowed", "kept", "allows", "keeps", "open", "bound", "refused",
                 "lines", "holdings", "version", "basis", "synced")

    def __init__(self, board: Board, requester: Workload | None = None,
                 lines: Lines | None = None):
        """Without a requester and its ``lines``: what any requester that outranks nobody, as
        most at saturation, could take, whatever the holdings (``Board.nobody``)."""
        self.requester, self.lines = requester, lines
        self.synced = board.remade_count  # the board's rows remade when this reach read them
        self.allowed = self.kept = None
        self.allows = self.keeps = False
        if lines is not None:
            holdings = board.rules.holdings
            self.holdings, self.version = holdings, holdings.version
            self.basis = holdings.basis(lines.nodes)
            among = lines.among
            slots = lines.judged + 1  # one more, False, for the slot id -1 (no candidate)
            breaks = board.rules.movable(requester, lines, board.pair_gpus[among])
            self.allowed = np.zeros(slots, dtype=bool)
            self.allowed[among[~breaks]] = True
            self.kept = np.zeros(slots, dtype=bool)
            self.kept[among[breaks]] = True
            self.allows, self.keeps = not breaks.all(), bool(breaks.any())
        # a requester that may displace no allocated run reads the board's own row: what is
        # free, being released or unallocated
        self.open = board.within
        if self.allows:
            self.open = self.open + np.where(self.allowed[board.pair], board.gpus, 0).sum(axis=1)
        self.bound, self.refused = self.open, board.unrefused
        if self.keeps:
            kept_here = self.kept[board.pair]
            self.bound = self.open + np.where(kept_here, board.gpus, 0).sum(axis=1)
            self.refused = kept_here.any(axis=1)

    def holds(self, lines: Lines, holdings: Holdings) -> bool:
        """Whether this reach still tells what its requester's budget and size may take, by
        ``lines`` and ``holdings``: the final-share verdicts read only the GPUs the branches of
        the lines hold and are entitled to."""
        if lines is not self.lines:
            return False
        if holdings is self.holdings and holdings.version == self.version:
            return True
        if holdings.basis(lines.nodes) != self.basis:
            return False
        self.holdings, self.version = holdings, holdings.version
        return True

    def catch_up(self, board: Board) -> bool:
        """Bring the entries of the rows the board remade since this reach last read it up to
        date, at once (a row read from the board itself already is); False when the board
        has let go of the list of those rows."""
        since = self.synced - board.remade_before
        if since < 0:
            return False
        self.synced = board.remade_count
        if since == len(board.remade) or not (self.allows or self.keeps):
            return True
        rows = np.array(board.remade[since:], dtype=np.int64)
        ids, gpus = board.pair[rows], board.gpus[rows]
        if self.allows:
            self.open[rows] = board.within[rows] + np.where(self.allowed[ids], gpus, 0).sum(axis=1)
        if self.keeps:
            kept = self.kept[ids]
            self.bound[rows] = self.open[rows] + np.where(kept, gpus, 0).sum(axis=1)
            self.refused[rows] = kept.any(axis=1)
        return True

    def takes(self, run: Run, board: Board) -> bool:
        """Whether the requester may displace ``run``, a candidate (``Board.options_at``: not
        protected): unallocated work gives way to any allocated request, allocated work only
        to one that outranks it within the final-share rule."""
        if run.workload.min_runtime <= 0:
            return True
        return self.allows and bool(self.allowed[board.pair_id[(run.workload.budget, run.gpus)]])

    def first_refusal(self, options: list[tuple[tuple, int, Run]], board: Board
                      ) -> FinalShareBlock | None:
        """The block of the first of ``options`` the final-share rule keeps from the requester."""
        if not self.keeps:
            return None
        for _, _, run in options:
            pair = (run.workload.budget, run.gpus)
            if run.workload.min_runtime > 0 and self.kept[board.pair_id[pair]]:
                return board.rules.moving(self.requester, *pair)
        return None

    def last_refusal(self, options: list[tuple[tuple, int, Run]], board: Board
                     ) -> FinalShareBlock | None:
        return self.first_refusal(options[::-1], board)


class Board:
    """What preemption could free on each host, as numpy rows kept in step with the floor.

    Per host: ``base`` GPUs free or already being released, ``unalloc`` GPUs of unallocated
    runs, and for each allocated run that someone could displace (preemptible, budget
    over-used) its GPUs there and the id of its (budget, GPUs of the run) pair. Whether a
    requester may displace such a run depends only on that pair (``Rules.movable``), so what
    a host can offer it is one vector expression, not a loop over hosts and runs.

    A host's row depends on the floor and on which of its runs are candidates; only the
    preference among candidates (``over``, ``options_at``) reads the ratios' values. So a
    board outlives its pass (``Rules.kept_board``): the next pass over the same hosts remakes
    the rows of the hosts whose runs changed, whose rows the last pass changed, where a
    protection expired or where a budget crossed its threshold of over-use, and orders the
    candidates anew (``rebase``). What a search that found no victims read is carried along
    with it: while no row it read is remade with more to offer, the next search of its budget
    finds none either (``finds_nothing``), in this pass or the next.
    """

    def __init__(self, floor: Floor, rules: Rules):
        self.floor, self.rules = floor, rules
        # what a kept board follows: the hosts, the threshold of over-use, the clock
        self.sizes, self.threshold, self.now = floor.size, rules.threshold, rules.now
        self.hosts = list(floor.size)
        self.row = {h: i for i, h in enumerate(self.hosts)}
        n = len(self.hosts)
        sizes = [floor.size[h] for h in self.hosts]
        # host -> its candidates (run, GPUs here), and whether every run on it is one
        self.candidates: dict[str, list[tuple[Run, int]]] = {}
        self.complete: dict[str, bool] = {}
        # host -> (cost, GPUs here, run) by this pass's costs, cheapest first: made when read
        self._options: dict[str, list[tuple[tuple, int, Run]]] = {}
        # host -> the floor's lists (free, runs, releasing) its row was made from: the plan
        # replaces a host's lists when its runs change, so other lists mean another row
        self.seen: dict[str, tuple] = {}
        self.touched: set[str] = set()  # hosts whose rows follow a pass's own changes
        # budget -> whether it was over its threshold when its runs' rows were made, and the
        # hosts those runs were on
        self.verdicts: dict[str, bool] = {}
        self.budget_hosts: dict[str, set[str]] = {}
        self.protected: list[tuple[float, str]] = []  # heap of (a protection's end, its host)
        # the rows remade so far, in order, the first ``remade_before`` of them forgotten: a
        # search that found no victims finds none again while every row remade since offers
        # its requester less than it needs (``finds_nothing``)
        self.remade: list[int] = []
        self.remade_before = 0
        # (requester budget, on whole hosts) -> (GPUs, rows remade by then, rows closed to it)
        # of its smallest request of that kind that found no victims, under ``order``: who
        # outranks whom
        self.nothing: dict[tuple[str, bool], tuple[int, int, frozenset[int]]] = {}
        self.order = _order(rules)
        self.remade_then = 0  # rows remade when the last pass began: older verdicts are let go
        self.pair_id: dict[tuple[str, int], int] = {}
        self.pair_budget: list[str] = []  # by pair id
        self.pair_gpus = np.zeros(0, dtype=np.int64)
        # by requester budget, for the pairs so far, while who outranks whom stays the same
        self._lines: dict[str, Lines] = {}
        self.nodes: dict[str, int] = {}  # how the holdings number the branches lines name
        self._reaches: dict[tuple[str, int], Reach] = {}  # by requester budget and GPUs
        self.numbered = 0  # pairs when they were last numbered again (``_forget_pairs``)
        # hosts without runs keep their size free; the others' rows are made one by one
        self.size = np.array(sizes, dtype=np.int64)
        self.base = self.size.copy()  # free or being released
        self.within = self.size.copy()  # base + GPUs of unallocated runs
        self.until = np.full(n, math.inf)  # when a held host's reservation starts; inf if not
        self.held_rows: dict[int, float] = {}  # the rows of ``until`` that are not inf
        self.over: np.ndarray | None = np.zeros(n)  # ``most_over_used``
        width = max([len(r) for r in floor.runs.values()] + [1])
        self.pair = np.full((n, width), -1, dtype=np.int64)  # candidates, by pair id
        self.gpus = np.zeros((n, width), dtype=np.int64)  # their GPUs on the host
        self.unrefused = np.zeros(n, dtype=bool)  # ``Reach.refused`` of a requester refused nothing
        self.nobody = Reach(self)  # reads the rows above as they are remade
        busy = (set(self.hosts) - floor.whole) | set(floor.runs) | set(floor.releasing)
        for h in self.hosts:
            if h in busy:
                self._refresh(h)
            else:
                self.seen[h] = (floor.free[h], floor.runs.get(h), floor.releasing.get(h))
        self.touched = set(floor.dirty)
        floor.dirty.clear()

    def follows(self, floor: Floor, rules: Rules) -> bool:
        """Whether this board, left by an earlier pass, can be brought to ``floor``: the same
        hosts, the same threshold of over-use, and a clock that has not gone back (a
        protection that has expired stays expired)."""
        return (floor.size is self.sizes and rules.threshold == self.threshold
                and rules.now >= self.now)

    def rebase(self, floor: Floor, rules: Rules) -> None:
        """Bring a board an earlier pass left to this pass's ``floor`` and ``rules``."""
        self.floor, self.rules, self.now = floor, rules, rules.now
        self._options.clear()
        stale, self.touched = self.touched, set()
        self._keep_recent_verdicts(rules)
        free, runs, releasing = floor.free, floor.runs, floor.releasing
        for host, (f, r, rel) in self.seen.items():
            if free[host] is not f or runs.get(host) is not r or releasing.get(host) is not rel:
                stale.add(host)
        ratio, threshold = rules.standing.ratio, rules.threshold
        verdicts = self.verdicts
        for budget, over_used in verdicts.items():
            if (ratio(budget) > threshold) is not over_used:
                verdicts[budget] = not over_used
                stale |= self.budget_hosts[budget]
        protected, now = self.protected, rules.now
        while protected and protected[0][0] <= now:
            stale.add(heappop(protected)[1])
        for host in stale - floor.dirty:
            self._refresh(host)
        self.sync()  # hosts this pass changed already
        self._forget_pairs()
        self.over = None  # by this pass's ratios, once a search reads it (``most_over_used``)

    def _keep_recent_verdicts(self, rules: Rules) -> None:
        """Let go of the verdicts of ``finds_nothing`` made before the last pass and of the
        reaches not read since, and of the rows remade before what is left read them; under
        another order of who outranks whom, of every verdict and of the lines and reaches."""
        order = _order(rules)
        if order != self.order:
            self.order = order
            self.nothing.clear()
            self._lines.clear()
            self._reaches.clear()
        recent = self.remade_then
        self.nothing = {b: v for b, v in self.nothing.items() if v[1] >= recent}
        self._reaches = {k: r for k, r in self._reaches.items() if r.synced >= recent}
        first = min([v[1] for v in self.nothing.values()]
                    + [r.synced for r in self._reaches.values()], default=self.remade_count)
        del self.remade[:first - self.remade_before]
        self.remade_before = first
        self.remade_then = self.remade_count

    @property
    def remade_count(self) -> int:
        return self.remade_before + len(self.remade)

    def found_nothing(self, requester: Workload, ends: float) -> None:
        """Note that a search for ``requester``, out of the way by ``ends``, found no victims,
        not even runs the final-share rule would keep from it: no host open to it offers it
        enough GPUs, counting those free, being released, of unallocated runs and of the
        candidates of budgets it outranks."""
        kind = search_kind(requester.budget, requester.gpus, self.floor)
        known = self.nothing.get(kind)
        if known is None or requester.gpus <= known[0]:
            self.nothing[kind] = (requester.gpus, self.remade_count, self._closed(ends))

    def finds_nothing(self, requester: Workload, ends: float) -> bool:
        """Whether a search for ``requester``, out of the way by ``ends``, finds no victims, as
        one of its budget no larger did (``found_nothing``): the hosts open to it then offered
        too little, and a host offers the same while its row is not remade and who outranks
        whom stays the same (``order``). So only the rows remade since and those closed to
        that search and open to this one are looked at. A host offers one request on its own
        the GPUs it needs, and a request of more GPUs than any host holds every GPU of the
        host (``victims_for``)."""
        g = requester.gpus
        kind = search_kind(requester.budget, g, self.floor)
        known, whole = self.nothing.get(kind), kind[1]
        if known is None or g < known[0]:
            return False
        until, offers = self.until, self._offers  # the rows ``_closed`` gives, one at a time
        for i in set(self.remade[known[1] - self.remade_before:]) | known[2]:
            # held for a reservation that starts before this search is done, or too little
            if until[i] >= ends and offers(i, requester, whole):
                return False
        return True

    def offers(self, requester: Workload, host: str, unallocated: int) -> bool:
        """Whether ``host`` offers a search for ``requester`` the GPUs it needs there, with
        no reservation in its way, counting ``unallocated`` GPUs more of unallocated runs
        started there since the floor was made (the floor does not list them as runs): a
        search that found no victims while it did not may find some once it does."""
        return self._offers(self.row[host], requester, requester.gpus > self.floor.largest,
                            unallocated)

    def _offers(self, i: int, requester: Workload, whole: bool, unallocated: int = 0) -> bool:
        """Whether row ``i`` offers ``requester`` what it needs on one host: the GPUs it
        asks for, or every GPU of the host for a request on whole hosts (``victims_for``),
        counting GPUs free, being released, of unallocated runs, and of candidates of budgets
        it outranks."""
        size = int(self.size[i])
        need = size if whole else requester.gpus
        if size < need:
            return False
        offer = int(self.within[i]) + unallocated  # unallocated runs' GPUs are in it
        outranks = self.rules.outranks
        for run, gpus in self.candidates.get(self.hosts[i], ()):
            if run.workload.min_runtime > 0 and outranks(requester, run.workload.budget):
                offer += gpus
        return offer >= need

    def _closed(self, ends: float) -> frozenset[int]:
        """The rows of held hosts whose reservation starts before ``ends``, as ``finds_nothing``
        reads them: by ``until``, in step with the floor once a search has synced the board."""
        return frozenset([i for i, until in self.held_rows.items() if until < ends])

    def _forget_pairs(self) -> None:
        """Number again only the pairs some host still has, once pairs have been added since
        the last time: each requester's ``Lines`` and ``Reach`` are worked out per pair, and
        kept while the numbering stays."""
        if len(self.pair_budget) <= self.numbered:
            return
        used = np.flatnonzero(np.bincount(self.pair.ravel() + 1,
                                          minlength=len(self.pair_budget) + 1)[1:])
        self.numbered = len(used)
        if len(used) == len(self.pair_budget):
            return
        self._lines.clear()
        self._reaches.clear()
        renumber = np.full(len(self.pair_budget) + 1, -1, dtype=np.int64)  # -1 stays -1
        renumber[used] = np.arange(len(used))
        self.pair = renumber[self.pair]
        self.pair_budget = [self.pair_budget[i] for i in used.tolist()]
        self.pair_gpus = self.pair_gpus[used]
        pairs = zip(self.pair_budget, self.pair_gpus.tolist(), strict=True)
        self.pair_id = {pair: i for i, pair in enumerate(pairs)}

    def sync(self) -> None:
        """Remake the rows of the hosts this pass changed on its floor since the board last
        looked; the next pass remakes them from its own floor (``touched``)."""
        dirty = self.floor.dirty
        for h in dirty:
            self._refresh(h)
        self.touched |= dirty
        dirty.clear()

    def _id(self, pair: tuple[str, int]) -> int:
        i = self.pair_id.get(pair)
        if i is None:
            i = self.pair_id[pair] = len(self.pair_budget)
            self.pair_budget.append(pair[0])
            self.pair_gpus = np.append(self.pair_gpus, pair[1])
            self._reaches.clear()  # a pair they have not judged
        return i

    def lines(self, requester: Workload) -> Lines:
        """``Rules.lines`` of every pair's budget for ``requester``: fixed for the pass, so
        worked out once per requester budget and pair."""
        known = self._lines.get(requester.budget)
        if known is None:
            known = self._lines[requester.budget] = self.rules.lines(requester, self.pair_budget)
        elif known.judged < len(self.pair_budget):
            more = self.rules.lines(requester, self.pair_budget[known.judged:])
            known = self._lines[requester.budget] = known.extend(more)
        return known

    def options_at(self, host: str) -> list[tuple[tuple, int, Run]]:
        """``(cost, GPUs here, run)`` of each candidate on ``host``, cheapest first by this
        pass's costs (``Rules.cost``), ties in a stable order."""
        options = self._options.get(host)
        if options is None:
            cost = self.rules.cost
            options = [(cost(run), n, run) for run, n in self.candidates.get(host, ())]
            options.sort(key=lambda o: (o[0], o[2].workload.id, o[2].number))
            self._options[host] = options
        return options

    def emptiable_at(self, host: str) -> tuple | None:
        """The cost of every run on ``host``, or None when one is nobody's to preempt."""
        if not self.complete.get(host, True):
            return None
        total = _ZERO
        for o in self.options_at(host):
            total = _add(total, o[0])
        return total

    def _summarize(self, host: str) -> tuple[int, int, float, list[int], list[int]]:
        """Keep ``host``'s candidates, the runs anybody at all could displace (unallocated, or
        past their protection with their budget over its threshold), and what decides them.
        Return its row: GPUs free or being released, those plus unallocated runs' GPUs, the
        most over-used candidate's ratio, and the pair ids and GPUs of its allocated
        candidates."""
        floor, rules = self.floor, self.rules
        ratio, now, threshold = rules.standing.ratio, rules.now, rules.threshold
        free, here, releasing = floor.free[host], floor.runs.get(host), floor.releasing.get(host)
        self.seen[host] = (free, here, releasing)
        base = len(free) + len(releasing or ())
        unalloc, ids, gpus, over = 0, [], [], 0.0
        candidates, protected_until = [], math.inf
        for run, idx in here or ():
            if run.workload.min_runtime > 0:
                budget = run.workload.budget
                over_used = ratio(budget) > threshold
                self.verdicts[budget] = over_used
                self.budget_hosts.setdefault(budget, set()).add(host)
                if now < run.protected_until:
                    protected_until = min(protected_until, run.protected_until)
                    continue
                if not over_used:
                    continue
                ids.append(self._id((budget, run.gpus)))
                gpus.append(len(idx))
                over = max(over, rules.over_use(budget))
            else:
                unalloc += len(idx)
            candidates.append((run, len(idx)))
        if protected_until < math.inf:  # the row is made again when the first one expires
            heappush(self.protected, (protected_until, host))
        self.candidates[host] = candidates
        self.complete[host] = len(candidates) == len(here or ())
        self._options.pop(host, None)
        return base, base + unalloc, over, ids, gpus

    def _refresh(self, host: str) -> None:
        i = self.row.get(host)
        if i is None:
            return  # not available in this pass
        base, within, over, ids, gpus = self._summarize(host)
        self.base[i], self.within[i] = base, within
        if self.over is not None:
            self.over[i] = over
        until = self.until[i] = self.floor.held.get(host, math.inf)
        if until < math.inf:
            self.held_rows[i] = until
        else:
            self.held_rows.pop(i, None)
        width = self.pair.shape[1]
        if len(ids) > width:
            extra, width = len(ids) - width, len(ids)
            self.pair = np.pad(self.pair, ((0, 0), (0, extra)), constant_values=-1)
            self.gpus = np.pad(self.gpus, ((0, 0), (0, extra)))
        pad = width - len(ids)
        self.pair[i] = ids + [-1] * pad
        self.gpus[i] = gpus + [0] * pad
        self.remade.append(i)

    def most_over_used(self) -> np.ndarray:
        """Each host's most over-used candidate's ratio (``Rules.over_use``), 0 without one:
        worked out for all hosts when a pass first reads it (half the passes at saturation
        search for no victims), and kept in step with the rows after."""
        if self.over is None:
            by_pair = list(map(self.rules.over_use, self.pair_budget))
            self.over = np.array(by_pair + [0.0])[self.pair].max(axis=1)  # -1 reads 0
        return self.over

    def reach(self, requester: Workload) -> Reach:
        """What each host could offer ``requester`` (``Reach``). Kept per requester budget and
        size while it holds (``Reach.holds``), and brought up to the rows remade since it was
        last read (``Reach.catch_up``); the same for every requester that outranks nobody
        (``nobody``)."""
        lines = self.lines(requester)
        if not lines.among.size:
            return self.nobody
        key = (requester.budget, requester.gpus)
        reach = self._reaches.get(key)
        if reach is None or not (reach.holds(lines, self.rules.holdings) and reach.catch_up(self)):
            reach = self._reaches[key] = Reach(self, requester, lines)
        return reach


def search_kind(budget: str, gpus: int, floor: Floor) -> tuple[str, bool]:
    """The requests a search of ``budget`` for ``gpus`` GPUs that found nothing speaks for:
    larger ones of its budget and kind, on one host or, larger than any host, on whole hosts
    (``victims_for``), which may empty hosts too small for a request of the other kind."""
    return budget, gpus > floor.largest


def _order(rules: Rules) -> tuple:
    """Who outranks whom as ``Rules.outranks`` reads the standing: the Fair Tree order, and
    which nodes are over the threshold of over-use (a budget the tree does not know always
    is)."""
    standing = rules.standing
    return tuple(standing.position), tuple(map(rules.threshold.__lt__, standing.ratios.values()))


def _cheapest(options: list[tuple[tuple, int, Run]], need: int) -> tuple[tuple, list[Run]] | None:
    """Cheapest subset of ``(cost, gpus freed here, run)`` (sorted by cost) freeing at least
    ``need`` GPUs. A host holds a handful of runs: an exhaustive search over minimal sets,
    pruned by the best so far, is cheap."""
    best: list = [None, None]

    def search(i: int, freed: int, cost: tuple, chosen: list[Run]) -> None:
        if freed >= need:
            if best[0] is None or cost < best[0]:
                best[0], best[1] = cost, list(chosen)
            return
        if i == len(options) or (best[0] is not None and cost[:3] > best[0][:3]):
            return
        c, n, run = options[i]
        chosen.append(run)
        search(i + 1, freed + n, _add(cost, c), chosen)
        chosen.pop()
        search(i + 1, freed, cost, chosen)

    search(0, 0, _ZERO, [])
    return None if best[0] is None else (best[0], best[1])


def victims_for(
    requester: Workload, floor: Floor, rules: Rules, ends: float = math.inf
) -> Victims | None:
    """The cheapest set of runs whose departure lets ``requester`` fit, or None.

    GPUs already being released by signalled runs count as free (they are on their way) so a
    requester waiting on them triggers no further preemption. ``ends`` is when the requester
    would be out of the way (after the grace period and its run): a held host is searched only
    if its reservation starts no earlier (as for backfill); by default held hosts are left alone.
    """
    if requester.min_runtime <= 0:
        return None
    board = rules.board(floor)
    if requester.gpus <= floor.largest:
        return _on_one_host(requester, board, ends)
    return _on_whole_hosts(requester, board, ends)


def _on_one_host(requester: Workload, board: Board, ends: float) -> Victims | None:
    g, rules = requester.gpus, board.rules
    reach = board.reach(requester)
    usable = (board.size >= g) & (board.until >= ends)
    # the hosts the final-share rule alone keeps out of reach are visited too, in their turn,
    # so that the requester learns why it waits (``Rules.blocked``) wherever it would have
    # preempted but for the rule
    rows = np.flatnonzero((reach.bound >= g) & usable)
    if rows.size == 0:
        return None
    need = g - board.base[rows]
    lowest = np.maximum(0, g - board.within[rows])  # allocated GPUs it must cost at least
    # look at hosts in order of the cheapest they could possibly be (most over-used first on
    # ties) and stop once no later host can beat the best set found
    order = np.lexsort((rows, -board.most_over_used()[rows], need, lowest)).tolist()
    short = (reach.open[rows] < g).tolist()
    rows, need, lowest = rows.tolist(), need.tolist(), lowest.tolist()
    best: tuple | None = None
    refused = None  # the last host looked at where the final-share rule kept a run from it
    for j in order:
        if best is not None and best[0][:2] <= (lowest[j], need[j]):
            break  # sorted by this bound: no later host loses fewer GPUs
        host = board.hosts[rows[j]]
        if need[j] <= 0:
            found = (_ZERO, [])
        else:
            if reach.refused[rows[j]]:
                refused = host
            if short[j]:
                continue
            options = [o for o in board.options_at(host) if reach.takes(o[2], board)]
            found = _cheapest(options, need[j])
            if found is None:
                continue
        if best is None or (found[0], host) < (best[0], best[2]):
            best = (found[0], found[1], host)
    if refused is not None:
        rules.blocked[requester.id] = reach.last_refusal(board.options_at(refused), board)
    if best is None:
        return None
    return Victims(runs=best[1], hosts=[best[2]], cost=best[0])


def _on_whole_hosts(requester: Workload, board: Board, ends: float) -> Victims | None:
    floor, rules = board.floor, board.rules
    reach = board.reach(requester)
    rows = np.flatnonzero((reach.bound >= board.size) & (board.until >= ends))
    if int(board.size[rows].sum()) < requester.gpus:
        return None
    cost: dict[str, tuple] = {}
    for i in rows.tolist():
        host = board.hosts[i]
        total = board.emptiable_at(host)
        if total is None:
            continue  # a run on it is nobody's to preempt
        if reach.open[i] >= board.size[i]:
            cost[host] = total
        else:  # every run is a candidate it outranks, and the final-share rule keeps one
            rules.blocked[requester.id] = reach.first_refusal(board.options_at(host), board)
    chosen = choose_hosts(requester.gpus, cost, floor.size, floor.group, cost)
    if chosen is None:
        return None
    victims = {id(o[2]): o[2] for host in chosen for o in board.options_at(host)}
    total = _ZERO
    for run in victims.values():
        total = _add(total, rules.cost(run))
    runs_out = sorted(victims.values(), key=lambda r: (r.workload.id, r.number))
    return Victims(runs=runs_out, hosts=chosen, cost=total)
