"""Trace readers, the public-trace conversion rule, budget trees and cluster builders.

Pure Python (no Django). Two trace formats are read:

* ``design``: DESIGN.md's CSV ``submit_time,duration,gpus,budget,user,min_runtime,resumable``
  (an optional ``job_id`` column is honoured, otherwise ids are ``j1``, ``j2``... by line);
* ``public``: the schema of the public traces shipped in ``data/traces/`` (``job_id,submit_s,
  duration_s,num_gpus,group,user,job_class``). Those traces predate budgets and contracts, so a
  :class:`ConversionRule` (seeded, printed with every result) supplies what they lack.

A path ending in ``.gz`` is read through gzip: the shipped traces stay compressed on disk.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .contract import DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME, is_debug
from .spreadsheet import cell_value, csv_writer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRACES_DIR = PROJECT_ROOT / "data" / "traces"  # the public traces, gzipped (see its README)
PHILLY_TRACE = TRACES_DIR / "philly_vc.csv.gz"
PHILLY_SIZES = TRACES_DIR / "philly_vc_sizes.csv.gz"
CHRONUS_MIX = TRACES_DIR / "chronus_philly_mix1.csv.gz"
# Helios's Philly simulation window, 2017-10-01 00:00 to 2017-11-30 23:59, in philly_vc.csv's
# seconds: from its first job on or after October 1 (--start), 61 days less a minute, end
# included (--end is exclusive). data/traces/README.md says how the dates were placed.
PHILLY_OCT_NOV_2017 = (2_295_004.0, 2_295_004.0 + 61 * 86400 - 60 + 1)

DESIGN_COLUMNS = ("submit_time", "duration", "gpus", "budget", "user", "min_runtime", "resumable")
PUBLIC_COLUMNS = ("job_id", "submit_s", "duration_s", "num_gpus", "group", "user", "job_class")


class TraceError(ValueError):
    """Bad input (trace, tree or cluster spec): the CLI prints it as one line and exits 2."""


@dataclass(slots=True)
class TraceJob:
    """One submission, before it becomes an engine ``Workload``."""

    job_id: str
    submit_time: float
    duration: float
    gpus: int
    budget: str
    user: str
    min_runtime: float
    resumable: bool

    @property
    def allocated(self) -> bool:
        return self.min_runtime > 0


def job_class(gpus: int, min_runtime: float) -> str:
    if min_runtime <= 0:
        return "unallocated"
    return "debug" if is_debug(gpus, min_runtime) else "allocated"


# --------------------------------------------------------------------------- conversion rule


def seeded_unit(seed: int, salt: str, key: str) -> float:
    """A deterministic draw in [0, 1) from (seed, salt, key); stable across processes/versions."""
    digest = hashlib.blake2b(f"{seed}:{salt}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass(slots=True)
class ConversionRule:
    """How a public trace (VC groups, no users, no contract) becomes Timeshare workloads."""

    seed: int = 0
    programs: int = 3  # VCs are spread over this many programs (seeded hash of the VC name)
    shares: str = "sizes"  # "sizes": VC nodes in philly_vc_sizes.csv; "gpu_hours": trace share
    tiny_vc_share: float = 1.0  # shares (nodes) given to VCs absent from the sizes file
    users_per_budget: int = 4  # synthetic users per VC, seeded hash of job_id
    debug_min_runtime: float = DEBUG_MAX_MIN_RUNTIME  # <= 2 GPUs and <= 15 min of work
    unallocated_fraction: float = 0.1  # seeded fraction unallocated when the trace has no class
    best_unallocated: bool = True  # job_class == "best" -> unallocated
    resumable_fraction: float = 0.8  # seeded fraction of jobs that checkpoint and can restart
    max_min_runtime: float = 8 * 3600  # the rest declare min(duration, max_min_runtime)

    def describe(self) -> str:
        return (
            f"conversion rule (seed {self.seed}): budget tree = {self.programs} programs "
            f"(prog-a..) over the VCs by seeded hash of the VC name, one project per VC, "
            f"project shares = {'VC nodes in philly_vc_sizes.csv' if self.shares == 'sizes' else 'VC share of trace GPU-hours'}"  # noqa: E501
            f"{f' (VCs not listed: {self.tiny_vc_share:g})' if self.shares == 'sizes' else ''}, "
            f"program shares = sum of its projects; users = {self.users_per_budget} synthetic "
            f"users per VC by seeded hash of job_id; debug jobs (<= {DEBUG_MAX_GPUS} GPUs, "
            f"<= {DEBUG_MAX_MIN_RUNTIME / 60:g} min of work) declare "
            f"min_runtime {self.debug_min_runtime / 60:g} min; "
            + ("'best' jobs, or " if self.best_unallocated else "")
            + f"a seeded {self.unallocated_fraction:.0%} of the others (traces without classes) "
            f"are unallocated (min_runtime 0); the rest declare min(duration, "
            f"{self.max_min_runtime / 3600:g} h); a seeded {self.resumable_fraction:.0%} "
            f"of jobs are resumable"
        )

    def as_dict(self) -> dict:
        return asdict(self)


def vc_name(group: str) -> str:
    """Normalise a Philly VC name: 'vc_6214e9' and '6214e9' are the same VC."""
    g = group.strip()
    return g[3:] if g.startswith("vc_") else g


def read_vc_sizes(path: Path | str = PHILLY_SIZES) -> dict[str, int]:
    """philly_vc_sizes.csv -> {vc: nodes} (8 GPUs per node)."""
    sizes: dict[str, int] = {}
    with open_trace(path) as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header or len(header) < 2:
            raise TraceError(f"{path}: expected columns 'vc,node num'")
        for i, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                sizes[vc_name(row[0])] = int(row[1])
            except (IndexError, ValueError):
                raise TraceError(f"{path}:{i}: bad row {row!r}") from None
    return sizes


# --------------------------------------------------------------------------------- reading


@dataclass
class Trace:
    jobs: list[TraceJob]
    shares: dict[str, float]  # {budget path: shares}, every level
    fmt: str
    source: str
    rule: ConversionRule | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"trace {self.source} ({self.fmt} format): {len(self.jobs)} workloads"]
        if self.rule is not None:
            lines.append(self.rule.describe())
        lines.extend(self.notes)
        return "\n".join(lines)


def open_trace(path: Path | str):
    """A trace or sizes CSV opened as text, through gzip when its name ends in ``.gz``."""
    try:
        if str(path).endswith(".gz"):
            return gzip.open(path, "rt", newline="", encoding="utf-8")
        return open(path, newline="", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None


def detect_format(header: list[str]) -> str:
    cols = {c.strip() for c in header}
    if set(DESIGN_COLUMNS) <= cols:
        return "design"
    if {"submit_s", "duration_s", "num_gpus", "group"} <= cols:
        return "public"
    raise TraceError(
        f"unknown trace columns {','.join(header)}: expected {','.join(DESIGN_COLUMNS)} "
        f"or {','.join(PUBLIC_COLUMNS)}"
    )


def read_trace(
    path: Path | str,
    fmt: str = "auto",
    rule: ConversionRule | None = None,
    *,
    start: float | None = None,
    end: float | None = None,
    limit: int | None = None,
    sizes: dict[str, int] | None = None,
) -> Trace:
    """Read a trace; ``start``/``end`` (seconds) slice it, ``limit`` keeps the first N jobs.

    A slice is re-based so that its first kept submission time is ``submit - start``.
    """
    with open_trace(path) as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            raise TraceError(f"{path}: empty trace")
        header = [h.strip() for h in header]
        found = detect_format(header)
        if fmt != "auto" and fmt != found:
            raise TraceError(f"{path}: --format {fmt} but the columns are the {found} format")
        idx = {c: i for i, c in enumerate(header)}
        rows = []
        for lineno, row in enumerate(reader, start=2):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            rows.append((lineno, [cell_value(cell) for cell in row]))
    lo = 0.0 if start is None else float(start)
    if found == "design":
        jobs = _design_jobs(path, rows, idx, lo, end, limit)
        shares = {}
        for leaf in sorted({j.budget for j in jobs}):
            parts = leaf.split("/")
            for k in range(1, len(parts) + 1):
                shares.setdefault("/".join(parts[:k]), 1.0)
        trace = Trace(jobs, shares, "design", str(path))
        trace.notes.append("budget tree: equal shares per node unless --tree is given")
        return trace
    rule = rule or ConversionRule()
    return _public_jobs(path, rows, idx, lo, end, limit, rule, sizes)


def _num(path, lineno, row, idx, col, conv=float):
    try:
        value = conv(row[idx[col]])
    except (IndexError, ValueError):
        raise TraceError(
            f"{path}:{lineno}: bad {col} {row[idx[col]] if idx[col] < len(row) else ''!r}"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise TraceError(f"{path}:{lineno}: {col} must be finite")
    return value


def _in_slice(t: float, lo: float, end: float | None) -> bool:
    return t >= lo and (end is None or t < end)


def _design_jobs(path, rows, idx, lo, end, limit) -> list[TraceJob]:
    jobs: list[TraceJob] = []
    has_id = "job_id" in idx
    for n, (lineno, row) in enumerate(rows, start=1):
        t = _num(path, lineno, row, idx, "submit_time")
        if not _in_slice(t, lo, end):
            continue
        duration = _num(path, lineno, row, idx, "duration")
        gpus = _num(path, lineno, row, idx, "gpus", int)
        min_rt = _num(path, lineno, row, idx, "min_runtime")
        res = row[idx["resumable"]].strip().lower() if idx["resumable"] < len(row) else ""
        if res not in ("0", "1", "true", "false"):
            raise TraceError(f"{path}:{lineno}: resumable must be 0 or 1, got {res!r}")
        budget = row[idx["budget"]].strip().strip("/")
        if not budget:
            raise TraceError(f"{path}:{lineno}: empty budget")
        if gpus < 1 or duration <= 0 or min_rt < 0 or t < 0:
            raise TraceError(
                f"{path}:{lineno}: need gpus >= 1, duration > 0, min_runtime >= 0, "
                f"submit_time >= 0"
            )
        jid = row[idx["job_id"]].strip() if has_id else f"j{n}"
        user = row[idx["user"]].strip()
        jobs.append(TraceJob(jid, t - lo, duration, gpus, budget, user, min_rt,
                             res in ("1", "true")))
        if limit is not None and len(jobs) >= limit:
            break
    jobs.sort(key=lambda j: j.submit_time)
    _check_unique(path, jobs)
    return jobs


def _check_unique(path, jobs):
    seen: set[str] = set()
    for j in jobs:
        if j.job_id in seen:
            raise TraceError(f"{path}: duplicate job_id {j.job_id!r}")
        seen.add(j.job_id)


def _public_jobs(path, rows, idx, lo, end, limit, rule: ConversionRule, sizes) -> Trace:
    raw = []
    for lineno, row in rows:
        t = _num(path, lineno, row, idx, "submit_s")
        if not _in_slice(t, lo, end):
            continue
        duration = _num(path, lineno, row, idx, "duration_s")
        gpus = _num(path, lineno, row, idx, "num_gpus", int)
        if gpus < 1 or duration <= 0 or t < 0:
            raise TraceError(f"{path}:{lineno}: need num_gpus >= 1, duration_s > 0, submit_s >= 0")
        jid = row[idx["job_id"]].strip() if "job_id" in idx else f"j{lineno - 1}"
        grp = vc_name(row[idx["group"]]) or "default"
        user = row[idx["user"]].strip() if "user" in idx and idx["user"] < len(row) else ""
        klass = (row[idx["job_class"]].strip().lower()
                 if "job_class" in idx and idx["job_class"] < len(row) else "")
        raw.append((jid, t - lo, duration, gpus, grp, user, klass))
        if limit is not None and len(raw) >= limit:
            break
    vcs = sorted({r[4] for r in raw})
    # budget tree: programs over VCs by seeded hash, one project per VC
    nprog = max(1, min(rule.programs, len(vcs) or 1))
    prog_names = [f"prog-{chr(ord('a') + i)}" if i < 26 else f"prog-{i}" for i in range(nprog)]
    if rule.shares == "sizes":
        sz = sizes if sizes is not None else (read_vc_sizes() if PHILLY_SIZES.exists() else {})
        vc_share = {vc: float(sz.get(vc, rule.tiny_vc_share)) for vc in vcs}
    elif rule.shares == "gpu_hours":
        hours: dict[str, float] = dict.fromkeys(vcs, 0.0)
        for r in raw:
            hours[r[4]] += r[2] * r[3] / 3600.0
        vc_share = {vc: max(1.0, round(h)) for vc, h in hours.items()}
    else:
        raise TraceError(f"unknown share rule {rule.shares!r}: use sizes or gpu_hours")
    # balanced seeded assignment: order VCs by a seeded draw, deal them round-robin
    order = sorted(vcs, key=lambda vc: (seeded_unit(rule.seed, "program", vc), vc))
    vc_prog = {vc: prog_names[i % nprog] for i, vc in enumerate(order)}
    shares: dict[str, float] = {}
    for vc in vcs:
        p = vc_prog[vc]
        shares[f"{p}/vc-{vc}"] = vc_share[vc]
        shares[p] = shares.get(p, 0.0) + vc_share[vc]
    jobs: list[TraceJob] = []
    seed = rule.seed
    nusers = max(1, rule.users_per_budget)
    for jid, t, duration, gpus, vc, user, klass in raw:
        budget = f"{vc_prog[vc]}/vc-{vc}"
        if not user:
            user = f"{vc}-u{int(seeded_unit(seed, 'user', jid) * nusers)}"
        if gpus <= DEBUG_MAX_GPUS and duration <= DEBUG_MAX_MIN_RUNTIME and klass != "best":
            min_rt = min(rule.debug_min_runtime, rule.max_min_runtime)
        elif (klass == "best" and rule.best_unallocated) or (
            not klass and seeded_unit(seed, "unallocated", jid) < rule.unallocated_fraction
        ):
            min_rt = 0.0
        else:
            min_rt = min(duration, rule.max_min_runtime)
        resumable = seeded_unit(seed, "resumable", jid) < rule.resumable_fraction
        jobs.append(TraceJob(jid, t, duration, gpus, budget, user, min_rt, resumable))
    jobs.sort(key=lambda j: j.submit_time)
    _check_unique(path, jobs)
    return Trace(jobs, shares, "public", str(path), rule)


def write_design_trace(path: Path | str, jobs: list[TraceJob]) -> None:
    """Write jobs in DESIGN.md's trace format (with a leading job_id column)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        w.writerow(("job_id",) + DESIGN_COLUMNS)
        for j in jobs:
            w.writerow((j.job_id, f"{j.submit_time:g}", f"{j.duration:g}", j.gpus, j.budget,
                        j.user, f"{j.min_runtime:g}", int(j.resumable)))


