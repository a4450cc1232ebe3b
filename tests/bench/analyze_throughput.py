#!/usr/bin/env python3
"""Throughput of `ocslab analyze` against a straightforward pandas implementation of the same
breakdown (docs/experiments.md), on a synthetic timeline: 16 hosts, 50 reconfigurations, mostly
rdma `completion` rows plus every layer edge and the polled live carrier bit (one failed
reconfiguration, one unaffected, one incomplete and one unseen row, and one row whose outage only
the live bit shows, which is ok). Prints rows/s, the speed ratio and both peak
resident memories (each measured on its own child process with wait4), and checks that the two
breakdowns agree row for row. Prints figures; asserts only that the results agree.

Usage: analyze_throughput.py [--rows N] [--ocslab PATH] [--dir DIR] [--keep]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HOSTS = 16
RECONFIGS = 50
PERIOD_NS = 4_000_000_000
WINDOW_NS = 200_000_000  # an iteration starts 200 ms before its command
COLUMNS = "t_ns,host,source,subject,signal,value,unit,run,iteration\n"
FAILED_ITERATION = 17     # the switch answers ack 0
UNAFFECTED = (23, 5)      # (iteration, host) with no layer going down
INCOMPLETE = (31, 7)      # (iteration, host) whose carrier does not come back
UNSEEN = (41, 9)          # (iteration, host) dark 60 ms whose carrier shows nothing, not even the live bit
BIT_ONLY = (43, 11)       # (iteration, host) whose announcement came too late but the live bit showed: ok


def edge_rows(rng, base):
    """Control and layer rows: [(t_ns, line)]."""
    rows = []
    ms = 1_000_000
    for it in range(1, RECONFIGS + 1):
        c = base + 1_000_000_000 + (it - 1) * PERIOD_NS
        rows.append((c, f"{c},switch,ocs,map-{it},command,1,,bench,{it}\n"))
        a = c + int(rng.uniform(3, 10) * ms)
        rows.append((a, f"{a},switch,ocs,map-{it},ack,{0 if it == FAILED_ITERATION else 1},,bench,{it}\n"))
        for h in range(HOSTS):
            if (it, h) == UNAFFECTED:
                continue
            host, peer = f"h{h:02d}", f"h{(h + 1) % HOSTS:02d}"
            rdma = f"rxe_eth1/eth1@{peer}"
            stalled = c + int(rng.uniform(0.5, 2) * ms)
            lost = c + int(rng.uniform(1, 3) * ms)
            fw_down = lost + int(rng.uniform(0.1, 1) * ms)
            car_down = fw_down + int(rng.uniform(0.5, 3) * ms)
            back = c + int(rng.uniform(20, 40) * ms) if (it, h) != UNSEEN else lost + 60 * ms
            fw_up = back + int(rng.uniform(50, 200) * ms)
            car_up = fw_up + int(rng.uniform(1, 5) * ms)
            resumed = car_up + int(rng.uniform(10, 100) * ms)
            # The live bit, polled every 5 ms: within a poll of the driver's change.
            bit_down = fw_down + int(rng.uniform(0, 5) * ms)
            bit_up = fw_up + int(rng.uniform(0, 5) * ms)
            rows += [
                (stalled, f"{stalled},{host},rdma,{rdma},stalled,1,bool,bench,{it}\n"),
                (lost, f"{lost},{host},emulator,eth1,light,0,bool,bench,{it}\n"),
                (fw_down, f"{fw_down},{host},emulator,eth1,link,0,bool,bench,{it}\n"),
                (back, f"{back},{host},emulator,eth1,light,1,bool,bench,{it}\n"),
                (fw_up, f"{fw_up},{host},emulator,eth1,link,1,bool,bench,{it}\n"),
            ]
            if (it, h) not in (UNSEEN, BIT_ONLY):
                rows.append((car_down, f"{car_down},{host},carrier,eth1,carrier,0,bool,bench,{it}\n"))
                if (it, h) != INCOMPLETE:
                    rows.append((car_up, f"{car_up},{host},carrier,eth1,carrier,1,bool,bench,{it}\n"))
            if (it, h) != UNSEEN:
                rows.append((bit_down, f"{bit_down},{host},carrier,eth1,carrier_bit,0,bool,bench,{it}\n"))
                if (it, h) != INCOMPLETE:
                    rows.append((bit_up, f"{bit_up},{host},carrier,eth1,carrier_bit,1,bool,bench,{it}\n"))
            if (it, h) != INCOMPLETE:
                rows += [
                    (resumed, f"{resumed},{host},rdma,{rdma},resumed,{(resumed - stalled) / ms:.3f},ms,bench,{it}\n"),
                ]
    rows.sort()
    return rows


def generate(path, total_rows, seed=1):
    import numpy as np

    rng = np.random.default_rng(seed)
    base = 1_763_850_000_000_000_000
    edges = edge_rows(rng, base)
    n_comp = max(total_rows - len(edges), 0)
    end = base + 1_000_000_000 + RECONFIGS * PERIOD_NS
    t = np.sort(rng.integers(base, end, size=n_comp, dtype=np.int64))
    host = rng.integers(0, HOSTS, size=n_comp)
    starts = base + 1_000_000_000 + np.arange(RECONFIGS, dtype=np.int64) * PERIOD_NS - WINDOW_NS
    it = np.searchsorted(starts, t, side="right")
    edge_t = np.array([e[0] for e in edges], dtype=np.int64)
    with open(path, "wb") as f:
        f.write(COLUMNS.encode())
        e_pos = np.searchsorted(t, edge_t, side="left")
        ei = 0
        # One block per iteration: every line of a block has the same width, so the block is a
        # byte matrix of 19 timestamp digits next to a per-host suffix.
        for k in range(RECONFIGS + 1):
            lo, hi = np.searchsorted(it, k, "left"), np.searchsorted(it, k, "right")
            if lo == hi:
                continue
            suffixes = [f",h{h:02d},rdma,rxe_eth1/eth1@h{(h + 1) % HOSTS:02d},completion,0,wc_status,bench,{k}\n"
                        for h in range(HOSTS)]
            table = np.frombuffer("".join(suffixes).encode(), dtype=np.uint8).reshape(HOSTS, -1)
            tt = t[lo:hi]
            digits = (tt[:, None] // (10 ** np.arange(18, -1, -1, dtype=np.int64))) % 10 + ord("0")
            block = np.hstack([digits.astype(np.uint8), table[host[lo:hi]]])
            width = block.shape[1]
            raw = block.tobytes()
            cur = lo
            while ei < len(edges) and e_pos[ei] < hi:
                p = max(int(e_pos[ei]), cur)
                f.write(raw[(cur - lo) * width:(p - lo) * width])
                f.write(edges[ei][1].encode())
                cur = p
                ei += 1
            f.write(raw[(cur - lo) * width:])
        for e in edges[ei:]:
            f.write(e[1].encode())
    return n_comp + len(edges)


def pandas_breakdown(path, out, dark_dbm=-30.0):
    """The breakdown the obvious pandas way: read everything, filter, group, first edges."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(path, dtype={"run": str, "host": str, "subject": str, "unit": str}, keep_default_na=False)
    df["run"] = df["run"].astype(str)
    # Edge times become float64 once merges leave holes: relative to the first row they stay
    # exact to the nanosecond (absolute ns since the epoch would round to 256 ns).
    df["t_ns"] -= df["t_ns"].min()
    kind = df["source"] + "/" + df["signal"]
    layer_of = {
        "emulator/light": ("light", 0), "ocs_power/light": ("light", 1), "rx_power/rx_power_dbm": ("light", 2),
        "emulator/link": ("firmware", 0), "firmware/link": ("firmware", 1), "carrier/carrier": ("carrier", 0),
        "rdma/stalled": ("stalled", 0), "rdma/resumed": ("resumed", 0), "carrier/carrier_bit": ("carrier_bit", 0),
    }
    ctrl = df[kind.isin(["ocs/command", "ocs/ack"])].sort_values("t_ns", kind="stable")
    cmd = ctrl[ctrl.signal == "command"].groupby(["run", "iteration"]).first()
    ack = ctrl[ctrl.signal == "ack"].groupby(["run", "iteration"]).first()
    lay = df[kind.isin(layer_of.keys()) & (df.host != "switch")].copy()
    k = kind[lay.index]
    lay["layer"] = k.map(lambda x: layer_of[x][0])
    lay["rank"] = k.map(lambda x: layer_of[x][1])
    lay["iface"] = lay.subject.str.split("@").str[0].str.split("/").str[-1]
    best = lay.groupby(["host", "iface", "layer"])["rank"].transform("min")
    lay = lay[lay["rank"] == best].sort_values("t_ns", kind="stable")
    lay["state"] = np.where(k[lay.index] == "rx_power/rx_power_dbm", lay.value >= dark_dbm, lay.value != 0)
    keys = ["run", "iteration", "host", "iface"]

    grid = df.loc[df.iteration >= 1, ["run", "iteration"]].drop_duplicates()
    pairs = lay[["host", "iface"]].drop_duplicates()
    grid = grid.merge(pairs, how="cross")

    edges = {}
    states = lay[lay.layer.isin(["light", "firmware", "carrier"])]
    for name in ["light", "firmware", "carrier"]:
        s = states[states.layer == name]
        down = s[~s.state].groupby(keys).t_ns.min().rename("down").reset_index()
        ups = s[s.state].merge(down, on=keys)
        up = ups[ups.t_ns > ups.down].groupby(keys).t_ns.min().rename("up").reset_index()
        edges[name] = down.merge(up, on=keys, how="left")
    st = lay[lay.layer == "stalled"].groupby(keys).t_ns.min().rename("down").reset_index()
    rs = lay[lay.layer == "resumed"].merge(st, on=keys)
    rs = rs[rs.t_ns >= rs.down].groupby(keys).t_ns.min().rename("up").reset_index()
    edges["rdma"] = st.merge(rs, on=keys, how="left")
    # The live carrier bit: its own edges, read only by the unseen rule.
    s = lay[lay.layer == "carrier_bit"]
    down = s[~s.state].groupby(keys).t_ns.min().rename("bit_down").reset_index()
    ups = s[s.state].merge(down, on=keys)
    up = ups[ups.t_ns > ups.bit_down].groupby(keys).t_ns.min().rename("bit_up").reset_index()
    bit = down.merge(up, on=keys, how="left")

    b = grid.copy()
    b = b.merge(cmd[["t_ns"]].rename(columns={"t_ns": "issued"}).reset_index(), on=["run", "iteration"], how="left")
    b = b.merge(ack[["t_ns", "value"]].rename(columns={"t_ns": "ack_t", "value": "ack_v"}).reset_index(),
                on=["run", "iteration"], how="left")
    b["acked"] = b.ack_t.where(b.ack_v != 0)
    for name, e in edges.items():
        b = b.merge(e.rename(columns={"down": name + "_down", "up": name + "_up"}), on=keys, how="left")
    b = b.merge(bit, on=keys, how="left")
    ms = 1e6
    b["control_ms"] = (b.acked - b.issued) / ms
    b["switching_ms"] = (b.light_up - b.issued) / ms
    b["dark_ms"] = (b.light_up - b.light_down) / ms
    b["firmware_ms"] = (b.firmware_up - b.light_up) / ms
    b["carrier_ms"] = (b.carrier_up - b.light_up) / ms
    b["kernel_ms"] = (b.carrier_up - b.firmware_up) / ms
    b["rdma_ms"] = (b.rdma_up - b.carrier_up) / ms
    b["outage_ms"] = (b.rdma_up - b.rdma_down) / ms
    b["total_ms"] = (b.rdma_up.fillna(b.carrier_up) - b.issued) / ms
    downs = b[[n + "_down" for n in edges]].notna()
    stuck = pd.concat([b[n + "_down"].notna() & b[n + "_up"].isna() for n in edges], axis=1)
    # Dark for 20 ms or more and back, or the firmware-layer link down and back however briefly,
    # on a port whose carrier is probed, with no carrier edge, announced or polled.
    probed = lay[lay.layer == "carrier"][["host", "iface"]].drop_duplicates().assign(probed=True)
    b = b.merge(probed, on=["host", "iface"], how="left")
    bounced = (b.light_up - b.light_down >= 20 * ms) | (b.firmware_down.notna() & b.firmware_up.notna())
    unseen = (b.probed.fillna(False).astype(bool) & bounced & b.carrier_down.isna() &
              b.carrier_up.isna() & b.bit_down.isna() & b.bit_up.isna())
    b["status"] = np.select(
        [b.acked.isna() & (len(cmd) > 0), ~downs.any(axis=1), stuck.any(axis=1), unseen],
        ["failed", "unaffected", "incomplete", "unseen"], "ok")
    b = b.rename(columns={"iface": "interface"}).sort_values(["run", "iteration", "host", "interface"])
    b[["run", "iteration", "host", "interface", "status", "control_ms", "switching_ms", "dark_ms", "firmware_ms",
       "carrier_ms", "kernel_ms", "rdma_ms", "outage_ms", "total_ms"]].to_csv(out, index=False)


