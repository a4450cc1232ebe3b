#!/usr/bin/env python3
"""Draws the figures of an ocslab results folder (docs/experiments.md, "Reading the plots").

  timeline.png  one reconfiguration, one panel per host, one 1/0 step lane per signal layer
                (control span, light, firmware, carrier, the carrier's polled live bit, rdma)
                against ms since the command;
                at most 1200 px high, more than 16 hosts on pages timeline-1.png, ...
  cdf.png       per-layer latency CDFs over the ok rows of breakdown.csv
  phase.png     (a phase-workload folder: phase-steps.csv) per step, the step time split into
                compute, communication and fabric wait, one bar per phase mode (Opus Fig. 9(d))
  windows.png   (windows.csv) per mode, the CDF of the idle windows between a group's
                communication phases, the switching time as a vertical line (Opus Fig. 4)
  sweep.png     (sweep.csv) step time vs switching latency per mode, error bars over the
                repetitions, the analytical estimate dashed, native as a horizontal line; a
                link-rate sweep (its link_gbps column filled): step time vs the circuits' link
                rate per mode, native included, with the measured bandwidth in the legend
  survival.png  (survival_matrix.csv, the outages experiment) per queue-pair setting and
                planned outage length, the share of queue pairs that survived (green) or errored
                (red); each setting's predicted boundary marked between the columns
  firmware_study.png  (firmware_study.csv, a firmware sweep) firmware link-up per NIC model
                against the reconfiguration interval, the Opus figures (6 s / 3 s / ~10 s) beside

Usage: ocslab_plot.py FOLDER [--iteration N] [--format png|svg] [--describe] [--dark-dbm DBM]

Only the standard library and matplotlib (Agg): the runner calls this on hosts that have
nothing else. Exit codes: 0 ok, 1 bad command line, 2 bad or missing input (the message
names the file), 3 matplotlib is not installed.
"""

import argparse
import csv
import json
import math
import os
import re
import sys

EXIT_USAGE, EXIT_INPUT, EXIT_NO_MATPLOTLIB = 1, 2, 3

TIMELINE_COLUMNS = ["t_ns", "host", "source", "subject", "signal", "value"]
BREAKDOWN_COLUMNS = ["iteration", "host", "status", "total_ms"]
CDF_COLUMNS = ["switching_ms", "firmware_ms", "carrier_ms", "rdma_ms", "total_ms"]
# Below the control lane, top to bottom. "carrier bit": the driver's carrier bit as the carrier
# probe polls it (carrier_bit, carrier_bit_inferred), beside the kernel's announcement ("carrier").
LAYERS = ["light", "firmware", "carrier", "carrier bit", "rdma"]
COLORS = {"control": "#7f7f7f", "light": "#d62728", "firmware": "#ff7f0e", "carrier": "#2ca02c",
          "carrier bit": "#8fbc8f",
          "rdma": "#1f77b4", "total": "#000000", "switching": "#d62728"}
BEFORE_NS = 200_000_000  # an iteration's own span starts this long before its command
LEAD_MAX_NS = 50_000_000  # the drawn window starts 5% of its span, at most this, before the command
LEAD_FRACTION = 0.05
AFTER_NS = 500_000_000   # and ends this long after the last edge
NS_PER_MS = 1e6
MAX_LABELLED_EDGES = 6

# Figure sizes in pixels at 100 dpi, fixed so a test can check the PNG header.
DPI = 100
TIMELINE_WIDTH_PX = 1400
TIMELINE_TOP_PX = 88        # title, legend, the top x tick labels
TIMELINE_BOTTOM_PX = 52     # the bottom x tick labels and the axis label
TIMELINE_PANEL_PX = 40      # per host, besides its lanes
TIMELINE_LANE_PX = 46
TIMELINE_MAX_HEIGHT_PX = 1200  # fits a 1920x1200 screen: taller pages get thinner lanes
TIMELINE_PAGE_HOSTS = 16    # more hosts: timeline-1.png, timeline-2.png, ... 16 hosts a page
FAILED_LAYERS = ("carrier", "carrier bit", "rdma")  # a lane of these that goes down and ends down never came back
FAILED_COLOR = "#c44e52"
# cdf.png, windows.png, sweep.png: 1000 px wide, a 500 px plot, the legend under it (20 px a row).
PLOT_WIDTH_PX, PLOT_PX, PLOT_TOP_PX, PLOT_BOTTOM_PX, LEGEND_ROW_PX = 1000, 500, 48, 64, 20


class InputError(Exception):
    """A missing or malformed input file; the message names it."""


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def interface_of(subject):
    """`rxe_eth1/eth1@h2` -> `eth1`, as the analysis joins subjects."""
    s = subject.split("@", 1)[0]
    return s.rsplit("/", 1)[-1]


def read_csv(path, required):
    """Rows of a CSV as dicts, with the file named in every error."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(f"{path}:1: missing column(s) {', '.join(missing)} "
                             f"(header: {','.join(header) or 'empty'})")
        rows = []
        for row in reader:
            row["_line"] = reader.line_num
            rows.append(row)
        return rows, header


def parse_int(path, row, col):
    v = (row.get(col) or "").strip()
    try:
        return int(v)
    except ValueError:
        try:
            f = float(v)
        except ValueError:
            raise InputError(f"{path}:{row['_line']}: {col} is not a number: '{v}'") from None
        if not math.isfinite(f):
            raise InputError(f"{path}:{row['_line']}: {col} is not finite: '{v}'") from None
        return int(f)


def parse_float(path, row, col, allow_empty=False):
    v = (row.get(col) or "").strip()
    if v == "" and allow_empty:
        return None
    try:
        return float(v)
    except ValueError:
        raise InputError(f"{path}:{row['_line']}: {col} is not a number: '{v}'") from None


def natural_key(name):
    """h2 before h10: digit runs compare as numbers."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name) if t]


def median(values):
    """Linear interpolation between order statistics, as summary.json (numpy's default)."""
    s = sorted(values)
    if not s:
        return None
    pos = (len(s) - 1) * 0.5
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# ---------------------------------------------------------------------------------------------
# Loading


class Timeline:
    def __init__(self, path, dark_dbm):
        rows, header = read_csv(path, TIMELINE_COLUMNS)
        self.path = path
        self.has_iteration = "iteration" in header
        self.samples = []
        for r in rows:
            it = None
            if self.has_iteration and (r.get("iteration") or "").strip() != "":
                it = parse_int(path, r, "iteration")
            self.samples.append({
                "t": parse_int(path, r, "t_ns"),
                "host": r["host"], "source": r["source"], "subject": r["subject"],
                "signal": r["signal"], "value": parse_float(path, r, "value"),
                "run": r.get("run") or "", "iteration": it,
            })
        self.samples.sort(key=lambda s: s["t"])
        self.commands = [s for s in self.samples if s["source"] == "ocs" and s["signal"] == "command"]
        self.acks = [s for s in self.samples if s["source"] == "ocs" and s["signal"] == "ack"]
        self.dark_dbm = dark_dbm

    def lanes(self):
        """{host: {interface: {layer: [(t_ns, level)]}}} with the documented source preferences."""
        by_key = {}
        for s in self.samples:
            if s["host"] == "switch" or s["host"] == "":
                continue
            layer, rank, level = None, 0, None
            src, sig, v = s["source"], s["signal"], s["value"]
            if sig == "light" and src in ("emulator", "ocs_power"):
                layer, rank, level = "light", (0 if src == "emulator" else 1), 1 if v >= 0.5 else 0
            elif sig == "rx_power_dbm" and src == "rx_power":
                layer, rank, level = "light", 2, 1 if v >= self.dark_dbm else 0
            elif sig == "link" and src in ("emulator", "firmware"):
                layer, rank, level = "firmware", (0 if src == "emulator" else 1), 1 if v >= 0.5 else 0
            elif src == "carrier" and sig == "carrier":
                layer, rank, level = "carrier", 0, 1 if v >= 0.5 else 0
            elif src == "carrier" and sig in ("carrier_bit", "carrier_bit_inferred"):
                # carrier_bit_inferred 0: a flap between two polls, drawn as the down it was.
                layer, rank, level = "carrier bit", 0, 1 if v >= 0.5 else 0
            elif src == "rdma" and sig in ("stalled", "resumed"):
                # One lane per queue pair: `rxe_eth1/eth1@h3` is lane "rdma @h3" (with pairs to
                # several peers, one stalls when its circuit goes and another resumes).
                peer = s["subject"].split("@", 1)[1] if "@" in s["subject"] else ""
                layer, rank, level = "rdma @" + peer if peer else "rdma", 0, 0 if sig == "stalled" else 1
            if layer is None:
                continue
            key = (s["host"], interface_of(s["subject"]), layer)
            by_key.setdefault(key, {}).setdefault(rank, []).append((s["t"], level, s))
        out = {}
        for (host, iface, layer), ranks in by_key.items():
            best = ranks[min(ranks)]  # the preferred source only: never mix two sources in a lane
            out.setdefault(host, {}).setdefault(iface, {})[layer] = best
        return out


