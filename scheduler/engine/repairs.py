"""The repair figure (DESIGN.md, "Hosts, drain and repair"): the share of repairs that needed
a human, one definition for the hosts page, the dashboard, ``/metrics`` and the simulator.

A repair is one that brought a host back into service in the period: an automatic repair that
passed its health check, or a human's (after an escalation, or by hand). A human repair is one
that needed a person. The baseline is a fleet without automatic repair, where every failure
needs a human: it makes as many human repairs as there were repairs, so the automation saves
``1 - human / repairs`` of them ("N% fewer human repairs").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RepairFigure:
    repairs: int  # repairs that brought a host back in the period
    human: int  # of them, those that needed a human

    @property
    def share(self) -> float | None:
        """Human repairs / all repairs; None when nothing was repaired."""
        return self.human / self.repairs if self.repairs else None

    @property
    def baseline_human(self) -> int:
        """Human repairs when every failure needs a human: every repair is one."""
        return self.repairs

    @property
    def fewer_human(self) -> float | None:
        """How many fewer human repairs than the baseline, as a fraction of it."""
        return 1.0 - self.human / self.baseline_human if self.baseline_human else None

    def as_dict(self) -> dict:
        return {"repairs": self.repairs, "needed_human": self.human, "share": self.share,
                "baseline_human": self.baseline_human, "fewer_human": self.fewer_human}
