#!/usr/bin/python3
"""What experiments/plots/ocslab_plot.py draws for many hosts and many series, checked through
--describe (which reports what the drawing calls drew: lanes, host labels and their boxes in
pixels, failed-lane markers, legend entries, line colours) and the PNG header, without image
recognition. Needs python3-matplotlib.

  python3 tests/integration/plot/test_figures.py [-k PATTERN]
  python3 tests/integration/plot/test_figures.py --render DIR   # the 16-host sample, to look at
"""

import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "experiments", "plots"))
import ocslab_plot  # noqa: E402

MS = 1_000_000
T0 = 1_800_000_000_000_000_000
RUN = "scale-20261206-110000"
FAILED = {"h5", "h12"}  # carrier and RDMA go down and never come back


def host_names(n):
    # Names of different lengths, one long: the longest must be whole on the figure.
    return [f"h{i}" for i in range(1, n)] + ["gpu-rack07-node-long-name"]


def write_results(folder, n_hosts, failed=FAILED):
    """A one-reconfiguration results folder: every host loses light 40 ms after the command and
    gets it back at 90 ms, firmware at 900, carrier at 1000 and its RDMA pair to the next host
    resumes at 1200 (each host 7 ms after the one before); the hosts in `failed` never get
    carrier or RDMA back."""
    os.makedirs(folder, exist_ok=True)
    hosts = host_names(n_hosts)
    issue = T0 + 10_000 * MS
    rows = []
    for h in hosts:  # warm-up: everything up
        rows += [(T0, h, "emulator", "eth1", "light", 1), (T0 + 1, h, "emulator", "eth1", "link", 1),
                 (T0 + 2, h, "carrier", "eth1", "carrier", 1)]
    rows += [(issue, "switch", "ocs", "ring-2", "command", 1), (issue + 45 * MS, "switch", "ocs", "ring-2", "ack", 1)]
    bd = ["run,iteration,mapping,host,interface,status,issued_ns,total_ms"]
    for k, h in enumerate(hosts):
        o, pair = 7 * k, f"rxe_eth1/eth1@{hosts[(k + 1) % len(hosts)]}"
        rows += [(issue + (40 + o) * MS, h, "rdma", pair, "stalled", 1),
                 (issue + (40 + o) * MS, h, "emulator", "eth1", "light", 0),
                 (issue + (45 + o) * MS, h, "emulator", "eth1", "link", 0),
                 (issue + (50 + o) * MS, h, "carrier", "eth1", "carrier", 0),
                 (issue + (90 + o) * MS, h, "emulator", "eth1", "light", 1),
                 (issue + (900 + o) * MS, h, "emulator", "eth1", "link", 1)]
        if h not in failed:
            rows += [(issue + (1000 + o) * MS, h, "carrier", "eth1", "carrier", 1),
                     (issue + (1200 + o) * MS, h, "rdma", pair, "resumed", 1160)]
        bd.append(f"{RUN},1,ring-2,{h},eth1,{'failed' if h in failed else 'ok'},{issue},"
                  f"{'' if h in failed else 1200 + o}")
    rows.sort()
    with open(os.path.join(folder, "timeline.csv"), "w") as f:
        f.write("t_ns,host,source,subject,signal,value,unit,run,iteration\n")
        for t, h, src, subj, sig, v in rows:
            f.write(f"{t},{h},{src},{subj},{sig},{v},bool,{RUN},{1}\n")
    with open(os.path.join(folder, "breakdown.csv"), "w") as f:
        f.write("\n".join(bd) + "\n")
    return hosts


def describe(folder):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = ocslab_plot.main([folder, "--describe"])
    if rc != 0:
        raise AssertionError(f"ocslab_plot.py exited {rc}: {err.getvalue()}")
    return json.loads(out.getvalue())


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path}: not a PNG"
    return list(struct.unpack(">II", head[16:24]))


class TimelineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="plot-figures-")
        self.folder = os.path.join(self.tmp.name, RUN)

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_polled_carrier_bit_is_a_lane_of_its_own_below_the_announcement(self):
        write_results(self.folder, 3)
        path = os.path.join(self.folder, "timeline.csv")
        with open(path) as f:
            lines = f.read().splitlines()
        issue = T0 + 10_000 * MS
        # h1's live bit: down 42 ms after the command, back at 95 ms (the announcement: 50 / 1000).
        extra = [f"{T0 + 3},h1,carrier,eth1,carrier_bit,1,bool,{RUN},1",
                 f"{issue + 42 * MS},h1,carrier,eth1,carrier_bit,0,bool,{RUN},1",
                 f"{issue + 95 * MS},h1,carrier,eth1,carrier_bit,1,bool,{RUN},1"]
        rows = sorted(lines[1:] + extra, key=lambda r: int(r.split(",")[0]))
        with open(path, "w") as f:
            f.write("\n".join([lines[0]] + rows) + "\n")
        d = describe(self.folder)
        page = d["timeline"]["pages"][0]
        self.assertEqual(page["host_labels"]["h1"]["lanes"],
                         ["control", "light", "firmware", "carrier", "carrier bit", "rdma @h2"])
        self.assertEqual(page["host_labels"]["h2"]["lanes"], ["control", "light", "firmware", "carrier", "rdma @gpu-rack07-node-long-name"])
        bit = d["hosts"]["h1"]["interfaces"]["eth1"]["carrier bit"]
        self.assertFalse(bit["failed"])
        self.assertIn("carrier bit", page["legend"])

    def test_sixteen_hosts_fit_one_screen_with_every_lane_name_and_failure(self):
        hosts = write_results(self.folder, 16)
        d = describe(self.folder)
        pages = d["timeline"]["pages"]
        self.assertEqual(len(pages), 1)
        page = pages[0]
        self.assertEqual(page["file"], os.path.join(self.folder, "timeline.png"))
        self.assertFalse(os.path.exists(os.path.join(self.folder, "timeline-1.png")))
        width, height = png_size(page["file"])
        self.assertEqual([width, height], page["size_px"])
        self.assertLessEqual(height, ocslab_plot.TIMELINE_MAX_HEIGHT_PX)  # 1200: a 1920x1200 screen
        self.assertGreaterEqual(height, 1000)  # and not squeezed below what the rule allows
        self.assertEqual(page["hosts"], sorted(hosts, key=ocslab_plot.natural_key))  # h2 before h10
        for h in hosts:
            label = page["host_labels"][h]
            self.assertEqual(label["text"], f"{h}\neth1")
            x0, y0, x1, y1 = label["bbox_px"]
            self.assertTrue(0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height, f"{h} clipped: {label['bbox_px']}")
            peer = hosts[(hosts.index(h) + 1) % len(hosts)]
            self.assertEqual(label["lanes"], ["control", "light", "firmware", "carrier", f"rdma @{peer}"])
        marked = {(m["host"], m["lane"]) for m in page["failed_markers"]}
        expected = {(h, lane) for h in FAILED for lane in
                    ("carrier", f"rdma @{hosts[(hosts.index(h) + 1) % len(hosts)]}")}
        self.assertEqual(marked, expected)
        self.assertIn("never came back (still down at the window's end)", page["legend"])
        for h in hosts:
            lanes = d["hosts"][h]["interfaces"]["eth1"]
            self.assertEqual(lanes["carrier"]["failed"], h in FAILED)
            self.assertFalse(lanes["light"]["failed"])  # light came back: only carrier and RDMA count
        # The window starts at most 50 ms before the command, and shows every edge.
        x0_ms, x1_ms = page["xlim_ms"]
        self.assertGreaterEqual(x0_ms, -ocslab_plot.LEAD_MAX_NS / MS)
        self.assertLess(x0_ms, 0)
        self.assertEqual(d["window_ms"], page["xlim_ms"])
        self.assertGreater(x1_ms, 1200 + 7 * 15)
        self.assertEqual(page["x_tick_labels"], {"top": True, "bottom": True})

    def test_forty_hosts_make_three_pages_of_at_most_sixteen(self):
        hosts = write_results(self.folder, 40)
        # A one-page drawing from before must not be left beside the pages.
        open(os.path.join(self.folder, "timeline.png"), "wb").close()
        d = describe(self.folder)
        pages = d["timeline"]["pages"]
        self.assertEqual([len(p["hosts"]) for p in pages], [16, 16, 8])
        self.assertEqual([h for p in pages for h in p["hosts"]], sorted(hosts, key=ocslab_plot.natural_key))
        for k, page in enumerate(pages, 1):
            self.assertEqual(page["file"], os.path.join(self.folder, f"timeline-{k}.png"))
            self.assertEqual(png_size(page["file"]), page["size_px"])
            self.assertLessEqual(page["size_px"][1], ocslab_plot.TIMELINE_MAX_HEIGHT_PX)
            self.assertEqual(sorted(page["host_labels"]), sorted(page["hosts"]))
        self.assertFalse(os.path.exists(os.path.join(self.folder, "timeline.png")))
        self.assertEqual({m["host"] for p in pages for m in p["failed_markers"]}, FAILED)
        self.assertGreater(pages[2]["lane_px"], pages[0]["lane_px"])  # 8 hosts get thicker lanes

    def test_a_phase_step_window_marks_only_the_lanes_that_never_came_back(self):
        # A phase run draws the step around the command (here -30 to 300 ms), which ends before
        # any carrier is back at 1000 ms: only h5 and h12, down for the whole iteration, are marked.
        hosts = write_results(self.folder, 16)
        for name in ("timeline.csv", "breakdown.csv"):
            path = os.path.join(self.folder, name)
            with open(path) as f:
                text = f.read().replace("ring-2", "on-demand topo1")
            with open(path, "w") as f:
                f.write(text)
        os.makedirs(os.path.join(self.folder, "on-demand"))
        issue = T0 + 10_000 * MS
        with open(os.path.join(self.folder, "on-demand", "timeline.csv"), "w") as f:
            f.write("t_ns,host,source,subject,signal,value,unit,run,iteration\n")
            for r in range(4):
                f.write(f"{issue - 30 * MS},h{r + 1},collbench,r{r}/dp-s0/allreduce#0,op_start,1,bool,x,3\n"
                        f"{issue + 300 * MS},h{r + 1},collbench,r{r}/dp-s0/allreduce#0,op_end,1,bool,x,3\n")
        with open(os.path.join(self.folder, "phase-steps.csv"), "w") as f:
            f.write("mode,step,warmup,step_ms,compute_ms,comm_ms,wait_ms,reconfigurations\n"
                    "on-demand,3,0,330,0,330,0,1\n")
        d = describe(self.folder)
        self.assertEqual(d["step"]["step"], 3)
        page = d["timeline"]["pages"][0]
        self.assertLess(page["xlim_ms"][1], 1000)
        self.assertEqual({m["host"] for m in page["failed_markers"]}, FAILED)
        self.assertEqual(len(page["failed_markers"]), 2 * len(FAILED))
        self.assertEqual(len(page["host_labels"]), len(hosts))

    def test_two_hosts_keep_full_size_lanes(self):
        write_results(self.folder, 2, failed=set())
        d = describe(self.folder)
        page = d["timeline"]["pages"][0]
        # 88 + 52 px of margins, 40 px per host and 46 px per lane: below the cap, unscaled.
        self.assertEqual(page["size_px"], [1400, 88 + 52 + 2 * (40 + 5 * 46)])
        self.assertEqual(page["lane_px"], 46)
        self.assertEqual(page["failed_markers"], [])
        self.assertNotIn("never came back (still down at the window's end)", page["legend"])