class Breakdown:
    def __init__(self, path):
        rows, header = read_csv(path, BREAKDOWN_COLUMNS)
        self.path = path
        self.header = header
        self.rows = rows
        for r in rows:
            r["_iteration"] = parse_int(path, r, "iteration")

    def ok_rows(self):
        return [r for r in self.rows if (r.get("status") or "").strip() == "ok"]

    def iterations(self):
        return sorted({r["_iteration"] for r in self.rows})

    def status_counts(self):
        """Rows per status (ok, failed, unaffected, incomplete, disconnected, lost, unseen), and
        per intent (move, up, dark, stay, unknown) when breakdown.csv has an `intent` column (the
        run's meta.json named its mappings)."""
        statuses, intents = {}, {}
        for r in self.rows:
            st = (r.get("status") or "").strip()
            statuses[st] = statuses.get(st, 0) + 1
            if "intent" in self.header:
                it = (r.get("intent") or "").strip()
                intents[it] = intents.get(it, 0) + 1
        return statuses, (intents if "intent" in self.header else None)

    def status_note(self):
        """The CDF's note on what it covers: the ok rows (with intents: how many are ports that
        came up from dark, measured from the command) and the rows it leaves out, by status."""
        statuses, intents = self.status_counts()
        ok = statuses.get("ok", 0)
        note = f"{ok} ok rows"
        if intents is not None:
            up = sum(1 for r in self.ok_rows() if (r.get("intent") or "").strip() == "up")
            note += f" ({up} of them newly connected)"
        left = [f"{statuses[k]} {k}" for k in ("failed", "incomplete", "lost", "unseen", "disconnected", "unaffected")
                if statuses.get(k)]
        if left:
            note += "; not plotted: " + ", ".join(left)
        return note

    def median_iteration(self):
        """The reconfiguration a reader should see first: the one whose total (the slowest ok
        host of that iteration) is the median, the lower one of two; None without ok totals."""
        totals = {}
        for r in self.ok_rows():
            v = parse_float(self.path, r, "total_ms", allow_empty=True)
            if v is None:
                continue
            it = r["_iteration"]
            totals[it] = max(totals.get(it, v), v)
        if not totals:
            return None
        ranked = sorted(totals.items(), key=lambda kv: (kv[1], kv[0]))
        return ranked[(len(ranked) - 1) // 2][0]


# ---------------------------------------------------------------------------------------------
# What to draw (computed without matplotlib, so --describe and the figure agree)


def pick_iteration(args, tl, bd):
    iterations = bd.iterations()
    if args.iteration is not None:
        if args.iteration not in iterations:
            have = ", ".join(str(i) for i in iterations) or "none"
            raise InputError(f"{bd.path}: iteration {args.iteration} not present (iterations: {have})")
        return args.iteration, "--iteration"
    med = bd.median_iteration()
    if med is not None:
        return med, "median total_ms of the ok rows"
    if 1 in iterations:
        return 1, "first (no ok row with total_ms)"
    if iterations:
        return iterations[0], "first (no ok row with total_ms)"
    raise InputError(f"{bd.path}: no rows")


def command_of(iteration, tl, bd):
    """(issue t_ns, mapping, ack t_ns or None, ack value, next issue t_ns or None)."""
    cmd = None
    if tl.has_iteration:
        cmds = [c for c in tl.commands if c["iteration"] == iteration]
        cmd = cmds[0] if cmds else None
    elif 1 <= iteration <= len(tl.commands):
        cmd = tl.commands[iteration - 1]
    rows = [r for r in bd.rows if r["_iteration"] == iteration]
    mapping = cmd["subject"] if cmd else next((r.get("mapping") for r in rows if r.get("mapping")), "")
    if cmd:
        issue = cmd["t"]
    else:
        issued = [parse_int(bd.path, r, "issued_ns") for r in rows if (r.get("issued_ns") or "").strip()]
        if not issued:
            raise InputError(f"{tl.path}: no `ocs` `command` row for iteration {iteration}, "
                             f"and {bd.path} has no issued_ns for it")
        issue = min(issued)
    later = [c["t"] for c in tl.commands if c["t"] > issue]
    nxt = later[0] if later else None
    ack = next((a for a in tl.acks if a["t"] >= issue and (nxt is None or a["t"] < nxt)), None)
    return issue, mapping, (ack["t"] if ack else None), (ack["value"] if ack else None), nxt


def plan(args, tl, bd, span=None):
    """What timeline.png shows. span: (start, end) t_ns to draw instead of the iteration's own
    (a phase-workload step around the reconfiguration, with every edge in it)."""
    iteration, why = pick_iteration(args, tl, bd)
    issue, mapping, ack_t, ack_v, nxt = command_of(iteration, tl, bd)
    it_start = issue - BEFORE_NS
    it_end = nxt - BEFORE_NS if nxt is not None else None  # the iteration's own span (docs)
    own = (it_start, it_end)
    if span is not None:
        it_start, it_end = span
    lanes = tl.lanes()

    def in_iteration(t):
        return t >= it_start and (it_end is None or t < it_end)

    hosts = {}
    last_edge = ack_t if ack_t is not None else issue
    first_edge = issue
    for host in sorted(lanes, key=natural_key):
        ifaces = lanes[host]
        host_desc = {"interfaces": {}}
        for iface in sorted(ifaces):
            layers = {}
            for layer in layer_order(ifaces[iface]):
                events = ifaces[iface].get(layer)
                if not events:
                    continue
                before = [lv for t, lv, _ in events if t < it_start]
                inside = [(t, lv, s) for t, lv, s in events if in_iteration(t)]
                if before:
                    initial = before[-1]
                elif inside:
                    initial = 1 - inside[0][1]  # first thing seen is a change from the other state
                else:
                    initial = [lv for t, lv, _ in events][-1]
                level, edges = initial, []
                for t, lv, s in inside:
                    if lv != level:
                        edge = {"t_ms": round((t - issue) / NS_PER_MS, 3), "to": lv}
                        if base_layer(layer) == "rdma" and lv == 1:
                            edge["gap_ms"] = s["value"]
                        edges.append(edge)
                        level = lv
                        last_edge = max(last_edge, t)
                        first_edge = min(first_edge, t)
                layers[layer] = {"initial": initial, "edges": edges, "source": events[0][2]["source"],
                                 "failed": never_back(layer, events, own) and level == 0}
            if layers:
                host_desc["interfaces"][iface] = layers
        if host_desc["interfaces"]:
            hosts[host] = host_desc
    if not hosts:
        raise InputError(f"{tl.path}: no light, firmware, carrier or rdma rows for any host")
    run = next((s["run"] for s in tl.samples if s["run"]), "") or \
        next((r.get("run") for r in bd.rows if r.get("run")), "") or os.path.basename(os.path.abspath(args.folder))
    end = last_edge + AFTER_NS
    # Shortly before the command (or before an edge that precedes it), not the iteration's whole
    # lead-in of flat lines.
    lead = min(LEAD_MAX_NS, int(LEAD_FRACTION * (end - issue)))
    window = (max(it_start, first_edge - lead), end) if span is None else span
    return {
        "run": run, "iteration": iteration, "chosen_by": why, "mapping": mapping,
        "issue_t_ns": issue, "ack_ms": None if ack_t is None else round((ack_t - issue) / NS_PER_MS, 3),
        "ack_ok": None if ack_v is None else ack_v >= 0.5,
        "window_ms": [round((window[0] - issue) / NS_PER_MS, 3), round((window[1] - issue) / NS_PER_MS, 3)],
        "hosts": hosts,
    }


def never_back(layer, events, own):
    """A carrier or RDMA lane that went down in the reconfiguration's own span (own: start, end
    or None) and was still down at its end, whatever part of it a phase step's window shows."""
    if base_layer(layer) not in FAILED_LAYERS:
        return False
    start, end = own
    before = [lv for t, lv, _ in events if t < start]
    inside = [lv for t, lv, _ in events if t >= start and (end is None or t < end)]
    if not inside:
        return False
    initial = before[-1:] or [1 - inside[0]]  # as plan(): the first sample seen is a change
    return inside[-1] == 0 and 1 in initial + inside


def rank_step(folder, mapping, issue):
    """The rank/op lanes of a phase-workload run for timeline.png (Opus Fig. 9(d) under the host
    lanes of Fig. 9(b, c)): every rank's ops and fabric waits in the step during which the chosen
    reconfiguration was issued, from <folder>/<run label>/timeline.csv (the switch command's
    subject is "<run label> <topo_id>"). None when the folder is not such a run."""
    label = mapping.rsplit(" ", 1)[0] if " " in mapping else ""
    path = os.path.join(folder, label, "timeline.csv")
    if not label or not os.path.isfile(path):
        return None
    rows, header = read_csv(path, TIMELINE_COLUMNS)
    if "iteration" not in header:
        return None
    samples = []
    for r in rows:
        if r["source"] != "collbench" or r["signal"] not in ("op_start", "op_end", "reconfig_wait"):
            continue
        samples.append((parse_int(path, r, "t_ns"), r["signal"], r["subject"], parse_float(path, r, "value"),
                        (r.get("iteration") or "").strip()))
    before = [s for s in samples if s[0] <= issue]
    if not before:
        return None
    step = max(before, key=lambda s: s[0])[4]
    starts, lanes = {}, {}
    for t, sig, subject, v, it in samples:
        if it != step:
            continue
        rank = subject.split("/", 1)[0]  # r<rank>/<group>/<op>#<index>
        lane = lanes.setdefault(rank, {"ops": [], "waits": []})
        if sig == "op_start":
            starts[subject] = t
        elif sig == "op_end" and subject in starts:
            parts = subject.split("/")
            lane["ops"].append({"start_ns": starts.pop(subject), "end_ns": t,
                                "group": parts[1] if len(parts) > 1 else "", "op": parts[-1]})
        elif sig == "reconfig_wait" and v > 0:
            lane["waits"].append({"start_ns": t, "end_ns": t + int(v * NS_PER_MS)})
    if not lanes:
        return None
    ends = [e["end_ns"] for l in lanes.values() for e in l["ops"] + l["waits"]]
    begins = [e["start_ns"] for l in lanes.values() for e in l["ops"] + l["waits"]]
    return {"label": label, "step": int(step) if step.isdigit() else step, "start_ns": min(begins),
            "end_ns": max(ends), "ranks": dict(sorted(lanes.items(), key=lambda kv: int(kv[0][1:]) if kv[0][1:].isdigit() else 0))}


def add_rank_lanes(p, tl, steps):
    """p (a plan over the step's span) gains the rank lanes in ms since the command and the other
    switch commands of the step."""
    issue = p["issue_t_ns"]
    ms = lambda t: round((t - issue) / NS_PER_MS, 3)  # noqa: E731
    p["step"] = {"label": steps["label"], "step": steps["step"], "ranks": {}}
    for rank, lane in steps["ranks"].items():
        p["step"]["ranks"][rank] = {
            "ops": [{"group": o["group"], "op": o["op"], "start_ms": ms(o["start_ns"]), "end_ms": ms(o["end_ns"])}
                    for o in sorted(lane["ops"], key=lambda o: o["start_ns"])],
            "waits": [{"start_ms": ms(w["start_ns"]), "end_ms": ms(w["end_ns"])}
                      for w in sorted(lane["waits"], key=lambda w: w["start_ns"])]}
    lo, hi = steps["start_ns"] - 50_000_000, steps["end_ns"] + 50_000_000
    p["step"]["commands"] = [{"t_ms": ms(c["t"]), "mapping": c["subject"]} for c in tl.commands if lo <= c["t"] <= hi]


def cdf_series(bd):
    series = []
    ok = bd.ok_rows()
    for col in CDF_COLUMNS:
        if col not in bd.header:
            continue
        vals = [v for v in (parse_float(bd.path, r, col, allow_empty=True) for r in ok) if v is not None]
        if not vals:
            continue
        series.append({"column": col, "n": len(vals), "median_ms": round(median(vals), 3),
                       "min_ms": min(vals), "max_ms": max(vals), "values": sorted(vals)})
    positive = [v for s in series for v in s["values"] if v > 0]
    log_x = bool(positive) and all(v > 0 for s in series for v in s["values"]) and \
        max(positive) / min(positive) > 100.0
    return series, log_x


# ---------------------------------------------------------------------------------------------
# Drawing


def base_layer(layer):
    """"rdma @h3" -> "rdma"."""
    return layer.split(" @", 1)[0]


def layer_order(present):
    """The layers of one interface top to bottom: LAYERS, every RDMA pair lane in peer order."""
    out = []
    for layer in LAYERS:
        out += sorted(k for k in present if base_layer(k) == layer)
    return out


def lane_list(host_desc):
    """[(label, layer, iface, lane)] top to bottom; the interface is named only when a host has
    several."""
    ifaces = host_desc["interfaces"]
    many = len(ifaces) > 1
    out = [("control", "control", None, None)]
    for iface in sorted(ifaces):
        for layer in layer_order(ifaces[iface]):
            out.append((f"{iface} {layer}" if many else layer, layer, iface, ifaces[iface][layer]))
    return out


def timeline_pages(p):
    """The hosts of each timeline page in order, TIMELINE_PAGE_HOSTS a page."""
    hosts = list(p["hosts"])
    return [hosts[i:i + TIMELINE_PAGE_HOSTS] for i in range(0, len(hosts), TIMELINE_PAGE_HOSTS)]


def page_layout(p, hosts, step):
    """(height px, lane px, lanes per panel) of one page: the margins, 40 px per panel and 46 px
    per lane, panels and lanes scaled down together where that would exceed the maximum height."""
    panels = [len(lane_list(p["hosts"][h])) for h in hosts] + ([len(step["ranks"])] if step else [])
    natural = sum(TIMELINE_PANEL_PX + TIMELINE_LANE_PX * n for n in panels)
    scale = min(1.0, (TIMELINE_MAX_HEIGHT_PX - TIMELINE_TOP_PX - TIMELINE_BOTTOM_PX) / natural)
    return round(TIMELINE_TOP_PX + TIMELINE_BOTTOM_PX + natural * scale), TIMELINE_LANE_PX * scale, panels


def lane_fonts(lane_px):
    """Font sizes (points) that fit lanes lane_px high: full size at 46 px, a floor below which
    text would no longer be readable."""
    def clamp(v, lo, hi):
        return max(lo, min(hi, v))
    return {"tick": clamp(lane_px * 0.5, 6.5, 9), "edge": clamp(lane_px * 0.42, 5.5, 7.5),
            "note": clamp(lane_px * 0.45, 6, 8), "host": clamp(lane_px * 0.75, 9, 12),
            "marker": clamp(lane_px * 0.2, 3.5, 6)}


def draw_timeline(plt, p, folder, fmt):
    """timeline.<fmt>, or with more than TIMELINE_PAGE_HOSTS hosts one page per group of hosts
    (timeline-1.<fmt>, ...; the rank panel on the last), after removing the pages of an earlier
    drawing that this one does not overwrite. Returns what each page drew."""
    pages = timeline_pages(p)
    names = [f"timeline.{fmt}"] if len(pages) == 1 else [f"timeline-{k + 1}.{fmt}" for k in range(len(pages))]
    for old in os.listdir(folder):
        if re.fullmatch(r"timeline(-\d+)?\." + fmt, old) and old not in names:
            os.remove(os.path.join(folder, old))
    return [draw_timeline_page(plt, p, hosts, os.path.join(folder, name), (k + 1, len(pages)))
            for k, (hosts, name) in enumerate(zip(pages, names))]


def draw_timeline_page(plt, p, hosts, path, page):
    step = p.get("step") if page[0] == page[1] else None
    h_px, lane_px, panels = page_layout(p, hosts, step)
    fig = plt.figure(figsize=(TIMELINE_WIDTH_PX / DPI, h_px / DPI), dpi=DPI)
    gs = fig.add_gridspec(len(panels), 1, height_ratios=[n + TIMELINE_PANEL_PX / TIMELINE_LANE_PX for n in panels],
                          left=0.1, right=0.98, top=1 - TIMELINE_TOP_PX / h_px, bottom=TIMELINE_BOTTOM_PX / h_px,
                          hspace=0.12)
    fonts = lane_fonts(lane_px)
    axes, failed = [], []
    for k, host in enumerate(hosts):
        ax = fig.add_subplot(gs[k], sharex=axes[0] if axes else None)
        axes.append(ax)
        failed += [{"host": host, "lane": lane} for lane in draw_host_panel(ax, p, host, k, fonts)]
    if step:
        axes.append(draw_rank_panel(fig.add_subplot(gs[len(hosts)], sharex=axes[0]), step))
    axes[0].set_xlim(*p["window_ms"])
    for ax in axes[:-1]:
        ax.tick_params(axis="x", labelbottom=False)
    # The time axis is labelled above the first panel as well: a page is read from the top.
    axes[0].tick_params(axis="x", top=True, labeltop=True, labelsize=9)
    axes[-1].tick_params(axis="x", labelsize=9)
    axes[-1].set_xlabel("ms since the switch command was issued  (lanes: 1 = up/light/flowing, 0 = down)")
    title = f"{p['run']}  iteration {p['iteration']}"
    if p["mapping"]:
        title += f"  \u2192 mapping {p['mapping']}"
    if step:
        title += f"  (step {step['step']} of {step['label']}: dashed lines = the step's switch commands)"
    if page[1] > 1:
        title += f"  [page {page[0]} of {page[1]}: {hosts[0]} to {hosts[-1]}]"
    fig.suptitle(title, fontsize=12, y=1 - 6 / h_px, va="top")
    legend = timeline_legend(fig, p, h_px)
    fig.align_ylabels(axes)  # host names in one column, whatever each panel's lane labels
    labels = fit_left_margin(fig, gs, axes, hosts)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [TIMELINE_WIDTH_PX, h_px], "lane_px": round(lane_px, 1), "hosts": hosts,
            "host_labels": labels, "failed_markers": failed, "legend": legend,
            "xlim_ms": [round(v, 3) for v in axes[0].get_xlim()],
            "x_tick_labels": {"top": True, "bottom": True}}


