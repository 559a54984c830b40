"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, no download)
while a real, short experiment (tests/e2e/live_run.toml: 2 workers, dense fp32 gradients over a
loss-free star at 20 Mb/s) writes the store from another process.

  1. the accuracy graph gains points while the run goes;
  2. a bandwidth change typed into the page becomes a control request, the running experiment
     applies it (control event in the store), the uplink times change by the factor the
     bandwidth did, and the plots mark it;
  3. the channel panel shows each link's rate falling from 20 to 5 Mb/s at that iteration,
     and the energy panel each worker's cumulative joules as the store has them;
  4. the compare view shows two runs with their compression ratio;
  5. a real LGC-PS run (experiments/lgc_ps_digits.toml, shortened) drawn with its rate on a log
     axis (switchable to linear), its three stages as bands and the cut between them;
  6. the sweep view's heat maps over a sweep's grid, and the tune view's trials (a click on one
     opens its run in the live view);
  7. a page read at a glance, for the quickstart, the LGC-PS run, a federated run and the sweep:
     every tick label of the rate axes carries its unit, no panel says "Not a ..." of the run
     shown (the panels that do not apply are hidden), each legend lists a handful of entries.

Set DASHBOARD_SCREENSHOTS=1 to save the README's screenshots under docs/img/, and
DASHBOARD_SHOTS_DIR=FOLDER to save every view at 1600 and 1280 px wide there.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip(f"no {CHROMIUM} / {CHROMEDRIVER}: run .ci/install-browser.sh", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import ElementClickInterceptedException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from testbed.records.store import Store  # noqa: E402

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = Path(__file__).with_name("live_run.toml")
SHOTS = ROOT / "docs" / "img" if os.environ.get("DASHBOARD_SCREENSHOTS") else None
VIEWS = Path(os.environ["DASHBOARD_SHOTS_DIR"]) if os.environ.get("DASHBOARD_SHOTS_DIR") else None
WIDTH, WIDTHS = 1600, (1600, 1280)   # the page's width in the tests, and the views' screenshots
LEGEND_MAX = 6                        # "a handful" of legend entries per figure by default
START_MBPS, NEW_MBPS = 20.0, 5.0
# The synthetic comparison run sends 1/50 of the live fp32 run's bits per iteration.
SPARSE_FRACTION = 50


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def fresh_store(path: Path) -> Store:
    return Store(path)


def stop_live_run(live: dict) -> None:
    proc = live["proc"]
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # the run ends as "stopped"
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The store, the live run (a real `testbed run` process) and the served dashboard."""
    tmp = tmp_path_factory.mktemp("e2e")
    store_path = tmp / "runs.db"
    Store(store_path).close()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    log = open(tmp / "run.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(RUN_FILE), "--store",
                             str(store_path), "--quiet", "--set", "run.iterations=20000"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    from werkzeug.serving import make_server

    from dashboards.app import QuietHandler, create_app

    # The page shows the store path as given: a user's `testbed dashboard --store runs.db` gives a
    # name in the working directory, so the app is given that (the README's screenshots show it).
    cwd = os.getcwd()
    os.chdir(tmp)
    # One point per iteration however far the run is when a test loads a page (a slow, loaded
    # machine loads them late): the per-link and per-node sums below compare points with rows.
    # Binning long runs has its own test (tests/dashboards: test_long_runs_are_drawn_in_complete_bins).
    app = create_app(Path(store_path.name), live_interval_ms=1000, runs_interval_ms=1000,
                     max_points=1_000_000)
    server = make_server("127.0.0.1", 0, app.server, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    reader = Store(store_path)
    try:
        def live_run():
            runs = [r for r in reader.runs() if r["name"] == "e2e-live"]
            return runs[0] if runs and runs[0]["last_iteration"] is not None else None

        run = wait_for(live_run, 90, f"the experiment to start (log: {tmp / 'run.log'})")
        yield {"url": f"http://127.0.0.1:{server.server_port}", "store": reader, "run_id": run["id"],
               "proc": proc, "path": store_path}
    finally:
        stop_live_run({"proc": proc})
        log.close()
        server.shutdown()
        thread.join(timeout=10)
        app.board.close()
        reader.close()
        os.chdir(cwd)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", f"--window-size={WIDTH},1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "SEVERE"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def js_graph(driver, graph_id: str, expr: str):
    """Evaluate `expr` on the plotly div inside dcc.Graph `graph_id` (`g`, and `acc`: its test
    accuracy trace, if any); None until plotly has drawn it."""
    return driver.execute_script(
        f"const g = document.querySelector('#{graph_id} .js-plotly-plot');"
        "if (!g || !g.data) return null;"
        "const acc = g.data.find(t => t.uid === 'test_accuracy') || {x: []};"
        f"return {expr};")


def text(driver, element_id: str) -> str:
    """The visible text of an element, "" while the page has not drawn it yet."""
    found = driver.find_elements(By.ID, element_id)
    return found[0].text if found else ""


def screenshot(driver, name: str, height: int = 2400) -> None:
    """The README's screenshot `name` (docs/img/NAME.png) when DASHBOARD_SCREENSHOTS is set."""
    if SHOTS is None:
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.set_window_size(WIDTH, height)
    time.sleep(1.5)  # let plotly redraw at the new size
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    driver.set_window_size(WIDTH, 1000)


def view_shots(driver, name: str) -> None:
    """The whole page at each of WIDTHS, into DASHBOARD_SHOTS_DIR (when set)."""
    if VIEWS is None:
        return
    VIEWS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        driver.set_window_size(width, 1000)
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(width, min(height + 120, 6000))
        time.sleep(1.5)
        driver.save_screenshot(str(VIEWS / f"{name}-{width}.png"))
    driver.set_window_size(WIDTH, 1000)


def glance(driver) -> dict:
    """What the page shows of the live view, read from the DOM: the visible figures; each
    one's legend entries; the rate figure's tick labels of either y axis; every note."""
    return driver.execute_script("""
        const out = {visible: [], legends: {}, notes: [], rate_y: [], rate_y2: []};
        for (const g of document.querySelectorAll('.grid .js-plotly-plot')) {
            const card = g.closest('.graph');
            if (!card || card.offsetParent === null) continue;
            const id = card.id.replace('-graph', '');
            out.visible.push(id);
            out.legends[id] = g.querySelectorAll('.legend .traces').length;
            for (const a of g.querySelectorAll('.annotation-text')) out.notes.push(a.textContent);
        }
        const rate = document.querySelector('#rate-graph .js-plotly-plot');
        if (rate) {
            out.rate_y = Array.from(rate.querySelectorAll('.ytick text')).map(t => t.textContent);
            out.rate_y2 = Array.from(rate.querySelectorAll('.y2tick text')).map(t => t.textContent);
        }
        return out;""")


def assert_reads_at_a_glance(driver, hidden: set[str] = frozenset()) -> dict:
    """Units on the rate axes' tick labels, no "Not a ..." panel, a handful of legend entries."""
    seen = wait_for(lambda: (g := glance(driver)) and g["rate_y"] and g["rate_y2"] and g, 20,
                    "the rate figure's tick labels")
    assert all(re.fullmatch(r"[\d.]+ [kMGT]?bit", t) for t in seen["rate_y"]), seen["rate_y"]
    assert all(re.fullmatch(r"[\d.]+ [kMGT]?B", t) for t in seen["rate_y2"]), seen["rate_y2"]
    assert not [n for n in seen["notes"] if n.startswith("Not a")], seen["notes"]
    assert hidden.isdisjoint(seen["visible"]) and "rate" in seen["visible"], seen["visible"]
    assert max(seen["legends"].values()) <= LEGEND_MAX, seen["legends"]
    return seen


def severe_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if "favicon" not in e["message"]]