def write_windows(folder, sweep_points=(50, 150, 400)):
    """A phase sweep's windows.csv as the runner writes it: native-r1 (which never switches) with
    the lab's default switching time, 100 ms, that the sweep did not contain, then on-demand and
    provisioning at each point; and its sweep.csv."""
    os.makedirs(folder, exist_ok=True)
    series = [("native-r1", 100)] + [(f"{m}-{sw}ms-r1", sw) for sw in sweep_points
                                     for m in ("on-demand", "provisioning")]
    with open(os.path.join(folder, "windows.csv"), "w") as f:
        f.write("mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch\n")
        for k, (mode, sw) in enumerate(series):
            for j in range(6):
                w = 10.0 + 40 * j + 13 * k
                f.write(f"{mode},dp-s0,1,2,1,0,{j},4,{w:.3f},{sw:.3f},{int(w > sw)}\n")
    with open(os.path.join(folder, "sweep.csv"), "w") as f:
        f.write("mode,switching_ms,repetition,steps,step_ms,step_ms_sd,relative_to_native,reconfigs_per_step,"
                "estimate_ms\nnative,,1,6,100.0,2.0,1.00,0,\n")
        for sw in sweep_points:
            for m in ("on-demand", "provisioning"):
                f.write(f"{m},{sw},1,6,{120 + sw},3.0,1.2,1,{100 + sw}\n")
    return [m for m, _ in series]