def timed_child(argv):
    """Runs argv; returns (seconds, peak RSS in MiB) of that one child."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"analyze_throughput: {' '.join(argv)} failed ({status})")
    return secs, ru.ru_maxrss / 1024


def compare(ours_csv, theirs_csv):
    import numpy as np
    import pandas as pd

    keys = ["run", "iteration", "host", "interface"]
    a = pd.read_csv(ours_csv, dtype={"run": str}, keep_default_na=False, na_values=[""])
    b = pd.read_csv(theirs_csv, dtype={"run": str}, keep_default_na=False, na_values=[""])
    m = a.merge(b, on=keys, how="outer", suffixes=("", "_pd"), indicator=True)
    only = m[m._merge != "both"]
    if len(only):
        return f"{len(only)} row(s) in only one breakdown:\n{only[keys + ['_merge']].head()}"
    bad = m[m.status != m.status_pd]
    if len(bad):
        return f"{len(bad)} status difference(s):\n{bad[keys + ['status', 'status_pd']].head()}"
    for c in ["control_ms", "switching_ms", "dark_ms", "firmware_ms", "carrier_ms", "kernel_ms", "rdma_ms",
              "outage_ms", "total_ms"]:
        x, y = m[c].to_numpy(float), m[c + "_pd"].to_numpy(float)
        same = (np.isnan(x) & np.isnan(y)) | (np.abs(x - y) <= 1e-6)
        if not same.all():
            return f"{c}: {int((~same).sum())} value(s) differ, e.g. {x[~same][:3]} vs {y[~same][:3]}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000, help="timeline rows (default 10 million)")
    ap.add_argument("--ocslab", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build/bin/ocslab"),
                    help="the ocslab binary")
    ap.add_argument("--dir", help="work folder (default: a new one under /tmp, removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--pandas-worker", nargs=2, metavar=("TIMELINE", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--generate-worker", metavar="TIMELINE", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.pandas_worker:
        pandas_breakdown(*a.pandas_worker)
        return 0
    if a.generate_worker:
        print(generate(a.generate_worker, a.rows))
        return 0

    work = a.dir or tempfile.mkdtemp(prefix="ocslab-analyze-bench-")
    os.makedirs(work, exist_ok=True)
    timeline = os.path.join(work, "timeline.csv")
    try:
        t0 = time.perf_counter()
        # In a child of its own: a child's peak RSS counts the parent it was forked from, so
        # this process stays small (numpy and pandas are imported only after the timings).
        rows = int(subprocess.check_output([sys.executable, os.path.abspath(__file__), "--rows", str(a.rows),
                                            "--generate-worker", timeline]))
        size = os.path.getsize(timeline)
        print(f"timeline: {rows} rows, {size / 2**20:.0f} MiB, {HOSTS} hosts, {RECONFIGS} reconfigurations "
              f"(generated in {time.perf_counter() - t0:.1f} s)")
        # Both read the file from the page cache: warm it for whichever runs first.
        with open(timeline, "rb") as f:
            while f.read(1 << 24):
                pass
        ours_s, ours_mb = timed_child([a.ocslab, "analyze", timeline, "-o", os.path.join(work, "ours")])
        pd_out = os.path.join(work, "pandas_breakdown.csv")
        pd_s, pd_mb = timed_child([sys.executable, os.path.abspath(__file__), "--pandas-worker", timeline, pd_out])
        diff = compare(os.path.join(work, "ours", "breakdown.csv"), pd_out)
        print(f"ocslab analyze: {ours_s:7.2f} s  {rows / ours_s / 1e6:7.2f} M rows/s  peak RSS {ours_mb:7.0f} MiB")
        print(f"pandas:         {pd_s:7.2f} s  {rows / pd_s / 1e6:7.2f} M rows/s  peak RSS {pd_mb:7.0f} MiB")
        print(f"speed ratio (pandas time / ocslab time): {pd_s / ours_s:.1f}x (goal >= 5x); "
              f"memory ratio: {pd_mb / ours_mb:.1f}x")
        if diff:
            print(f"breakdowns DISAGREE: {diff}")
            return 1
        print("breakdowns agree: same rows and statuses, every duration within 1e-6 ms")
        return 0
    finally:
        if not a.keep and not a.dir:
            import shutil
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