def test_accuracy_graph_gains_points_while_the_run_goes(live, browser):
    browser.get(live["url"])
    wait_for(lambda: "e2e-live" in text(browser, "run-select"), 20,
             "the run picker to choose the live run")
    first = wait_for(lambda: js_graph(browser, "accuracy-graph", "acc.x.length"), 20,
                     "the first accuracy points")
    later = wait_for(lambda: (n := js_graph(browser, "accuracy-graph", "acc.x.length")) > first and n,
                     20, "the accuracy graph to gain points")
    assert later > first
    xs = js_graph(browser, "accuracy-graph", "Array.from(acc.x)")
    assert xs == sorted(xs) and len(set(xs)) == len(xs)  # appended in order, never twice
    assert "is running" in text(browser, "live-message")
    assert_reads_at_a_glance(browser, hidden={"federated"})   # a data-parallel run
    assert severe_errors(browser) == []


def test_bandwidth_change_from_the_page_reaches_the_run(live, browser):
    store, rid = live["store"], live["run_id"]
    field = browser.find_element(By.ID, "control-bandwidth")
    field.clear()
    field.send_keys(f"{NEW_MBPS:g}")
    browser.find_element(By.ID, "control-apply").click()
    wait_for(lambda: "requested" in text(browser, "control-message"), 15,
             "the page to confirm the request")

    (control,) = wait_for(lambda: [c for c in store.controls(rid) if c["status"] != "pending"] or None,
                          30, "the run to apply the control")
    assert control["status"] == "applied", control["message"]
    assert control["target"] == "*" and control["changes"] == {"bandwidth_mbps": NEW_MBPS}
    at = control["applied_iteration"]
    events = [e for e in store.events(rid) if e["kind"] == "control"]
    assert [(e["iteration"], e["detail"]["changes"]) for e in events] == [(at, {"bandwidth_mbps": NEW_MBPS})]

    rows = wait_for(lambda: (r := store.iterations(rid)) and r[-1]["iteration"] >= at + 5 and r, 30,
                    "iterations after the change")
    before = [r["uplink_s"] for r in rows if r["iteration"] < at]
    after = [r["uplink_s"] for r in rows if r["iteration"] >= at]
    # Same dense message every iteration, no loss: one uplink time per bandwidth.
    assert max(before) - min(before) < 1e-9 and max(after) - min(after) < 1e-9
    # The uplink is bandwidth-bound (~0.09 s against a 1 ms delay), so 20 -> 5 Mb/s makes it
    # 4x longer, less the fixed delay's share.
    assert 3.5 < after[0] / before[0] <= 4.0

    # The page marks the change on the accuracy plot and shows the new bandwidth on the map.
    wait_for(lambda: at in (js_graph(browser, "accuracy-graph",
                                     "(g.layout.shapes || []).map(s => s.x0)") or []),
             15, "the control mark on the accuracy graph")
    wait_for(lambda: f"every link {NEW_MBPS:g} Mb/s" in (js_graph(
        browser, "topology-graph", "g.layout.title.text") or ""),
        15, "the new bandwidth on the topology")
    wait_for(lambda: "applied" in text(browser, "controls-table"), 15,
             "the control's status in the page")
    assert severe_errors(browser) == []
    browser.execute_script("document.getElementById('control-apply').scrollIntoView()")
    screenshot(browser, "dashboard-steer", height=2600)