class WindowsTest(unittest.TestCase):
    def test_phase_rows_are_their_own_figure_by_the_next_ops_volume(self):
        """windows.csv with the phase-to-phase rows (kind phase): windows.png keeps the group
        windows only; windows-phases.png has each phase window by its next op's bytes and type."""
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, "dp-pp-phases")
            os.makedirs(folder)
            with open(os.path.join(folder, "windows.csv"), "w") as f:
                f.write("mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch,"
                        "kind,next_type,next_bytes\n"
                        "on-demand,dp-s0,1,2,1,0,1,4,25.000,100.000,0,group,allreduce,262144\n"
                        "on-demand,dp-s0,1,2,1,3,1,4,11.000,100.000,0,phase,allreduce,262144\n"
                        "on-demand,pp0,1,4,1,5,2,0,950.000,100.000,1,phase,sendrecv,65536\n"
                        "on-demand,dp-s1,3,2,1,4,1,5,14.000,100.000,0,phase,allreduce,262144\n")
            d = describe(folder)
            self.assertEqual(d["windows"]["series"][0]["n"], 1)  # the group window only
            ph = d["windows_phases"]
            self.assertEqual(png_size(ph["file"]), ph["size_px"])
            self.assertEqual(ph["types"], ["allreduce", "sendrecv"])
            self.assertEqual(ph["series"][0]["n"], 3)
            self.assertEqual(ph["switching_ms"], [100.0])

    def test_seven_series_seven_colours_only_the_sweeps_switching_times_legend_outside(self):
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, "dp-pp-phases-sweep")
            modes = write_windows(folder)
            d = describe(folder)
        w = d["windows"]
        self.assertEqual([s["mode"] for s in w["series"]], modes)
        colours = [s["color"] for s in w["series"]]
        self.assertEqual(len(colours), 7)
        self.assertEqual(len(set(colours)), 7, colours)
        # 100 ms is native's (the lab default, never switched): no line for it.
        self.assertEqual(w["switching_ms"], [50.0, 150.0, 400.0])
        legend, axes = w["legend_bbox_px"], w["axes_bbox_px"]
        self.assertTrue(legend[1] >= axes[3] or legend[0] >= axes[2], f"legend {legend} overlaps axes {axes}")
        self.assertLessEqual(legend[3], w["size_px"][1])

    def test_colours_stay_distinct_beyond_any_palette(self):
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, "dp-pp-phases-sweep")
            write_windows(folder, sweep_points=tuple(range(10, 160, 10)))  # 31 series
            d = describe(folder)
        styles = [(s["color"], s["linestyle"]) for s in d["windows"]["series"]]
        self.assertEqual(len(styles), 31)
        self.assertEqual(len(set(styles)), 31)
        self.assertEqual(len({c for c, _ in styles}), 31)


SURVIVAL_MATRIX = """timeout,retry_cnt,outage_ms,survived,errored,stalled,untouched,predicted_boundary_ms,softroce_boundary_ms
12,2,5,2,0,0,2,33.554,32.000
12,2,20,4,0,0,0,33.554,32.000
12,2,50,0,4,0,0,33.554,32.000
10,1,5,2,0,0,0,4.194,4.000
10,1,20,2,0,0,0,4.194,4.000
10,1,50,0,1,1,0,4.194,4.000
14,7,5,2,0,0,0,469.762,
14,7,20,1,1,0,0,469.762,
14,7,50,0,0,0,0,469.762,
"""


