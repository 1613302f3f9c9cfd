"""The pending queue of one cluster, kept ranked between passes (plan steps 1 and 3 in
notes/CONTENTION.md).

Allocated work is kept per budget leaf in submission order, unallocated work in one list in
submission order. Inside a leaf that order never changes (``Workload.submitted`` is the
original submission, kept on requeue), so ranking the queue for a pass is only ordering the
leaves by Fair Tree rank and laying their lists end to end: O(leaves log leaves) when the
standing changed, instead of sorting every pending workload in every pass. The leaves' lists are
made on first use: a policy that never ranks by budget pays nothing for them.

Per leaf the queue also keeps what a pass needs to tell, without looking at each workload,
that the rest of a leaf can neither start, preempt nor hold: the expected spans of its work
by size, sizes ascending (a search for fewer GPUs that found nothing spares the larger ones).
It also keeps which workloads joined since the last pass, for a strict line.

Under strict submission order (``fifo``) the queue is read lazily in that order
(``by_submission``), so a pass over a long line costs its starts, not the line; a head that
starts is stepped over rather than copied out of the line. Under FIFO with backfill
(``fifo-backfill``) it is read per size, each size in submission order (``by_size``): what may
happen to a waiting workload there depends only on its size and its span. Under static
partitions each group's work is a queue of its own (``by_group``), kept like this one.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from heapq import merge

from .fairshare import Standing
from .model import Workload
from .policies import submission_order

_Positions = dict[str, int] | None  # a standing's Fair Tree positions (None: no standing)


def span(w: Workload) -> float:
    """How long work is in the way once started, for a policy that preempts none of it: its
    expected duration, else its minimum runtime (it is preemptible from then on), else for
    ever."""
    if w.duration is not None:
        return w.duration
    return w.min_runtime if w.min_runtime > 0 else math.inf


def _line_of(w: Workload) -> str | None:
    """The line ``w`` waits in: its budget leaf when allocated, None for unallocated work."""
    return w.budget if w.min_runtime > 0 else None


class PendingQueue:
    """Pending workloads by id, iterated in the order they joined (as a driver's dict would),
    and ranked by ``ranked``. A driver keeps one across passes and tells it what joined and
    what left; ``schedule`` also accepts a plain list and ranks it once."""

    __slots__ = ("_by_id", "_line", "_line_start", "_sizes", "_size_spans", "_leaves",
                 "_unallocated", "_leaf_order", "_spans", "_joined", "taken", "_group_of",
                 "_groups", "version")

    def __init__(self, workloads: Iterable[Workload] = ()) -> None:
        self._by_id: dict[str, Workload] = {}
        # all of it in submission order, kept from the first ``by_submission`` on (strict lines)
        self._line: list[Workload] | None = None
        # where in it the line starts: a head that leaves is stepped over, not copied out of a
        # long line, until the workloads gone make half of it
        self._line_start = 0
        # size -> its work in submission order, kept from the first ``by_size`` on
        self._sizes: dict[int, list[Workload]] | None = None
        self._size_spans: dict[int, list[float]] = {}  # the ``span`` of each, in the same order
        # allocated work of each leaf in order, and the unallocated work in order, kept from
        # the first call that reads them on (a strict or size line never does)
        self._leaves: dict[str, list[Workload]] | None = None
        self._unallocated: list[Workload] = []
        # (Fair Tree positions, leaves) the last leaf order was worked out from, and that order
        self._leaf_order: tuple[_Positions, frozenset[str], list[list[str]]] | None = None
        # leaf (None: the unallocated line) -> size -> spans, sorted
        self._spans: dict[str | None, dict[int, list[float]]] = {None: {}}
        # the ids of work added (or added back) since take_joined and still here, in the order
        # they joined (a dict: what a strict line's pass lists stays in one order from run to run)
        self._joined: dict[str, None] = {}
        self.taken = 0  # calls of take_joined: a pass's memo knows whether it saw the last one
        self.version = 0  # counts the workloads added and removed: the same count, the same queue
        # budget -> group, and each group's queue, kept from the first ``by_group`` on
        self._group_of: Callable[[str], str | None] | None = None
        self._groups: dict[str | None, PendingQueue] = {}
        for w in workloads:
            self._by_id[w.id] = w
            self._joined[w.id] = None

    def _lines(self) -> dict[str, list[Workload]]:
        """The leaves' lines, made from the whole queue on first use (``add`` then keeps them
        sorted one insertion at a time): appended, then each list sorted once."""
        if self._leaves is None:
            self._leaves = {}
            for w in self._by_id.values():
                line = _line_of(w)
                if line is not None:
                    self._leaves.setdefault(line, []).append(w)
                else:
                    self._unallocated.append(w)
                self._spans.setdefault(line, {}).setdefault(w.gpus, []).append(span(w))
            for line in (self._unallocated, *self._leaves.values()):
                line.sort(key=submission_order)
            for line, sizes in self._spans.items():
                for spans in sizes.values():
                    spans.sort()
                self._spans[line] = dict(sorted(sizes.items()))
        return self._leaves

    def add(self, w: Workload) -> None:
        self._by_id[w.id] = w
        self.version += 1
        if self._group_of is not None:
            self._group(w).add(w)
        if self._line is not None:
            insort(self._line, w, lo=self._line_start, key=submission_order)
        if self._sizes is not None:
            line = self._sizes.setdefault(w.gpus, [])
            at = bisect_right(line, submission_order(w), key=submission_order)
            line.insert(at, w)
            self._size_spans.setdefault(w.gpus, []).insert(at, span(w))
        if self._leaves is not None:
            self._file(w)
        self._joined[w.id] = None

    def _file(self, w: Workload) -> None:
        """Add ``w`` to its leaf's line and spans."""
        line = _line_of(w)
        if line is not None:
            insort(self._leaves.setdefault(line, []), w, key=submission_order)
        else:
            insort(self._unallocated, w, key=submission_order)
        sizes = self._spans.setdefault(line, {})
        spans = sizes.get(w.gpus)
        if spans is None:  # a new size: the sizes stay in ascending order
            spans = sizes[w.gpus] = []
            if len(sizes) > 1 and w.gpus < max(sizes):
                self._spans[line] = dict(sorted(sizes.items()))
        insort(spans, span(w))

    def remove(self, w: Workload) -> None:
        del self._by_id[w.id]
        self.version += 1
        if self._group_of is not None:
            self._group(w).remove(w)
        line = self._line
        if line is not None:
            start = self._line_start
            at = bisect_left(line, submission_order(w), lo=start, key=submission_order)
            if at > start:
                del line[at]
            elif (start + 1) * 2 > len(line):
                del line[:start + 1]
                self._line_start = 0
            else:
                self._line_start = start + 1
        if self._sizes is not None:
            line = self._sizes[w.gpus]
            at = bisect_left(line, submission_order(w), key=submission_order)
            del line[at], self._size_spans[w.gpus][at]
            if not line:
                del self._sizes[w.gpus], self._size_spans[w.gpus]
        self._joined.pop(w.id, None)
        if self._leaves is not None:
            self._unfile(w)

    def _unfile(self, w: Workload) -> None:
        """Take ``w`` out of its leaf's line and spans."""
        leaf = _line_of(w)
        line = self._leaves[leaf] if leaf is not None else self._unallocated
        del line[bisect_left(line, submission_order(w), key=submission_order)]
        sizes = self._spans[leaf]
        spans = sizes[w.gpus]
        del spans[bisect_left(spans, span(w))]
        if not spans:
            del sizes[w.gpus]
        if not line and leaf is not None:
            del self._leaves[leaf], self._spans[leaf]

    def get(self, workload_id: str) -> Workload | None:
        return self._by_id.get(workload_id)

    def __contains__(self, workload_id: object) -> bool:
        return workload_id in self._by_id

    def __iter__(self) -> Iterator[Workload]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def allocated_budgets(self) -> int:
        """How many budgets have allocated work waiting (Fair Tree matters from two on)."""
        return len(self._lines())

    def spans(self, leaf: str | None) -> dict[int, list[float]]:
        """The waiting allocated work of ``leaf`` (None: the unallocated work): for each size,
        every ``span``, sorted."""
        self._lines()
        return self._spans[leaf]

    @property
    def unallocated(self) -> list[Workload]:
        """The unallocated work in submission order: the queue's own list, the last of
        ``segments``."""
        self._lines()
        return self._unallocated

    def take_joined(self) -> dict[str, None]:
        """The ids of work added (or added back) since the last call and still waiting."""
        joined, self._joined = self._joined, {}
        self.taken += 1
        return joined

    def by_submission(self) -> Iterator[Workload]:
        """The queue in submission order (``policies.submission_order``), lazily: a strict line
        reads it only up to its first workload that cannot start."""
        if self._line is None:
            self._line = sorted(self._by_id.values(), key=submission_order)
            self._line_start = 0
        line = self._line
        return map(line.__getitem__, range(self._line_start, len(line)))

    def by_size(self) -> dict[int, list[Workload]]:
        """The queue per size (GPUs asked), each in submission order: the queue's own lists.
        Kept from the first call on (a policy that never asks pays nothing for it)."""
        if self._sizes is None:
            self._sizes = {}
            for w in sorted(self._by_id.values(), key=submission_order):
                self._sizes.setdefault(w.gpus, []).append(w)
                self._size_spans.setdefault(w.gpus, []).append(span(w))
        return self._sizes

    def by_group(self, group_of: Callable[[str], str | None]) -> dict[str | None, PendingQueue]:
        """The queue per group of hosts (``group_of`` a budget's group, None for none), each a
        queue of its own that a pass may keep like this one: kept from the first call on, and
        for as long as the same ``group_of`` is asked for. A group's queue stays when it
        empties, so a pass's memo of it still follows it."""
        if self._group_of is None or group_of != self._group_of:
            self._group_of, self._groups = group_of, {}
            for w in self._by_id.values():
                self._group(w).add(w)
        return self._groups

    def _group(self, w: Workload) -> PendingQueue:
        group = self._group_of(w.budget)
        queue = self._groups.get(group)
        if queue is None:
            queue = self._groups[group] = PendingQueue()
        return queue

    def spans_of_size(self, gpus: int) -> list[float]:
        """The ``span`` of each workload of ``by_size()[gpus]``, in the same order."""
        return self._size_spans[gpus]

    def ranked(self, standing: Standing | None) -> list[Workload]:
        """The queue in the order a fair-share pass walks it: exactly
        ``sorted(self, key=fairshare.order_key(standing))``."""
        order: list[Workload] = []
        for _, line in self.segments(standing):
            order.extend(line)
        return order

    def segments(self, standing: Standing | None) -> list[tuple[str | None, list[Workload]]]:
        """``ranked`` in pieces: ``(leaf, its work)`` for a leaf alone at its rank, ``(None,
        work)`` for budgets tied at one rank (unknown to the tree, or no standing), merged by
        submission, and last ``(None, unallocated work)``. The lists are the queue's own."""
        out: list[tuple[str | None, list[Workload]]] = []
        leaves = self._lines()
        for tied in self._ranked_leaves(standing):
            if len(tied) == 1:
                out.append((tied[0], leaves[tied[0]]))
            else:
                lines = (leaves[leaf] for leaf in tied)
                out.append((None, list(merge(*lines, key=submission_order))))
        out.append((None, self._unallocated))
        return out

    def _ranked_leaves(self, standing: Standing | None) -> list[list[str]]:
        """The leaves with allocated work waiting, by Fair Tree rank, those of one rank grouped.
        Worked out again only when the standing's order or the set of waiting leaves changed."""
        position = standing.position if standing is not None else None
        leaves = self._lines().keys()
        cached = self._leaf_order
        if cached is not None and cached[0] == position and cached[1] == leaves:
            return cached[2]
        rank_of = standing.rank_of if standing is not None else (lambda leaf: 0)
        groups: dict[int, list[str]] = {}
        for leaf in leaves:
            groups.setdefault(rank_of(leaf), []).append(leaf)
        order = [groups[r] for r in sorted(groups)]
        self._leaf_order = (position, frozenset(leaves), order)
        return order