def link_trace(driver, graph_id: str, uid: str, expr: str):
    """Evaluate `expr` on the trace `t` of graph `graph_id` whose uid is `uid` (None if absent)."""
    return js_graph(driver, graph_id, f"(t => t ? {expr} : null)(g.data.find(t => t.uid === '{uid}'))")


def test_channel_panel_shows_the_new_rate_of_every_link(live, browser):
    """Rate while sending = bytes on the wire / airtime, per link: the star's links run at
    20 Mb/s before the control's iteration and at 5 Mb/s from it on (no loss on this star)."""
    from dashboards.style import series_uid

    store, rid = live["store"], live["run_id"]
    (control,) = [c for c in store.controls(rid) if c["status"] == "applied"]
    at = control["applied_iteration"]
    vt = {r["iteration"]: r["virtual_time_s"] for r in store.iterations(rid)}
    for link in ("w0->server", "server->w1"):
        uid = series_uid("rate", link)
        wait_for(lambda: (link_trace(browser, "channel-graph", uid, "t.x.length") or 0) > at + 3, 20,
                 f"rate points of {link} after the change")
        xs, ys = link_trace(browser, "channel-graph", uid, "[Array.from(t.x), Array.from(t.y)]")
        before = [y for x, y in zip(xs, ys) if x < vt[at]]
        after = [y for x, y in zip(xs, ys) if x >= vt[at]]   # x: virtual time at an iteration's end
        assert len(before) == at and len(after) > 3
        assert all(abs(y - START_MBPS) < 1e-6 for y in before), before[:5]
        assert all(abs(y - NEW_MBPS) < 1e-6 for y in after), after[:5]
        loss = link_trace(browser, "channel-graph", series_uid("loss", link), "Array.from(t.y)")
        assert loss and set(loss) == {0}
    assert js_graph(browser, "channel-graph", "g.layout.xaxis3.title.text") == "virtual time (s)"
    # the control is marked on the channel panel at its virtual time
    marks = js_graph(browser, "channel-graph", "(g.layout.shapes || []).map(s => s.x0)")
    control_vt = [e["virtual_time_s"] for e in store.events(rid) if e["kind"] == "control"]
    assert marks == control_vt
    assert severe_errors(browser) == []