class SurvivalTest(unittest.TestCase):
    """survival.png from survival_matrix.csv (tests/unit/analysis/survival_test.cpp writes the
    first six rows from its hand-made timeline): rows by setting, columns by length, each
    predicted boundary placed between the columns it falls between."""

    def describe_matrix(self, with_breakdown):
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, "outages") if not with_breakdown else os.path.join(tmp, RUN)
            if with_breakdown:
                write_results(folder, 2)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "survival_matrix.csv"), "w") as f:
                f.write(SURVIVAL_MATRIX)
            d = describe(folder)
            size = png_size(d["survival"]["file"])
        return d, size

    def test_settings_rows_lengths_columns_boundaries_between_columns(self):
        d, size = self.describe_matrix(with_breakdown=False)
        s = d["survival"]
        self.assertEqual(size, s["size_px"])
        self.assertEqual(s["grid_ms"], [5.0, 20.0, 50.0])
        rows = {r["label"]: r for r in s["settings"]}
        self.assertEqual([r["label"] for r in s["settings"]], ["t10 r1", "t12 r2", "t14 r7"])
        self.assertEqual(rows["t12 r2"]["fractions"], [1.0, 1.0, 0.0])  # untouched counts as survived
        self.assertEqual(rows["t10 r1"]["fractions"], [1.0, 1.0, 0.0])  # stalled does not
        self.assertEqual(rows["t14 r7"]["fractions"], [1.0, 0.5, None])  # no rows: no colour
        # 33.554 ms: between 20 (column 1) and 50 (column 2); 4.194 ms: between 0 (the left
        # edge, -0.5) and 5 (column 0); beyond the grid or unbounded: the right edge.
        self.assertAlmostEqual(rows["t12 r2"]["predicted_x"], 1 + 13.554 / 30, places=3)
        self.assertAlmostEqual(rows["t12 r2"]["softroce_x"], 1.4, places=3)
        self.assertAlmostEqual(rows["t10 r1"]["predicted_x"], -0.5 + 0.5 * 4.194 / 5, places=3)
        self.assertEqual(rows["t14 r7"]["predicted_x"], 2.5)
        self.assertIsNone(rows["t14 r7"]["softroce_ms"])
        self.assertEqual(rows["t14 r7"]["softroce_x"], 2.5)

    def test_drawn_next_to_the_timeline_and_cdf_when_the_folder_has_both(self):
        d, _ = self.describe_matrix(with_breakdown=True)
        self.assertIn("timeline", d)
        self.assertIn("cdf", d)
        self.assertEqual(len(d["survival"]["settings"]), 3)


FIRMWARE_STUDY = """nic_model,dwell_s,interval_s,model_up_mean_ms,opus_ms,first_iteration,last_iteration,reconfigurations,rows,up,not_up,firmware_min_ms,firmware_median_ms,firmware_p90_ms,firmware_max_ms,firmware_mean_ms
cx6dx-autoneg,5,5.031,6000,6000,1,3,3,24,0,24,,,,,
cx6dx-autoneg,10,10.030,6000,6000,4,6,3,24,20,4,5400.000,8100.000,9500.000,10000.000,7900.000
cx6dx-autoneg,20,20.029,6000,6000,7,9,3,24,24,0,5500.000,6010.000,6400.000,6500.000,6020.000
cx6dx-no-autoneg,5,5.030,3000,3000,10,12,3,24,18,6,2600.000,3900.000,5600.000,6800.000,4100.000
cx6dx-no-autoneg,10,10.031,3000,3000,13,15,3,24,24,0,2700.000,3000.000,3200.000,3300.000,3010.000
cx6dx-no-autoneg,20,20.030,3000,3000,16,18,3,24,24,0,2650.000,2990.000,3150.000,3250.000,2995.000
"""