def timeline_legend(fig, p, h_px):
    """One row under the title, outside the panels: the layers' colours, the command and ack
    lines and, when a lane never came back, its marker. Returns the entries."""
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=COLORS["control"], lw=6, alpha=0.45, label="control (issue to ack)")]
    handles += [Line2D([], [], color=COLORS[layer], lw=2, label=layer) for layer in LAYERS]
    handles += [Line2D([], [], color="k", lw=0.8, ls="--", label="command"),
                Line2D([], [], color=COLORS["control"], lw=0.8, ls=":", label="ack")]
    if any(lane.get("failed") for h in p["hosts"].values() for ifc in h["interfaces"].values()
           for lane in ifc.values()):
        handles.append(Line2D([], [], color=FAILED_COLOR, marker="X", ms=8, ls="none",
                              label="never came back (still down at the window's end)"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 30 / h_px), ncol=len(handles),
               fontsize=9, frameon=False, handlelength=2.2, columnspacing=1.4)
    return [h.get_label() for h in handles]


def fit_left_margin(fig, gs, axes, hosts):
    """Moves the panels' left edge so that the widest host name and lane label starts 8 px from
    the figure's edge: names are whole however long, and short ones leave no wasted margin.
    Returns each host's label as drawn: its text, its lane labels and its box in pixels
    (x0, y0, x1, y1 from the top left)."""
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    left_px = min(ax.yaxis.get_tightbbox(renderer).x0 for ax in axes)
    gs.update(left=gs.left + (8 - left_px) / width)
    out = {}
    for host, ax in zip(hosts, axes):
        ax.yaxis.get_tightbbox(renderer)  # places the label for the moved panel
        b = ax.yaxis.label.get_window_extent(renderer)
        out[host] = {"text": ax.yaxis.label.get_text(), "lanes": [t.get_text() for t in ax.get_yticklabels()],
                     "bbox_px": [round(b.x0, 1), round(height - b.y1, 1), round(b.x1, 1), round(height - b.y0, 1)]}
    return out