def test_energy_panel_shows_each_workers_cumulative_joules(live, browser):
    """The energy panel, per worker over virtual time: its cumulative joules are the running
    sum of the store's node_iterations.energy_j (radio + compute, channels/energy.py)."""
    from dashboards.style import series_uid

    store, rid = live["store"], live["run_id"]
    for w in ("w0", "w1"):
        uid = series_uid("cumj", w)
        wait_for(lambda: (link_trace(browser, "energy-graph", uid, "t.x.length") or 0) > 3, 20,
                 f"energy points of {w}")
        xs, ys = link_trace(browser, "energy-graph", uid, "[Array.from(t.x), Array.from(t.y)]")
        # the run is live: read the node rows first, so every iteration they name has its row
        # (both are committed in one transaction) when the iterations are read after them
        nodes = [r for r in store.node_iterations(rid) if r["node"] == w]
        vt = {r["iteration"]: r["virtual_time_s"] for r in store.iterations(rid)}
        joules = {vt[r["iteration"]]: r["energy_j"] for r in nodes}
        total, want = 0.0, []
        for x in sorted(joules):
            total += joules[x]
            want.append((x, total))
        assert [(x, pytest.approx(y)) for x, y in zip(xs, ys)] == want[:len(xs)]
        assert ys[-1] > 0
    assert js_graph(browser, "energy-graph", "g.layout.xaxis2.title.text") == "virtual time (s)"
    assert severe_errors(browser) == []