class FirmwareStudyTest(unittest.TestCase):
    """firmware_study.png from firmware_study.csv (the shape `ocslab analyze` writes for a
    firmware sweep), next to the timeline and CDF: a series per model in file order, its points
    by interval, link-up in s, the points that never came up kept with their not_up count, the
    Opus figures as reference lines, the legend under the plot."""

    def test_series_per_model_points_by_interval_opus_references(self):
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, RUN)
            write_results(folder, 2)
            with open(os.path.join(folder, "firmware_study.csv"), "w") as f:
                f.write(FIRMWARE_STUDY)
            d = describe(folder)
            f = d["firmware_study"]
            self.assertEqual(png_size(f["file"]), f["size_px"])
            self.assertIn("timeline", d)
            self.assertIn("cdf", d)
        self.assertEqual([m["nic_model"] for m in f["models"]], ["cx6dx-autoneg", "cx6dx-no-autoneg"])
        auto, plain = f["models"]
        self.assertEqual([m["opus_s"] for m in f["models"]], [6.0, 3.0])
        self.assertEqual([p["interval_s"] for p in auto["points"]], [5.031, 10.03, 20.029])
        self.assertIsNone(auto["points"][0]["median_s"])  # never up: drawn as its not_up count
        self.assertEqual(auto["points"][0]["not_up"], 24)
        self.assertEqual(auto["points"][1]["median_s"], 8.1)
        self.assertEqual(auto["points"][1]["max_s"], 10.0)
        self.assertEqual(plain["points"][2]["median_s"], 2.99)
        # the legend under the plot, never over it
        self.assertGreater(f["legend_bbox_px"][1], f["axes_bbox_px"][3])

    def test_a_malformed_file_is_named(self):
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, RUN)
            write_results(folder, 2)
            with open(os.path.join(folder, "firmware_study.csv"), "w") as f:
                f.write(FIRMWARE_STUDY.replace("5.031", "five"))
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = ocslab_plot.main([folder])
        self.assertEqual(rc, ocslab_plot.EXIT_INPUT)
        self.assertIn("firmware_study.csv:2: interval_s is not a number: 'five'", err.getvalue())


JOB_SURVIVAL = """run,setting,timeout,retry_cnt,outage_ms,dark_ms,outcome,error_after_ms,stall_ms,resume_after_light_ms,predicted_survive,softroce_survive,failure
a,timeout14.retry_cnt2,14,2,30,30.000,survived,,39.222,212.435,1,{soft},
b,timeout14.retry_cnt2,14,2,600,600.000,errored,406.781,,,0,{soft},retry counter exceeded
"""
JOB_MATRIX = """timeout,retry_cnt,outage_ms,survived,errored,stalled,untouched,predicted_boundary_ms,softroce_boundary_ms
14,2,30,1,0,0,0,134.218,{bound}
14,2,600,0,1,0,0,134.218,{bound}
"""


class JobSurvivalTest(unittest.TestCase):
    """job_survival.png from a phase workload's survival sweep (job_survival_matrix.csv, the
    matrix's columns): drawn with the phase figures; the Soft-RoCE boundary only for a run on
    Soft-RoCE (job_survival.csv's softroce_survive filled)."""

    def describe_job(self, softroce):
        with tempfile.TemporaryDirectory(prefix="plot-figures-") as tmp:
            folder = os.path.join(tmp, "job-survival")
            os.makedirs(folder)
            with open(os.path.join(folder, "job_survival.csv"), "w") as f:
                f.write(JOB_SURVIVAL.format(soft="1" if softroce else ""))
            with open(os.path.join(folder, "job_survival_matrix.csv"), "w") as f:
                f.write(JOB_MATRIX.format(bound="128.000" if softroce else ""))
            d = describe(folder)
            size = png_size(d["job_survival"]["file"])
        return d, size

    def test_one_cell_per_run_and_the_boundary_between_the_lengths(self):
        d, size = self.describe_job(softroce=True)
        j = d["job_survival"]
        self.assertEqual(size, j["size_px"])
        self.assertEqual(j["grid_ms"], [30.0, 600.0])
        self.assertEqual([s["label"] for s in j["settings"]], ["t14 r2"])
        self.assertEqual(j["settings"][0]["fractions"], [1.0, 0.0])
        self.assertAlmostEqual(j["settings"][0]["predicted_x"], (134.218 - 30) / 570, places=3)
        self.assertAlmostEqual(j["settings"][0]["softroce_ms"], 128.0)

    def test_hardware_runs_have_no_soft_roce_boundary(self):
        d, _ = self.describe_job(softroce=False)
        self.assertIsNone(d["job_survival"]["settings"][0]["softroce_ms"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        out = os.path.join(sys.argv[2], RUN)
        write_results(out, 16)
        print(json.dumps(describe(out)["timeline"]["pages"][0]["size_px"]))
        write_windows(os.path.join(sys.argv[2], "windows"))
        print(json.dumps(describe(os.path.join(sys.argv[2], "windows"))["windows"]["size_px"]))
        sys.exit(0)
    unittest.main()