def draw_host_panel(ax, p, host, k, fonts):
    """One host's lanes top to bottom; returns the labels of the lanes marked as never back."""
    x0, x1 = p["window_ms"]
    ack = p["ack_ms"]
    lanes = lane_list(p["hosts"][host])
    n = len(lanes)
    ax.set_facecolor("#f7f7f7" if k % 2 == 0 else "#eef3fa")
    ticks, labels, failed = [], [], []
    for i, (label, layer, iface, lane) in enumerate(lanes):
        base = (n - 1 - i) * 1.6
        ticks.append(base + 0.4)
        labels.append(label)
        ax.axhline(base - 0.3, color="#d0d0d0", lw=0.6, zorder=0)
        if layer == "control":
            draw_control_lane(ax, p, base, fonts)
        elif draw_signal_lane(ax, lane, layer, base, (x0, x1), fonts):
            failed.append(label)
    ax.axvline(0, color="k", lw=0.8, ls="--", zorder=1)
    for c in (p.get("step") or {}).get("commands", []):
        if c["t_ms"] != 0:
            ax.axvline(c["t_ms"], color="#999999", lw=0.8, ls="--", zorder=1)
    if ack is not None:
        ax.axvline(ack, color=COLORS["control"], lw=0.8, ls=":", zorder=1)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=fonts["tick"])
    for tick, (_, layer, _, _) in zip(ax.get_yticklabels(), lanes):
        tick.set_color(COLORS[base_layer(layer)])
    ax.set_ylim(-0.45, (n - 1) * 1.6 + 1.05)
    ifaces = sorted(p["hosts"][host]["interfaces"])
    ax.set_ylabel(host if len(ifaces) > 1 else f"{host}\n{ifaces[0]}", rotation=0, ha="right", va="center",
                  fontsize=fonts["host"], fontweight="bold", labelpad=10, color=FAILED_COLOR if failed else "black")
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#dddddd", lw=0.5)
    return failed


def draw_control_lane(ax, p, base, fonts):
    x0, x1 = p["window_ms"]
    ack = p["ack_ms"]
    end = ack if ack is not None else 0.0
    failed = p["ack_ok"] is False
    ax.fill_between([0.0, max(end, 0.0)], base, base + 0.8, step="pre",
                    color=FAILED_COLOR if failed else COLORS["control"], alpha=0.45, lw=0)
    ax.plot([0, 0], [base, base + 0.8], color="k", lw=1.2)
    txt = "issue" if ack is None else (f"issue \u2192 {'FAILED ' if failed else ''}ack {ack:.0f} ms")
    ax.text(max(end, 0.0) + (x1 - x0) * 0.004, base + 0.4, txt, va="center", fontsize=fonts["note"],
            color=FAILED_COLOR if failed else "black", fontweight="bold" if failed else "normal")


def draw_signal_lane(ax, lane, layer, base, window, fonts):
    """A 1/0 step line with its edges marked and timed; a lane that never came back is hatched
    from its last fall to the window's end and ends in a cross. Returns whether it is one."""
    x0, x1 = window
    color = COLORS[base_layer(layer)]
    xs, ys = [x0], [base + 0.8 * lane["initial"]]
    for e in lane["edges"]:
        xs.append(e["t_ms"])
        ys.append(base + 0.8 * e["to"])
    xs.append(x1)
    ys.append(ys[-1])
    ax.step(xs, ys, where="post", color=color, lw=2.0)
    # A flapping lane keeps its markers but only the first and last times are written out.
    many = len(lane["edges"]) > MAX_LABELLED_EDGES
    for j, e in enumerate(lane["edges"]):
        up = e["to"] == 1
        ax.plot([e["t_ms"]], [base + 0.8 * e["to"]], marker="^" if up else "v", color=color, ms=fonts["marker"])
        if many and 0 < j < len(lane["edges"]) - 1:
            continue
        ax.annotate(f"{e['t_ms']:+.0f}", (e["t_ms"], base + (0.8 if up else 0.0)),
                    xytext=(3, 2 if up else -2), textcoords="offset points", fontsize=fonts["edge"],
                    va="bottom" if up else "top", ha="left", color=color)
    if base_layer(layer) == "rdma":
        draw_rdma_gaps(ax, lane, base, color, fonts)
    if not lane.get("failed"):
        return False
    down = lane["edges"][-1]["t_ms"]
    ax.fill_between([down, x1], base, base + 0.8, facecolor=FAILED_COLOR + "26", edgecolor=FAILED_COLOR,
                    hatch="////", lw=0)
    ax.plot([x1], [base + 0.4], marker="X", color=FAILED_COLOR, ms=2 * fonts["marker"] + 2, clip_on=False, zorder=5)
    ax.text(x1 - (x1 - x0) * 0.008, base + 0.4, "never came back", ha="right", va="center", fontsize=fonts["note"],
            color=FAILED_COLOR, fontweight="bold",
            bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
    return True


def draw_rdma_gaps(ax, lane, base, color, fonts):
    """A double arrow over each stall-to-resume span with the gap the probe measured."""
    down = None
    for e in lane["edges"]:
        if e["to"] == 0:
            down = e["t_ms"]
        elif down is not None:
            gap = e.get("gap_ms")
            mid = base + 0.4
            ax.annotate("", xy=(e["t_ms"], mid), xytext=(down, mid),
                        arrowprops=dict(arrowstyle="<->", color=color, lw=1.0))
            label = f"RDMA gap {gap:.0f} ms" if gap is not None else f"RDMA gap {e['t_ms'] - down:.0f} ms"
            ax.text((down + e["t_ms"]) / 2, mid + 0.05, label, ha="center", va="bottom", fontsize=fonts["note"],
                    color=color, bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
            down = None


GROUP_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]


def draw_rank_panel(ax, step):
    """One lane per rank: its ops as bars coloured by group (labelled), its fabric waits in red."""
    ranks = list(step["ranks"])
    groups = sorted({o["group"] for r in step["ranks"].values() for o in r["ops"]})
    color = {g: GROUP_COLORS[i % len(GROUP_COLORS)] for i, g in enumerate(groups)}
    n = len(ranks)
    ticks = []
    for i, rank in enumerate(ranks):
        base = (n - 1 - i) * 1.6
        ticks.append(base + 0.4)
        lane = step["ranks"][rank]
        for o in lane["ops"]:
            ax.broken_barh([(o["start_ms"], max(o["end_ms"] - o["start_ms"], 0.5))], (base, 0.8),
                           facecolors=color[o["group"]], edgecolor="black", linewidth=0.3)
        for w in lane["waits"]:
            ax.broken_barh([(w["start_ms"], max(w["end_ms"] - w["start_ms"], 0.5))], (base + 0.15, 0.5),
                           facecolors="#d62728", alpha=0.8)
    for g in groups:
        ax.plot([], [], color=color[g], lw=6, label=g)
    ax.plot([], [], color="#d62728", lw=6, label="fabric wait")
    ax.legend(fontsize=7, ncol=len(groups) + 1, loc="upper right")
    ax.set_yticks(ticks)
    ax.set_yticklabels(ranks, fontsize=9)
    ax.set_ylim(-0.45, (n - 1) * 1.6 + 1.6)
    ax.set_ylabel(f"ranks\nstep {step['step']}", rotation=0, ha="right", va="center", fontsize=12,
                  fontweight="bold", labelpad=58)
    ax.axvline(0, color="k", lw=0.8, ls="--", zorder=1)
    for c in step.get("commands", []):
        if c["t_ms"] != 0:
            ax.axvline(c["t_ms"], color="#999999", lw=0.8, ls="--", zorder=1)
    ax.grid(axis="x", color="#dddddd", lw=0.5)
    ax.tick_params(axis="y", length=0)
    return ax


def figure_legend_below(plt, entries):
    """A figure whose plot is PLOT_PX high with room under its x axis for a legend of `entries`
    entries, two a row, so that the legend never covers data. Returns (fig, ax, [w, h])."""
    w = PLOT_WIDTH_PX
    below = PLOT_BOTTOM_PX + LEGEND_ROW_PX * max(1, math.ceil(entries / 2))
    h = PLOT_TOP_PX + PLOT_PX + below
    fig, ax = plt.subplots(figsize=(w / DPI, h / DPI), dpi=DPI)
    fig.subplots_adjust(left=0.08, right=0.97, top=1 - PLOT_TOP_PX / h, bottom=below / h)
    return fig, ax, [w, h]


def legend_below(fig, ax):
    """The axes' legend under the x axis label, in two columns. Returns the legend's and the
    plot's boxes in pixels (x0, y0, x1, y1 from the top left), for --describe."""
    handles, labels = ax.get_legend_handles_labels()
    h = fig.bbox.height
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 6 / h), ncol=2, fontsize=9,
                   frameon=False, columnspacing=2.0)
    renderer = fig.canvas.get_renderer()

    def box(b):
        return [round(b.x0, 1), round(h - b.y1, 1), round(b.x1, 1), round(h - b.y0, 1)]
    return {"legend_bbox_px": box(fig.legends[0].get_window_extent(renderer)) if handles else None,
            "axes_bbox_px": box(ax.get_window_extent(renderer))}


def series_styles(n):
    """n (colour, linestyle) pairs, no two colours alike: tab10 up to 10 series, tab20 up to 20,
    beyond that evenly spaced along the turbo colour map with the line style cycling as well."""
    from matplotlib import colormaps, colors
    if n <= 10:
        return [(colors.to_hex(c), "-") for c in colormaps["tab10"].colors[:n]]
    if n <= 20:
        return [(colors.to_hex(c), "-") for c in colormaps["tab20"].colors[:n]]
    turbo = colormaps["turbo"]
    return [(colors.to_hex(turbo(k / (n - 1))), ["-", "--", "-.", ":"][k % 4]) for k in range(n)]