def test_compare_view_with_two_runs(live, browser):
    store, rid = live["store"], live["run_id"]
    live_bits = store.iterations(rid)[0]
    dense = live_bits["bits_up"] + live_bits["bits_down"]
    # A finished sparse run beside the live fp32 one, written with the store's API.
    with Store(live["path"]) as writer:
        other = writer.create_run("sparse-ref", {}, method="topk", topology="star", workers=2)
        for i in range(20):
            writer.append_iteration(other, {"iteration": i, "virtual_time_s": 0.01 * (i + 1),
                                            "bits_up": dense // SPARSE_FRACTION, "bits_down": 0})
            if i % 5 == 4:
                writer.append_eval(other, {"iteration": i, "virtual_time_s": 0.01 * (i + 1),
                                           "test_accuracy": 0.2 + 0.03 * i})
        writer.finish_run(other, "completed")
    wait_for(lambda: "sparse-ref" in text(browser, "runs-table"), 15,
             "the new run in the runs table")
    boxes = browser.find_elements(By.CSS_SELECTOR, "#runs-table input[type=checkbox]")
    assert len(boxes) == 2
    for box in boxes:
        box.click()
    browser.find_element(By.XPATH, "//*[@id='view-tabs']//*[text()='Compare']").click()

    def compare_rows():
        cells = browser.find_elements(By.CSS_SELECTOR, "#compare-table td")
        values = [c.text for c in cells]
        return values if "sparse-ref" in values and "e2e-live" in values else None

    cells = wait_for(compare_rows, 20, "both runs in the compare table")
    # Compression ratio: the fp32 run's bits per iteration over the sparse run's.
    ratio = dense / (dense // SPARSE_FRACTION)
    assert f"{ratio:.1f}" in cells and "1.0" in cells
    assert wait_for(lambda: js_graph(browser, "compare-graph", "g.data.length") == 4, 15,
                    "two runs overlaid (accuracy and bits traces)")
    assert "Compression ratio" in text(browser, "compare-message")
    assert severe_errors(browser) == []


# The shipped LGC-PS file, shortened, with the MLP (4x less wall time than its CNN here), over
# Rayleigh-fading links whose rate follows their SNR (an MCS table) and lose packets.
LGC_SETS = ["run.iterations=60", "run.eval_every=10", "run.device=cpu", "network.workers=4",
            "model.name=mlp", "compression.warmup_iterations=25", "compression.ae_iterations=10",
            "compression.ae_steps=5",
            'network.link.loss={ model = "fading", fading = "rayleigh", distance_m = 40.0, '
            'rate = "mcs", coherence_ms = 5.0 }']


def clicked(element) -> bool:
    """Click `element`; False while something else (a menu closing, a redraw) lies over it."""
    try:
        element.click()
        return True
    except ElementClickInterceptedException:
        element.parent.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        return False


def choose(driver, dropdown_id: str, label_part: str) -> None:
    """Pick the option of a dcc.Dropdown whose text contains `label_part`."""
    wait_for(lambda: clicked(driver.find_element(By.ID, dropdown_id)), 10, f"{dropdown_id} to open")
    option = wait_for(lambda: next((o for o in driver.find_elements(By.CSS_SELECTOR, "[role=option]")
                                    if label_part in o.text), None), 10, f"option {label_part!r}")
    wait_for(lambda: clicked(option), 10, f"option {label_part!r} to take the click")


def test_lgc_run_rate_on_a_log_axis_with_its_stages(live, browser):
    """A real LGC-PS run: DGC warm-up [0, 25), autoencoder training [25, 35), LGC after. The
    page draws its rate on a log axis, the stages as three bands where the store's stage events
    say, and the cut: the LGC stage's uplink is a small fraction of the first warm-up step's.
    Its links fade: the channel panel has an SNR row with each link's stored SNR."""
    from testbed.configuration.loading import load_config
    from testbed.experiment import Experiment

    stop_live_run(live)  # the remaining tests need no running run: free its core
    with Store(live["path"]) as writer:  # in this process: no second start-up of torch
        Experiment(load_config(ROOT / "experiments" / "lgc_ps_digits.toml", LGC_SETS), writer).run()
    store = live["store"]
    lgc = [r for r in store.runs() if r["name"] == "lgc_ps_digits"][-1]
    assert lgc["status"] == "completed"
    stages = [(e["iteration"], e["detail"]["stage"]) for e in store.events(lgc["id"]) if e["kind"] == "stage"]
    assert stages == [(0, "warmup"), (25, "ae_train"), (35, "lgc")]
    browser.find_element(By.XPATH, "//*[@id='view-tabs']//*[text()='Live run']").click()
    choose(browser, "run-select", "lgc_ps_digits")
    wait_for(lambda: "lgc_ps_digits" in text(browser, "live-message")
             and "completed" in text(browser, "live-message"), 20, "the LGC run in the live view")
    bands = wait_for(lambda: js_graph(browser, "rate-graph",
                                      "g.layout.shapes.filter(s => s.type === 'rect').map(s => [s.x0, s.x1])"),
                     20, "the stage bands")
    assert bands == [[0, 25], [25, 35], [35, 59]]
    assert js_graph(browser, "rate-graph", "g.layout.yaxis.type") == "log"
    xs, ys = link_trace(browser, "rate-graph", "bits_up", "[Array.from(t.x), Array.from(t.y)]")
    lgc_bits = [y for x, y in zip(xs, ys) if x >= 35]
    assert len(lgc_bits) == 25 and max(lgc_bits) < ys[0] / 20, (ys[0], max(lgc_bits))
    # the channel panel: SNR per link as stored (mean over the iteration's transmissions)
    from dashboards.style import series_uid

    assert js_graph(browser, "channel-graph", "g.layout.yaxis4.title.text") == "SNR (dB)"
    for link in ("w2->server", "server->w2"):
        stored = [r["snr_db"] for r in store.links(lgc["id"]) if f"{r['src']}->{r['dst']}" == link]
        drawn = link_trace(browser, "channel-graph", series_uid("snr", link), "Array.from(t.y)")
        assert len(stored) == 60 and drawn == pytest.approx(stored)
        assert max(stored) - min(stored) > 3  # it fades
    # the scale control redraws the axis linear and back
    browser.find_element(By.XPATH, "//*[@id='rate-scale']//label[contains(., 'linear')]").click()
    wait_for(lambda: js_graph(browser, "rate-graph", "g.layout.yaxis.type") == "linear", 15,
             "a linear rate axis")
    browser.find_element(By.XPATH, "//*[@id='rate-scale']//label[contains(., 'log')]").click()
    wait_for(lambda: js_graph(browser, "rate-graph", "g.layout.yaxis.type") == "log", 15,
             "the log rate axis again")
    assert severe_errors(browser) == []
    assert_reads_at_a_glance(browser, hidden={"federated"})
    screenshot(browser, "dashboard-live")
    view_shots(browser, "lgc-ps")

    # The same file, seed and channel with fp32 gradients: the compare view's ratio is the
    # store's bits per iteration of one over the other.
    with Store(live["path"]) as writer:
        Experiment(load_config(ROOT / "experiments" / "lgc_ps_digits.toml",
                               LGC_SETS + ["compression.method=none", "run.name=fp32_digits"]), writer).run()
    totals = {r["name"]: r["total_bits"] / (r["last_iteration"] + 1) for r in store.runs()}
    ratio = totals["fp32_digits"] / totals["lgc_ps_digits"]
    wait_for(lambda: "fp32_digits" in text(browser, "runs-table"), 15, "the fp32 run in the table")
    for row in browser.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr"):
        box = row.find_elements(By.CSS_SELECTOR, "input[type=checkbox]")
        wanted = "lgc_ps_digits" in row.text or "fp32_digits" in row.text
        if box and wanted != box[0].is_selected():
            box[0].click()
    browser.find_element(By.XPATH, "//*[@id='view-tabs']//*[text()='Compare']").click()
    wait_for(lambda: (t := text(browser, "compare-table")) and "fp32_digits" in t and "e2e-live" not in t,
             20, "LGC-PS and fp32 compared")
    assert f"{ratio:.1f}" in text(browser, "compare-table").split()
    assert severe_errors(browser) == []
    screenshot(browser, "dashboard-compare", height=1300)


# The quickstart file as shipped (4 workers, top-k 1%, a shared 20 Mb/s cell with 1% loss),
# shortened, with the MLP; and the federated file on digits, small.
QUICK_SETS = ["run.iterations=60", "run.eval_every=10", "model.name=mlp", "run.device=cpu"]
FED_SETS = ['data.dataset="digits"', "federated.clients=20", "federated.clients_per_round=4",
            "federated.local_steps=2", "run.iterations=8", "run.eval_every=2", 'model.name="mlp"',
            'run.device="cpu"', "network.link.bandwidth_mbps=20.0"]


def show_run(driver, name: str) -> None:
    driver.execute_script("window.scrollTo(0, 0)")
    driver.find_element(By.XPATH, "//*[@id='view-tabs']//*[text()='Live run']").click()
    choose(driver, "run-select", name)
    wait_for(lambda: name in text(driver, "live-message") and "completed" in text(driver, "live-message"),
             20, f"the run {name} in the live view")


def test_quickstart_and_federated_runs_read_at_a_glance(live, browser):
    """The quickstart: the federated panel hidden, the four workers one band in the rate panel
    with one of them picked on its own, and the same at 1280 px. A federated run: its panel
    shown, its x axes in rounds, its message in rounds and clients' figures."""
    from testbed.configuration.loading import load_config
    from testbed.experiment import Experiment

    with Store(live["path"]) as writer:
        for file, sets in (("quickstart.toml", QUICK_SETS), ("fed_fashion.toml", FED_SETS)):
            cfg = load_config(ROOT / "experiments" / file, sets)
            Experiment(cfg, writer).run()
    show_run(browser, "quickstart")
    seen = assert_reads_at_a_glance(browser, hidden={"federated"})
    assert {"accuracy", "rate", "latency", "energy", "channel", "topology"} <= set(seen["visible"])
    rate_names = js_graph(browser, "rate-graph", "g.data.filter(t => t.visible !== false).map(t => t.name)")
    assert "uplink per worker: mean, range of 4" in rate_names and "w1 uplink" not in rate_names
    choose(browser, "focus-select", "w1")
    wait_for(lambda: "w1 uplink" in (js_graph(
        browser, "rate-graph", "g.data.filter(t => t.visible !== false).map(t => t.name)") or []),
        15, "the picked worker's own uplink")
    assert_reads_at_a_glance(browser, hidden={"federated"})
    browser.set_window_size(1280, 1000)
    try:
        time.sleep(1.0)
        assert_reads_at_a_glance(browser, hidden={"federated"})
    finally:
        browser.set_window_size(WIDTH, 1000)
    choose(browser, "focus-select", "none")
    view_shots(browser, "quickstart")

    show_run(browser, "fed_fashion")
    seen = assert_reads_at_a_glance(browser)
    assert "federated" in seen["visible"]
    assert js_graph(browser, "rate-graph", "g.layout.xaxis2.title.text") == "round"
    assert "8 rounds" in text(browser, "live-message")
    assert "20 clients (4 per round)" in text(browser, "runs-table")
    assert severe_errors(browser) == []
    view_shots(browser, "federated")


def test_sweep_view_heat_maps(live, browser):
    """Six runs recorded as `testbed sweep` records them (bandwidth x ratio x seed), written with
    the store's API: the heat maps average the seeds of each (bandwidth, ratio) cell."""
    with Store(live["path"]) as writer:
        for bw, ratio, seed, accs in [(2, 0.01, 0, (0.5, 0.8)), (2, 0.01, 1, (0.6, 0.9)),
                                      (20, 0.01, 0, (0.7, 0.95)), (20, 0.01, 1, (0.91, 0.97)),
                                      (2, 0.1, 0, (0.4, 0.6)), (20, 0.1, 0, (0.3, 0.5))]:
            rid = writer.create_run(f"grid[bandwidth_mbps={bw},ratio={ratio},seed={seed}]", {}, method="topk")
            writer.set_sweep(rid, "grid", {"bandwidth_mbps": str(bw), "ratio": str(ratio), "seed": str(seed)})
            for i, acc in enumerate(accs):
                writer.append_eval(rid, {"iteration": i, "virtual_time_s": (i + 1) * 20 / bw,
                                         "test_accuracy": acc})
            writer.finish_run(rid, "completed")
    browser.find_element(By.XPATH, "//*[@id='view-tabs']//*[text()='Sweep']").click()
    acc, ttt, energy = wait_for(lambda: js_graph(browser, "sweep-graph",
                                                 "g.data.length === 3 && g.data.map(t => t.z)"),
                                20, "the sweep's heat maps")
    assert js_graph(browser, "sweep-graph", "[g.data[0].x, g.data[0].y]") == [["2", "20"], ["0.01", "0.1"]]
    assert acc[0] == [pytest.approx(0.85), pytest.approx(0.96)]
    assert acc[1] == [pytest.approx(0.6), pytest.approx(0.5)]
    # time to 90%: at 2 Mb/s seed 1 only (its 2nd eval, 20 s); at 20 Mb/s seed 0 at 2 s, seed 1 at 1 s
    assert ttt[0] == [pytest.approx(20.0), pytest.approx(1.5)] and ttt[1] == [None, None]
    # these runs recorded no energy: the energy map is blank (tests/dashboards has the sums)
    assert energy == [[None, None], [None, None]]
    assert "each cell averages over seed" in text(browser, "sweep-message")
    assert severe_errors(browser) == []
    view_shots(browser, "sweep")


def test_tune_view_marks_pruned_trials_and_a_click_opens_the_trial(live, browser):
    """Three trials of a study recorded as `testbed tune` records them (one pruned), written
    with the store's API: the objective by trial shows them, the pruned one as an x; a click on
    a completed trial's point opens its run in the live view."""
    with Store(live["path"]) as writer:
        writer.record_sweep("tune-e2e", "bwstudy", {
            "kind": "tune", "target": 0.9, "objectives": [["virtual_s_to_target", "min"]],
            "constraints": [], "labels": {"network.link.bandwidth_mbps": "bandwidth_mbps"},
            "params": [{"key": "network.link.bandwidth_mbps", "kind": "float", "low": 0.5,
                        "high": 50, "log": True, "choices": []}]})
        ids = []
        for trial, (bw, accs, status) in enumerate([(5.0, (0.5, 0.95), "completed"),
                                                     (0.6, (0.1,), "pruned"),
                                                     (9.0, (0.92,), "completed")]):
            rid = writer.create_run(f"bwstudy[trial={trial}]", {}, method="topk")
            writer.set_sweep(rid, "bwstudy", {"bandwidth_mbps": bw}, trial=trial)
            for i, acc in enumerate(accs):
                writer.append_iteration(rid, {"iteration": 10 * i + 9, "bits_up": 1000,
                                              "virtual_time_s": 20 / bw * (i + 1)})
                writer.append_eval(rid, {"iteration": 10 * i + 9, "virtual_time_s": 20 / bw * (i + 1),
                                         "test_accuracy": acc})
            writer.finish_run(rid, status)
            ids.append(rid)
    browser.get(live["url"])
    tab = wait_for(lambda: browser.find_elements(By.XPATH, "//*[@id='view-tabs']//*[text()='Tune']"),
                   30, "the page's tabs")
    tab[0].click()
    symbols = wait_for(lambda: js_graph(browser, "tune-history-graph",
                                        "g.data.length >= 2 && g.data.map(t => [t.x, t.marker ? t.marker.symbol : null])"),
                       20, "the tune view's trials")
    assert [[0, 2], "circle"] in symbols and [[1], "x"] in symbols
    assert "3 trials of study bwstudy: 2 completed, 1 pruned" in text(browser, "tune-message")
    # a person's click on trial 2's point (its marker is the second of the first trace)
    point = wait_for(lambda: (browser.find_elements(
        By.CSS_SELECTOR, "#tune-history-graph .scatterlayer .trace:first-child .points path")
        or [None, None])[1], 10, "trial 2's point")
    ActionChains(browser).move_to_element(point).pause(0.5).click().perform()
    wait_for(lambda: f"#{ids[2]} bwstudy[trial=2]" in text(browser, "run-select"), 20,
             "the trial's run in the live view's picker")
    assert browser.find_element(By.ID, "live-message").is_displayed()
    assert severe_errors(browser) == []