# ----------------------------------------------------------------------------- budget tree


def load_tree(path: Path | str) -> dict[str, float]:
    """A budget tree file, YAML or JSON: a mapping {path: shares}, e.g. {"prog-a": 70,
    "prog-a/proj-a1": 50}. Nested mappings are accepted too: {"prog-a": {"shares": 70,
    "proj-a1": 50}}."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"cannot read tree {path}: {exc.strerror or exc}") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - any parse error becomes one line
        raise TraceError(f"cannot parse tree {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data:
        raise TraceError(f"tree {path}: expected a mapping {{path: shares}}")
    shares: dict[str, float] = {}

    def walk(prefix: str, node: dict):
        for key, value in node.items():
            key = str(key).strip("/")
            if key == "shares" and prefix:
                continue
            full = f"{prefix}/{key}" if prefix else key
            if isinstance(value, dict):
                if "shares" not in value:
                    raise TraceError(f"tree {path}: node {full} has no 'shares'")
                shares[full] = _share(full, value["shares"])
                walk(full, value)
            else:
                shares[full] = _share(full, value)

    def _share(full, value):
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise TraceError(f"tree {path}: shares of {full} must be a number") from None
        if v < 0 or not math.isfinite(v):
            raise TraceError(f"tree {path}: shares of {full} must be >= 0")
        return v

    walk("", data)
    for full in list(shares):
        parts = full.split("/")
        for k in range(1, len(parts)):
            if "/".join(parts[:k]) not in shares:
                raise TraceError(f"tree {path}: {full} has no parent {'/'.join(parts[:k])}")
    return shares


def tree_fractions(shares: dict[str, float]) -> dict[str, float]:
    """Fraction of the cluster per node: product down the path of shares / sum(siblings)."""
    sums: dict[str, float] = {}
    for full, s in shares.items():
        parent = full.rpartition("/")[0]
        sums[parent] = sums.get(parent, 0.0) + s
    out: dict[str, float] = {}
    for full in sorted(shares, key=lambda x: x.count("/")):
        parent = full.rpartition("/")[0]
        base = out.get(parent, 1.0) if parent else 1.0
        tot = sums[parent]
        out[full] = base * shares[full] / tot if tot > 0 else 0.0
    return out


def leaves_of(shares: dict[str, float]) -> list[str]:
    parents = {p.rpartition("/")[0] for p in shares}
    return sorted(p for p in shares if p not in parents)


# -------------------------------------------------------------------------------- clusters


@dataclass(slots=True)
class HostSpec:
    name: str
    gpus: int
    group: str = ""


@dataclass
class ClusterSpec:
    hosts: list[HostSpec]
    failure_rate: float = 0.0  # failures per host per day (Poisson, seeded)
    repair_time: float = 4 * 3600.0  # seconds from failure back to AVAILABLE
    source: str = ""

    @property
    def total_gpus(self) -> int:
        return sum(h.gpus for h in self.hosts)

    @property
    def gpus_per_host(self) -> int:
        return max((h.gpus for h in self.hosts), default=0)

    def describe(self) -> str:
        groups = len({h.group for h in self.hosts})
        return (
            f"cluster {self.source}: {len(self.hosts)} hosts, {self.total_gpus} GPUs, "
            f"{groups} network group(s), failure rate {self.failure_rate:g}/host/day, "
            f"repair {self.repair_time / 3600:g} h"
        )


def cluster_from_sizes(path: Path | str = PHILLY_SIZES, fraction: int = 1) -> ClusterSpec:
    """The Philly cluster: per VC, its nodes of 8 GPUs; the VC is the host's network group.
    ``fraction``: each VC with 1/fraction of its nodes, rounded up (a contended cluster with
    the same partitions)."""
    hosts = []
    for vc, nodes in read_vc_sizes(path).items():
        for _ in range(-(-nodes // fraction)):
            hosts.append(HostSpec(f"h{len(hosts):04d}", 8, f"vc-{vc}"))
    if not hosts:
        raise TraceError(f"{path}: no hosts")
    return ClusterSpec(hosts, source=str(path) if fraction == 1 else f"{path} at 1/{fraction}")


_SPEC = re.compile(r"^(\d+)x(\d+)(?:/(\d+))?$")


def parse_cluster(spec: str) -> ClusterSpec:
    """``philly`` (philly_vc_sizes.csv), a sizes CSV path, or ``HOSTSxGPUS[/GROUPS]``."""
    s = spec.strip()
    if s == "philly":
        return cluster_from_sizes(PHILLY_SIZES)
    m = _SPEC.match(s)
    if m:
        n, g, groups = int(m[1]), int(m[2]), int(m[3] or 1)
        if n < 1 or g < 1 or groups < 1:
            raise TraceError(f"cluster {spec!r}: hosts, GPUs and groups must be >= 1")
        per = math.ceil(n / groups)
        hosts = [HostSpec(f"h{i:04d}", g, f"g{i // per}") for i in range(n)]
        return ClusterSpec(hosts, source=s)
    if s.endswith((".csv", ".csv.gz")):
        return cluster_from_sizes(s)
    raise TraceError(f"bad cluster {spec!r}: use philly, a sizes CSV, or HOSTSxGPUS[/GROUPS]")