def draw_cdf(plt, series, log_x, path, run, note=""):
    fig, ax, (w, h) = figure_legend_below(plt, len(series))
    for s in series:
        vals = s["values"]
        n = len(vals)
        xs = [vals[0]] + vals
        ys = [0.0] + [(i + 1) / n for i in range(n)]
        name = s["column"][:-3]
        ax.step(xs, ys, where="post", lw=2.0 if name == "total" else 1.6, color=COLORS.get(name),
                label=f"{s['column']}  (n={n}, median {s['median_ms']:.1f} ms)")
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency (ms)" + ("  [log scale]" if log_x else ""))
    ax.set_ylabel("fraction of reconfigurations x hosts (status ok)")
    ax.grid(True, color="#dddddd", lw=0.5, which="both")
    if not series:
        ax.text(0.5, 0.5, "no ok rows with durations in breakdown.csv", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title(f"{run}: per-layer latency CDFs" + (f"\n{note}" if note else ""),
                 fontsize=12 if not note else 10)
    legend_below(fig, ax)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return [w, h]


# ---------------------------------------------------------------------------------------------


PHASE_COLUMNS = ["mode", "step", "warmup", "step_ms", "compute_ms", "comm_ms", "wait_ms", "reconfigurations"]
PHASE_PARTS = [("compute_ms", "compute", "#7f7f7f"), ("comm_ms", "communication", "#1f77b4"),
               ("wait_ms", "fabric wait", "#d62728")]
PHASE_HATCH = {"on-demand": "", "provisioning": "//"}
PHASE_SIZE_PX = (1100, 550)


def phase_steps(folder):
    """phase-steps.csv of a phase-workload run: {mode: [row, ...]} in step order."""
    path = os.path.join(folder, "phase-steps.csv")
    rows, header = read_csv(path, PHASE_COLUMNS)
    # A sweep (or repetitions) runs each mode several times: the figure shows each mode's first
    # run (its lowest switching time, repetition 1), as the rows come in run order.
    first_run = {}
    if "switching_ms" in header and "repetition" in header:
        for row in rows:
            first_run.setdefault(row["mode"], (row["switching_ms"], row["repetition"]))
        rows = [r for r in rows if (r["switching_ms"], r["repetition"]) == first_run[r["mode"]]]
    modes = {}
    for row in rows:
        r = {"step": parse_int(path, row, "step"), "warmup": parse_int(path, row, "warmup") == 1,
             "reconfigurations": parse_int(path, row, "reconfigurations")}
        for col in ("step_ms", "compute_ms", "comm_ms", "wait_ms"):
            r[col] = parse_float(path, row, col)
        modes.setdefault(row["mode"], []).append(r)
    if not modes:
        raise InputError(f"{path}: no steps")
    for v in modes.values():
        v.sort(key=lambda r: r["step"])
    return modes


def draw_phase(plt, modes, run, path):
    """Figure 9(d) of the Opus paper in shape: per step, the step time of the slowest rank split
    into compute, communication and fabric wait, one bar per phase mode side by side."""
    names = list(modes)
    steps = sorted({r["step"] for v in modes.values() for r in v})
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(PHASE_SIZE_PX[0] / DPI, PHASE_SIZE_PX[1] / DPI), dpi=DPI)
    bars = []
    for k, mode in enumerate(names):
        by_step = {r["step"]: r for r in modes[mode]}
        xs = [s - 0.4 + width * (k + 0.5) for s in steps]
        bottom = [0.0] * len(steps)
        for col, label, color in PHASE_PARTS:
            vals = [by_step[s][col] if s in by_step else 0.0 for s in steps]
            ax.bar(xs, vals, width * 0.95, bottom=bottom, color=color, edgecolor="black", linewidth=0.5,
                   hatch=PHASE_HATCH.get(mode, "xx"), label=f"{label} ({mode})")
            bottom = [b + v for b, v in zip(bottom, vals)]
        for x, s, top in zip(xs, steps, bottom):
            if s in by_step:
                ax.annotate(f"{by_step[s]['reconfigurations']}r", (x, top), ha="center", va="bottom", fontsize=7)
        bars.append({"mode": mode, "steps": [{"step": s, "x": x, **{c: by_step[s][c] for c, _, _ in PHASE_PARTS},
                                              "step_ms": by_step[s]["step_ms"],
                                              "reconfigurations": by_step[s]["reconfigurations"],
                                              "warmup": by_step[s]["warmup"]}
                                             for s, x in zip(steps, xs) if s in by_step]})
    tops = [s["step_ms"] for b in bars for s in b["steps"]] or [1.0]
    ax.set_ylim(0, max(max(tops), 1e-3) * 1.3)  # room for the legend above the bars
    ax.set_xticks(steps)
    warm = {r["step"] for v in modes.values() for r in v if r["warmup"]}
    ax.set_xticklabels([f"{s}{' (warm-up)' if s in warm else ''}" for s in steps])
    ax.set_xlabel("training step")
    ax.set_ylabel("step time of the slowest rank (ms)")
    ax.set_title(f"{run}: step time split, " + " vs ".join(names) + " (Nr = reconfigurations)")
    ax.legend(fontsize=8, ncol=len(names), loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return bars


# ---------------------------------------------------------------------------------------------
# Phase-workload extras: windows.png (idle windows) and sweep.png (switching-latency sweep)


WINDOWS_COLUMNS = ["mode", "window_ms", "switching_ms"]
SWEEP_COLUMNS = ["mode", "switching_ms", "repetition", "steps", "step_ms", "step_ms_sd", "relative_to_native",
                 "reconfigs_per_step", "estimate_ms"]
SWEEP_NATIVE = "native"
MODE_COLORS = {"on-demand": "#d62728", "provisioning": "#1f77b4", SWEEP_NATIVE: "#000000"}
OTHER_COLORS = ["#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def mode_color(mode, k):
    return MODE_COLORS.get(mode, OTHER_COLORS[k % len(OTHER_COLORS)])


def windows_series(folder):
    """windows.csv of a phase-workload run: per mode (file order) the sorted window_ms, the
    switching time and the share of windows longer than it (hides_switch when the file has it,
    else window_ms > switching_ms, the runner's rule)."""
    path = os.path.join(folder, "windows.csv")
    rows, header = read_csv(path, WINDOWS_COLUMNS)
    modes = {}
    for row in rows:
        if row.get("kind", "group") == "phase":  # phase-to-phase rows: windows-phases.png
            continue
        v = parse_float(path, row, "window_ms")
        sw = parse_float(path, row, "switching_ms")
        hides = parse_int(path, row, "hides_switch") == 1 if "hides_switch" in header else v > sw
        m = modes.setdefault(row["mode"], {"values": [], "switching": set(), "hiding": 0})
        m["values"].append(v)
        m["switching"].add(sw)
        m["hiding"] += 1 if hides else 0
    series = []
    for mode, m in modes.items():
        vals = sorted(m["values"])
        series.append({"mode": mode, "n": len(vals), "values": vals, "switching_ms": sorted(m["switching"]),
                       "hiding_fraction": m["hiding"] / len(vals), "median_ms": round(median(vals), 3),
                       "min_ms": vals[0], "max_ms": vals[-1]})
    return series


def phase_windows_series(folder):
    """windows.csv's phase-to-phase rows (kind phase; none in a file without the column): per
    mode (file order) each window with the bytes and type of the op that starts the next phase,
    and the switching times; None when the file has no such row."""
    path = os.path.join(folder, "windows.csv")
    rows, header = read_csv(path, WINDOWS_COLUMNS)
    if "kind" not in header:
        return None
    modes = {}
    for row in rows:
        if row["kind"] != "phase":
            continue
        m = modes.setdefault(row["mode"], {"mode": row["mode"], "points": [], "switching_ms": set()})
        m["points"].append({"bytes": parse_int(path, row, "next_bytes"), "type": row["next_type"],
                            "window_ms": parse_float(path, row, "window_ms")})
        m["switching_ms"].add(parse_float(path, row, "switching_ms"))
    if not modes:
        return None
    return [{**m, "switching_ms": sorted(m["switching_ms"]), "n": len(m["points"])} for m in modes.values()]


def draw_phase_windows(plt, series, run, path):
    """Opus's Figure 4b in shape: each phase-to-phase window against the volume of the op that
    starts the next phase (log x), a marker per op type, a colour per mode, and the switching
    times as horizontal lines: windows above one could hide that reconfiguration."""
    types = sorted({p["type"] for s in series for p in s["points"]})
    markers = dict(zip(types, "osD^v<>ph*"))
    switching = sorted({sw for s in series if not is_native(s["mode"]) for sw in s["switching_ms"]})
    fig, ax, (w, h) = figure_legend_below(plt, len(series) + len(types) + (1 if switching else 0))
    drawn = []
    for s, (color, _) in zip(series, series_styles(len(series))):
        for t in types:
            pts = [p for p in s["points"] if p["type"] == t]
            if pts:
                ax.scatter([max(1, p["bytes"]) for p in pts], [p["window_ms"] for p in pts], color=color,
                           marker=markers[t], s=28, alpha=0.8)
        ax.scatter([], [], color=color, marker="o", label=f"{s['mode']} (n={s['n']})")
        drawn.append({"mode": s["mode"], "n": s["n"], "color": color})
    for t in types:
        ax.scatter([], [], color="#777777", marker=markers[t], label=f"next op: {t}")
    for k, sw in enumerate(switching):
        ax.axhline(sw, color="#555555", ls=(0, (5, 3)), lw=1.1, label="switching time" if k == 0 else None)
    ax.set_xscale("log")
    ax.set_xlabel("bytes of the op that starts the next phase  [log scale]")
    ax.set_ylabel("phase-to-phase window (ms)")
    ax.grid(True, color="#dddddd", lw=0.5, which="both")
    ax.set_title(f"{run}: windows between phases by the next op's volume", fontsize=12)
    boxes = legend_below(fig, ax)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [w, h], "switching_ms": switching, "types": types, **boxes, "series": drawn}


def is_native(mode):
    """native, or a sweep's native-r1: the run without switching."""
    return mode == SWEEP_NATIVE or mode.startswith(SWEEP_NATIVE + "-")


def draw_windows(plt, series, run, path):
    """The Opus paper's Figure 4 in shape: CDF of the idle windows between a group's
    communication phases, per mode, and the switching time as a vertical line: windows right of
    it could hide a reconfiguration. Only the switching times of the series that switch: native's
    windows.csv rows carry the lab's default, which the run never used."""
    switching = sorted({sw for s in series if not is_native(s["mode"]) for sw in s["switching_ms"]})
    fig, ax, (w, h) = figure_legend_below(plt, len(series) + (1 if switching else 0))
    positive = [v for s in series for v in s["values"] if v > 0]
    log_x = bool(positive) and all(v > 0 for s in series for v in s["values"]) and \
        max(positive) / min(positive) > 100.0
    drawn = []
    for s, (color, ls) in zip(series, series_styles(len(series))):
        vals = s["values"]
        n = len(vals)
        line, = ax.step([vals[0]] + vals, [0.0] + [(i + 1) / n for i in range(n)], where="post", lw=1.8,
                        color=color, ls=ls,
                        label=f"{s['mode']}  (n={n}, median {s['median_ms']:.1f} ms, "
                              f"{100 * s['hiding_fraction']:.0f}% > switching time)")
        drawn.append({"color": line.get_color(), "linestyle": ls})
    for k, sw in enumerate(switching):
        ax.axvline(sw, color="#555555", ls=(0, (5, 3)), lw=1.1, label="switching time" if k == 0 else None)
        ax.text(sw, 1.0, f" {sw:g} ms", transform=ax.get_xaxis_transform(), rotation=90, ha="right", va="top",
                fontsize=8, color="#555555")
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("idle window of a group's circuits between two of its phases (ms)" +
                  ("  [log scale]" if log_x else ""))
    ax.set_ylabel("fraction of windows")
    ax.grid(True, color="#dddddd", lw=0.5, which="both")
    if not series:
        ax.text(0.5, 0.5, "no windows in windows.csv", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(f"{run}: idle windows between communication phases", fontsize=12)
    boxes = legend_below(fig, ax)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [w, h], "log_x": log_x, "switching_ms": switching, **boxes,
            "series": [{**{k: s[k] for k in ("mode", "n", "median_ms", "min_ms", "max_ms", "hiding_fraction")}, **d}
                       for s, d in zip(series, drawn)]}


def mean(values):
    return sum(values) / len(values)


def error_bar(steps, sds):
    """Mean, low, high: min-max over the repetitions; with one repetition +-step_ms_sd, the spread
    of its steps."""
    m = mean(steps)
    if len(steps) > 1:
        return m, min(steps), max(steps)
    return m, m - sds[0], m + sds[0]


def rate_series(path, rows):
    """sweep.csv of a link-rate sweep (link_gbps filled): per mode (native included; with a
    switching-time axis too, per mode and switching time), per link rate in increasing order, the
    mean step time over the repetitions with its error bar and the mean measured bandwidth
    (algbw_gbps: the reported rank's bytes over its ops' time)."""
    groups = {}
    switching = {r.get("switching_ms", "").strip() for r in rows if r["mode"] != SWEEP_NATIVE}
    for row in rows:
        gbps = parse_float(path, row, "link_gbps")
        sw = parse_float(path, row, "switching_ms", allow_empty=True)
        name = row["mode"] if sw is None or len(switching) < 2 else f"{row['mode']} {sw:g} ms"
        p = groups.setdefault(name, {}).setdefault(gbps, {"step": [], "sd": [], "bw": []})
        p["step"].append(parse_float(path, row, "step_ms"))
        p["sd"].append(parse_float(path, row, "step_ms_sd", allow_empty=True) or 0.0)
        bw = parse_float(path, row, "algbw_gbps", allow_empty=True)
        if bw is not None:
            p["bw"].append(bw)
    series = []
    for name, points in groups.items():
        pts = []
        for gbps in sorted(points):
            p = points[gbps]
            m, lo, hi = error_bar(p["step"], p["sd"])
            pts.append({"link_gbps": gbps, "repetitions": len(p["step"]), "step_ms": round(m, 3),
                        "low_ms": round(lo, 3), "high_ms": round(hi, 3),
                        "algbw_gbps": round(mean(p["bw"]), 4) if p["bw"] else None})
        series.append({"mode": name, "points": pts})
    return {"axis": "link_gbps", "series": series}


def sweep_series(folder):
    """sweep.csv of a switching-latency sweep: the native mean (every row of mode native) and per
    other mode, per switching point in increasing order, the mean step time over the repetitions,
    its error bar (min-max over the repetitions; with one repetition +-step_ms_sd, the spread of
    its steps) and the mean analytical estimate (None where every estimate_ms is empty). A
    link-rate sweep's file (a filled link_gbps column): rate_series."""
    path = os.path.join(folder, "sweep.csv")
    rows, header = read_csv(path, SWEEP_COLUMNS)
    if not rows:
        raise InputError(f"{path}: no rows")
    if "link_gbps" in header and any((r.get("link_gbps") or "").strip() for r in rows):
        return rate_series(path, rows)
    native, modes = [], {}
    for row in rows:
        step = parse_float(path, row, "step_ms")
        if row["mode"] == SWEEP_NATIVE:
            native.append(step)
            continue
        sw = parse_float(path, row, "switching_ms")
        p = modes.setdefault(row["mode"], {}).setdefault(sw, {"step": [], "sd": [], "estimate": []})
        p["step"].append(step)
        p["sd"].append(parse_float(path, row, "step_ms_sd", allow_empty=True) or 0.0)
        est = parse_float(path, row, "estimate_ms", allow_empty=True)
        if est is not None:
            p["estimate"].append(est)
    if not native and not modes:
        raise InputError(f"{path}: no rows")
    series = []
    for mode, points in modes.items():
        pts = []
        for sw in sorted(points):
            p = points[sw]
            m = mean(p["step"])
            if len(p["step"]) > 1:
                lo, hi = min(p["step"]), max(p["step"])
            else:
                lo, hi = m - p["sd"][0], m + p["sd"][0]
            pts.append({"switching_ms": sw, "repetitions": len(p["step"]), "step_ms": round(m, 3),
                        "low_ms": round(lo, 3), "high_ms": round(hi, 3),
                        "estimate_ms": round(mean(p["estimate"]), 3) if p["estimate"] else None})
        series.append({"mode": mode, "points": pts})
    return {"native_ms": round(mean(native), 3) if native else None, "native_rows": len(native), "series": series}


def draw_rate_sweep(plt, sweep, run, path):
    """Step time against the circuits' link rate per mode (mean over repetitions, error bars),
    native as a series of its own (it moves the same bytes); each legend entry gives the measured
    bandwidth at the lowest and highest rate."""
    fig, ax, (w, h) = figure_legend_below(plt, len(sweep["series"]))
    xs_all = [p["link_gbps"] for s in sweep["series"] for p in s["points"]]
    log_x = bool(xs_all) and max(xs_all) / min(xs_all) > 20.0
    for k, s in enumerate(sweep["series"]):
        color = mode_color(s["mode"].split(" ")[0], k)
        pts = s["points"]
        xs = [p["link_gbps"] for p in pts]
        ys = [p["step_ms"] for p in pts]
        err = [[y - p["low_ms"] for y, p in zip(ys, pts)], [p["high_ms"] - y for y, p in zip(ys, pts)]]
        bws = [f"{p['algbw_gbps']:.3g}" for p in (pts[0], pts[-1]) if p["algbw_gbps"] is not None]
        bw = f", measured {' .. '.join(bws)} Gbit/s" if bws else ""
        ax.errorbar(xs, ys, yerr=err, color=color, marker="o", ms=5, lw=1.8, capsize=3, label=f"{s['mode']}{bw}")
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("link rate of every circuit (Gbit/s)" + ("  [log scale]" if log_x else ""))
    ax.set_ylabel("step time (ms, mean of the measured steps)")
    ax.grid(True, color="#dddddd", lw=0.5, which="both")
    ax.set_title(f"{run}: step time vs link bandwidth", fontsize=12)
    legend_below(fig, ax)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [w, h], "log_x": log_x, **sweep}


def draw_sweep(plt, sweep, run, path):
    """Step time against the switch's latency per mode (mean over repetitions, error bars), the
    analytical estimate T_native + N_reconfig x T_switch dashed beside it, native as a line."""
    if sweep.get("axis") == "link_gbps":
        return draw_rate_sweep(plt, sweep, run, path)
    entries = sum(1 + any(p["estimate_ms"] is not None for p in s["points"]) for s in sweep["series"]) + \
        (sweep["native_ms"] is not None)
    fig, ax, (w, h) = figure_legend_below(plt, entries)
    xs_all = [p["switching_ms"] for s in sweep["series"] for p in s["points"]]
    log_x = bool(xs_all) and all(x > 0 for x in xs_all) and max(xs_all) / min(xs_all) > 100.0
    for k, s in enumerate(sweep["series"]):
        color = mode_color(s["mode"], k)
        xs = [p["switching_ms"] for p in s["points"]]
        ys = [p["step_ms"] for p in s["points"]]
        err = [[y - p["low_ms"] for y, p in zip(ys, s["points"])], [p["high_ms"] - y for y, p in zip(ys, s["points"])]]
        ax.errorbar(xs, ys, yerr=err, color=color, marker="o", ms=5, lw=1.8, capsize=3, label=f"{s['mode']} (measured)")
        est = [(p["switching_ms"], p["estimate_ms"]) for p in s["points"] if p["estimate_ms"] is not None]
        if est:
            ax.plot([x for x, _ in est], [y for _, y in est], color=color, ls="--", lw=1.4, marker="x", ms=5,
                    label=f"{s['mode']} (estimate: native + reconfigs x switch)")
    if sweep["native_ms"] is not None:
        ax.axhline(sweep["native_ms"], color=MODE_COLORS[SWEEP_NATIVE], lw=1.2,
                   label=f"native (no switching): {sweep['native_ms']:.1f} ms")
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("switching latency (ms)" + ("  [log scale]" if log_x else ""))
    ax.set_ylabel("step time (ms, mean of the measured steps)")
    ax.grid(True, color="#dddddd", lw=0.5, which="both")
    ax.set_title(f"{run}: step time vs switching latency", fontsize=12)
    legend_below(fig, ax)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [w, h], "log_x": log_x, **sweep}


# ---------------------------------------------------------------------------------------------
# The firmware study: firmware_study.png from firmware_study.csv


FIRMWARE_COLUMNS = ["nic_model", "dwell_s", "interval_s", "opus_ms", "rows", "up", "not_up", "firmware_min_ms",
                    "firmware_median_ms", "firmware_max_ms"]
OPUS_RAPID_MAX_S = 10.0  # firmware_study.h's kOpusRapidMaxMs


def firmware_series(folder):
    """firmware_study.csv: per NIC model, in file order, its points in increasing interval (the
    measured one, else the dwell): the median, min and max firmware link-up in s over the rows
    whose link came up, how many rows never came up, and the model's Opus figure (s) if any."""
    path = os.path.join(folder, "firmware_study.csv")
    rows, _ = read_csv(path, FIRMWARE_COLUMNS)
    if not rows:
        raise InputError(f"{path}: no rows")
    models = {}
    for row in rows:
        interval = parse_float(path, row, "interval_s", allow_empty=True)
        dwell = parse_float(path, row, "dwell_s")
        med = parse_float(path, row, "firmware_median_ms", allow_empty=True)
        lo = parse_float(path, row, "firmware_min_ms", allow_empty=True)
        hi = parse_float(path, row, "firmware_max_ms", allow_empty=True)
        opus = parse_float(path, row, "opus_ms", allow_empty=True)
        m = models.setdefault(row["nic_model"], {"nic_model": row["nic_model"], "opus_s": None, "points": []})
        if opus is not None:
            m["opus_s"] = opus / 1000
        m["points"].append({"dwell_s": dwell, "interval_s": interval if interval is not None else dwell,
                            "median_s": None if med is None else round(med / 1000, 4),
                            "min_s": None if lo is None else round(lo / 1000, 4),
                            "max_s": None if hi is None else round(hi / 1000, 4),
                            "rows": parse_int(path, row, "rows"), "up": parse_int(path, row, "up"),
                            "not_up": parse_int(path, row, "not_up")})
    for m in models.values():
        m["points"].sort(key=lambda p: p["interval_s"])
    return {"models": list(models.values())}


def draw_firmware_study(plt, study, run, path):
    """Firmware link-up (median, min-max bars) per NIC model against the reconfiguration interval;
    the line where link-up equals the interval (above it a link cannot come up before the next
    reconfiguration); each model's Opus figure dashed in its colour and Opus's ~10 s under rapid
    reconfigurations dotted (only beside models that have an Opus figure); the rows that never
    came up written beside their point."""
    models = study["models"]
    referenced = [m for m in models if m["opus_s"] is not None]
    entries = 2 * len(models) + 1 + (1 if referenced else 0)
    fig, ax, (w, h) = figure_legend_below(plt, entries)
    xs_all = [p["interval_s"] for m in models for p in m["points"]]
    ys_all = [p["max_s"] for m in models for p in m["points"] if p["max_s"] is not None]
    styles = series_styles(len(models))
    for (color, ls), m in zip(styles, models):
        pts = [p for p in m["points"] if p["median_s"] is not None]
        if pts:
            ys = [p["median_s"] for p in pts]
            err = [[y - p["min_s"] for y, p in zip(ys, pts)], [p["max_s"] - y for y, p in zip(ys, pts)]]
            ax.errorbar([p["interval_s"] for p in pts], ys, yerr=err, color=color, ls=ls, marker="o", ms=6, lw=1.8,
                        capsize=4, label=f"{m['nic_model']}: firmware link-up (median, min-max)")
        for p in m["points"]:
            if p["not_up"]:
                y = p["median_s"] if p["median_s"] is not None else p["interval_s"]
                ax.annotate(f"{p['not_up']}/{p['rows']} never up", (p["interval_s"], y), textcoords="offset points",
                            xytext=(6, -14), fontsize=8, color=color)
                if p["median_s"] is None:
                    ax.plot([p["interval_s"]], [y], marker="x", ms=9, color=color, ls="none")
        if m["opus_s"] is not None:
            ax.axhline(m["opus_s"], color=color, ls="--", lw=1.2,
                       label=f"Opus, {m['nic_model']}: about {m['opus_s']:g} s")
            ys_all.append(m["opus_s"])
    # y: the link-ups, the references and the never-up marks (at their interval), not the
    # whole diagonal
    never = [p["interval_s"] for m in models for p in m["points"] if p["median_s"] is None]
    top = max(ys_all + never + [0.001])
    if referenced:
        ax.axhline(OPUS_RAPID_MAX_S, color="#555555", ls=":", lw=1.4,
                   label=f"Opus: up to about {OPUS_RAPID_MAX_S:g} s under rapid successive reconfigurations")
        top = max(top, OPUS_RAPID_MAX_S)
    x_lim = max(xs_all) * 1.12
    ax.plot([0, x_lim], [0, x_lim], color="#999999", ls="-.", lw=1.0, label="link-up = reconfiguration interval")
    ax.set_xlim(0, x_lim)
    ax.set_ylim(0, top * 1.15)
    ax.set_xlabel("reconfiguration interval (s, median between commands)")
    ax.set_ylabel("firmware link-up (s, light back to link up)")
    ax.grid(True, color="#dddddd", lw=0.5)
    ax.set_title(f"{run}: NIC firmware link-up per model vs reconfiguration interval", fontsize=12)
    boxes = legend_below(fig, ax)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [w, h], **study, **boxes}


# ---------------------------------------------------------------------------------------------
# The survival experiment: survival.png from survival_matrix.csv


SURVIVAL_COLUMNS = ["timeout", "retry_cnt", "outage_ms", "survived", "errored", "stalled", "untouched",
                    "predicted_boundary_ms", "softroce_boundary_ms"]
SURVIVAL_ROW_PX = 60


def categorical_x(grid, ms):
    """Where `ms` lies on a categorical axis whose column k (centred at x = k) is grid[k]: linear
    between neighbouring columns, from the left edge (x = -0.5, 0 ms) to the first column, and at
    the right edge (x = n - 0.5) beyond the last or unbounded (None)."""
    n = len(grid)
    if ms is None or ms > grid[-1]:
        return n - 0.5
    if ms <= grid[0]:
        return -0.5 + 0.5 * ms / grid[0] if grid[0] > 0 else 0.0
    for k in range(n - 1):
        if grid[k] <= ms <= grid[k + 1]:
            return k + (ms - grid[k]) / (grid[k + 1] - grid[k])
    return n - 0.5


def survival_series(folder, name="survival_matrix.csv"):
    """survival_matrix.csv (or a phase workload's job_survival_matrix.csv, the same columns): the
    sorted planned lengths and per setting (by timeout, retry_cnt) the share of its rows that
    survived or were untouched per length (None without rows), its counts, and both predicted
    boundaries (None: unbounded) with their positions on the axis."""
    path = os.path.join(folder, name)
    rows, _ = read_csv(path, SURVIVAL_COLUMNS)
    grid = sorted({parse_float(path, r, "outage_ms") for r in rows})
    settings = {}
    for r in rows:
        key = (parse_int(path, r, "timeout"), parse_int(path, r, "retry_cnt"))
        s = settings.setdefault(key, {"label": f"t{key[0]} r{key[1]}", "counts": {},
                                      "predicted_ms": parse_float(path, r, "predicted_boundary_ms", True),
                                      "softroce_ms": parse_float(path, r, "softroce_boundary_ms", True)})
        s["counts"][parse_float(path, r, "outage_ms")] = {c: parse_int(path, r, c) for c in
                                                          ("survived", "errored", "stalled", "untouched")}
    series = []
    for key in sorted(settings):
        s = settings[key]
        fractions, counts = [], []
        for ms in grid:
            c = s["counts"].get(ms, {"survived": 0, "errored": 0, "stalled": 0, "untouched": 0})
            total = sum(c.values())
            fractions.append(round((c["survived"] + c["untouched"]) / total, 3) if total else None)
            counts.append(c)
        series.append({"label": s["label"], "fractions": fractions, "counts": counts,
                       "predicted_ms": s["predicted_ms"], "softroce_ms": s["softroce_ms"],
                       "predicted_x": round(categorical_x(grid, s["predicted_ms"]), 3) if grid else None,
                       "softroce_x": round(categorical_x(grid, s["softroce_ms"]), 3) if grid else None})
    return {"grid_ms": grid, "settings": series}


def draw_survival(plt, survival, run, path, softroce=True, title="queue-pair survival per outage length"):
    """A heatmap: x the planned outage lengths (categorical, sorted), y the settings, colour the
    share of rows that survived (green) or errored (red), each cell's counts written in it; each
    row's predicted boundary a black bar at its place between the columns, Soft-RoCE's dashed
    (without `softroce`, a run on hardware, none)."""
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.lines import Line2D
    grid, series = survival["grid_ms"], survival["settings"]
    n_rows = max(1, len(series))
    w = PLOT_WIDTH_PX
    below = PLOT_BOTTOM_PX + LEGEND_ROW_PX
    h = PLOT_TOP_PX + max(4, n_rows) * SURVIVAL_ROW_PX + below
    fig, ax = plt.subplots(figsize=(w / DPI, h / DPI), dpi=DPI)
    fig.subplots_adjust(left=0.13, right=0.9, top=1 - PLOT_TOP_PX / h, bottom=below / h)
    cmap = LinearSegmentedColormap.from_list("survival", ["#d62728", "#f2e394", "#2ca02c"])
    cmap.set_bad("#eeeeee")
    data = [[float("nan") if f is None else f for f in s["fractions"]] for s in series] or [[float("nan")]]
    image = ax.imshow(data, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    for y, s in enumerate(series):
        for x, c in enumerate(s["counts"]):
            total = sum(c.values())
            if total:
                ax.text(x, y, f"{c['survived'] + c['untouched']}/{total}", ha="center", va="center", fontsize=8)
        bars = (("predicted", "-", -0.25), ("softroce", (0, (3, 2)), 0.25))
        for key, ls, dy in bars if softroce else bars[:1]:
            x = s[key + "_x"]
            if x is None:
                continue
            ax.plot([x, x], [y - 0.45, y + 0.45], color="#000000", lw=2.2, ls=ls)
            if x >= len(grid) - 0.5:  # beyond the longest length, or unbounded: say which
                ms = s[key + "_ms"]
                ax.text(x - 0.03, y + dy, "unbounded" if ms is None else f"{ms:g} ms", ha="right", va="center",
                        fontsize=7)
    ax.set_xticks(range(len(grid)))
    ax.set_xticklabels([f"{ms:g}" for ms in grid])
    ax.set_yticks(range(len(series)))
    ax.set_yticklabels([s["label"] for s in series])
    ax.set_xlim(-0.5, max(0, len(grid) - 1) + 0.5)
    ax.set_xlabel("planned outage (ms)")
    ax.set_ylabel("queue-pair setting (timeout, retry_cnt)")
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("share survived or untouched")
    handles = [Line2D([], [], color="#000000", lw=2.2, label="predicted boundary (retry_cnt x T)")]
    if softroce:
        handles.append(Line2D([], [], color="#000000", lw=2.2, ls=(0, (3, 2)), label="Soft-RoCE boundary"))
    ax.legend(handles=handles,
              loc="lower center", bbox_to_anchor=(0.5, -below / (h - PLOT_TOP_PX - below)), ncol=2, fontsize=9,
              frameon=False)
    ax.set_title(f"{run}: {title}", fontsize=12)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return {"file": path, "size_px": [w, h], **survival}


def survival_main(args):
    """`ocslab plot` on a folder with survival_matrix.csv and no breakdown.csv: survival.png only."""
    try:
        survival = survival_series(args.folder)
    except InputError as e:
        print(f"ocslab plot: {e}", file=sys.stderr)
        return EXIT_INPUT
    plt = import_pyplot()
    if plt is None:
        return EXIT_NO_MATPLOTLIB
    path = os.path.join(args.folder, f"survival.{args.format}")
    described = draw_survival(plt, survival, os.path.basename(os.path.normpath(args.folder)), path)
    print(json.dumps({"survival": described}, indent=2) if args.describe else f"wrote {path}")
    return 0


def import_pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display), or None after telling the
    user how to install matplotlib (the caller exits 3). Both callers read their inputs first, so
    a bad folder is reported as such also where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"ocslab plot: matplotlib is not installed for {sys.executable}: install the Debian package "
              "python3-matplotlib (scripts/install-deps), or choose another interpreter with "
              "OCSLAB_PYTHON", file=sys.stderr)
        return None
    return plt


PHASE_INPUTS = ["phase-steps.csv", "windows.csv", "sweep.csv", "job_survival_matrix.csv"]


def job_survival_softroce(folder):
    """Whether a phase workload's survival sweep ran on Soft-RoCE (a virtual lab): its
    job_survival.csv then has the Soft-RoCE prediction in some row."""
    path = os.path.join(folder, "job_survival.csv")
    if not os.path.isfile(path):
        return False
    rows, _ = read_csv(path, ["run", "softroce_survive"])
    return any(r["softroce_survive"] != "" for r in rows)


def phase_main(args, into=None):
    """`ocslab plot` on a phase-workload results folder: phase.png from phase-steps.csv,
    windows.png from windows.csv, sweep.png from sweep.csv, each when its file is there. With
    `into` (a run with probes, whose timeline and CDF follow), the --describe entries go there
    instead of being printed."""
    def has(name):
        return os.path.isfile(os.path.join(args.folder, name))
    try:
        modes = phase_steps(args.folder) if has("phase-steps.csv") else None
        windows = windows_series(args.folder) if has("windows.csv") else None
        phases = phase_windows_series(args.folder) if has("windows.csv") else None
        sweep = sweep_series(args.folder) if has("sweep.csv") else None
        jobs = survival_series(args.folder, "job_survival_matrix.csv") if has("job_survival_matrix.csv") else None
        softroce = job_survival_softroce(args.folder)
    except InputError as e:
        print(f"ocslab plot: {e}", file=sys.stderr)
        return EXIT_INPUT
    plt = import_pyplot()
    if plt is None:
        return EXIT_NO_MATPLOTLIB
    run = os.path.basename(os.path.normpath(args.folder))
    described, wrote = {"run": run}, []
    if modes is not None:
        path = os.path.join(args.folder, f"phase.{args.format}")
        bars = draw_phase(plt, modes, run, path)
        described["phase"] = {"file": path, "size_px": list(PHASE_SIZE_PX), "modes": bars}
        wrote.append(path)
    if windows is not None:
        path = os.path.join(args.folder, f"windows.{args.format}")
        described["windows"] = draw_windows(plt, windows, run, path)
        wrote.append(path)
    if phases is not None:
        path = os.path.join(args.folder, f"windows-phases.{args.format}")
        described["windows_phases"] = draw_phase_windows(plt, phases, run, path)
        wrote.append(path)
    if sweep is not None:
        path = os.path.join(args.folder, f"sweep.{args.format}")
        described["sweep"] = draw_sweep(plt, sweep, run, path)
        wrote.append(path)
    if jobs is not None:  # a survival sweep (sweep.env x sweep.outage_ms): one run of the job per cell
        path = os.path.join(args.folder, f"job_survival.{args.format}")
        described["job_survival"] = draw_survival(plt, jobs, run, path, softroce,
                                                  "the job per queue-pair setting and outage length")
        wrote.append(path)
    if into is not None and args.describe:
        into.update({k: v for k, v in described.items() if k != "run"})
    elif args.describe:
        print(json.dumps(described, indent=2))
    else:
        print(f"wrote {' and '.join(wrote)}")
    return 0


def main(argv):
    ap = Parser(prog="ocslab plot", description="Draw timeline and cdf figures of an ocslab results folder.")
    ap.add_argument("folder")
    ap.add_argument("--iteration", type=int, default=None)
    ap.add_argument("--format", choices=["png", "svg"], default="png")
    ap.add_argument("--describe", action="store_true")
    ap.add_argument("--dark-dbm", type=float, default=-30.0)
    try:
        args = ap.parse_args(argv)
    except UsageError as e:
        print(f"ocslab plot: {e} (ocslab plot --help)", file=sys.stderr)
        return EXIT_USAGE
    phase_run = any(os.path.isfile(os.path.join(args.folder, name)) for name in PHASE_INPUTS)
    if phase_run and not os.path.isfile(os.path.join(args.folder, "breakdown.csv")):
        return phase_main(args)
    survival_run = os.path.isfile(os.path.join(args.folder, "survival_matrix.csv"))
    if survival_run and not os.path.isfile(os.path.join(args.folder, "breakdown.csv")):
        return survival_main(args)
    phase_described = {}
    if phase_run:  # a phase-workload run with probes: its phase figures, then the timeline and CDF
        rc = phase_main(args, phase_described)
        if rc != 0:
            return rc
    try:
        if not os.path.isdir(args.folder):
            raise InputError(f"{args.folder}: no such results folder")
        bd = Breakdown(os.path.join(args.folder, "breakdown.csv"))
        tl = Timeline(os.path.join(args.folder, "timeline.csv"), args.dark_dbm)
        p = plan(args, tl, bd)
        steps = rank_step(args.folder, p["mapping"], p["issue_t_ns"]) if phase_run else None
        if steps:
            span = (min(steps["start_ns"], p["issue_t_ns"]) - 50_000_000, steps["end_ns"] + 50_000_000)
            p = plan(args, tl, bd, span=span)
            add_rank_lanes(p, tl, steps)
        series, log_x = cdf_series(bd)
        survival = survival_series(args.folder) if survival_run else None
        has_study = os.path.isfile(os.path.join(args.folder, "firmware_study.csv"))
        study = firmware_series(args.folder) if has_study else None
    except InputError as e:
        print(f"ocslab plot: {e}", file=sys.stderr)
        return EXIT_INPUT
    plt = import_pyplot()
    if plt is None:
        return EXIT_NO_MATPLOTLIB
    cdf_path = os.path.join(args.folder, f"cdf.{args.format}")
    pages = draw_timeline(plt, p, args.folder, args.format)
    cdf_note = bd.status_note()
    cdf_size = draw_cdf(plt, series, log_x, cdf_path, p["run"], cdf_note)
    survival_path = None
    if survival is not None:
        survival_path = os.path.join(args.folder, f"survival.{args.format}")
        p["survival"] = draw_survival(plt, survival, p["run"], survival_path)
    study_path = None
    if study is not None:
        study_path = os.path.join(args.folder, f"firmware_study.{args.format}")
        p["firmware_study"] = draw_firmware_study(plt, study, p["run"], study_path)
    if args.describe:
        for h in p["hosts"].values():
            h["lanes"] = [label for label, _, _, _ in lane_list(h)]
        p["timeline"] = {"file": pages[0]["file"], "size_px": pages[0]["size_px"], "pages": pages}
        p["cdf"] = {"file": cdf_path, "size_px": cdf_size, "log_x": log_x,
                    "series": [{k: s[k] for k in ("column", "n", "median_ms", "min_ms", "max_ms")} for s in series],
                    "note": cdf_note}
        statuses, intents = bd.status_counts()
        p["cdf"]["statuses"] = statuses
        if intents is not None:
            p["cdf"]["intents"] = intents
        p.update(phase_described)
        print(json.dumps(p, indent=2))
    else:
        tl_files = " ".join(page["file"] for page in pages)
        print(f"wrote {tl_files} (iteration {p['iteration']}) and {cdf_path}" +
              (f" and {survival_path}" if survival_path else "") + (f" and {study_path}" if study_path else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
