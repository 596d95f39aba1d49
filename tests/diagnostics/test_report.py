"""The HTML report of a real workflow run, opened in a real headless browser.

The run is small and real: Stan NUTS, parallel tempering (swap and round-trip
statistics) and approximate AE-HMC (flagged, with its bias measured against
NUTS) on the bundled ``mvn_mean`` program, then a ``report`` step. The page
is opened in Debian's chromium through Selenium and chromedriver; it must
load with no console errors, show its sections and figures, and request
nothing but itself and its data URIs. The screenshot goes to pytest's temp
folder, or to ``$STANACCEL_REPORT_SCREENSHOT``, to be looked at.
"""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from stanaccel.cli import main
from stanaccel.workflow import run_workflow

CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = (
    "the report's browser test needs Debian's chromium and chromium-driver "
    "(apt-get install chromium chromium-driver; `make test` installs them) and selenium "
    "(pip install -e '.[dev]')"
)

WORKFLOW = """
[workflow]
name = "report_test"
seed = 11

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 20
D = 3

[[steps]]
name = "nuts"
action = "nuts"
program = "mvn_mean"
data = "data"
chains = 2
warmup = 150
draws = 150

[[steps]]
name = "pt"
action = "sample"
method = "pt"
data = "data"
chains = 2
warmup = 150
draws = 150
levels = 3
inner = "mh"

[[steps]]
name = "ae"
action = "sample"
method = "ae-hmc"
exact = false
data = "data"
chains = 2
warmup = 150
draws = 150
epochs = 20
latent_dim = 2

[[steps]]
name = "report"
action = "report"
"""


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, mvn_program):
    folder = tmp_path_factory.mktemp("report")
    (folder / "report.toml").write_text(WORKFLOW)
    run_workflow(folder / "report.toml", output=folder / "out", progress=False)
    return folder / "out"


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None or not Path(CHROMEDRIVER).is_file():
        pytest.fail(f"chromium or {CHROMEDRIVER} not found: {INSTALL}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail(f"selenium is not installed: {INSTALL}")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1200,1000"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(run_folder, browser):
    """The report loaded in the browser, with what the browser logged and requested while loading it."""
    browser.get((run_folder / "report.html").as_uri())
    return {
        "console": browser.get_log("browser"),
        "requests": [
            json.loads(entry["message"])["message"]["params"]["request"]["url"]
            for entry in browser.get_log("performance")
            if json.loads(entry["message"])["message"]["method"] == "Network.requestWillBeSent"
        ],
    }


@pytest.mark.slow
def test_report_step_writes_one_self_contained_page(run_folder):
    html = (run_folder / "report.html").read_text()
    assert len(html) < 5_000_000
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"@import|@font-face|url\(", html, re.IGNORECASE)
    run = json.loads((run_folder / "run.json").read_text())
    assert [s["name"] for s in run["steps"]][-1] == "report"


@pytest.mark.slow
def test_page_loads_without_console_errors_or_requests(page, run_folder):
    severe = [entry for entry in page["console"] if entry["level"] == "SEVERE"]
    assert severe == []
    assert page["requests"], "the performance log recorded no request at all"
    outside = [url for url in page["requests"] if not url.startswith(("file://", "data:"))]
    assert outside == []
    assert (run_folder / "report.html").as_uri() in page["requests"]


@pytest.mark.slow
def test_sections_and_figures_are_there_and_visible(page, browser, tmp_path_factory):
    from selenium.webdriver.common.by import By

    for section in ("run", "ess-per-second", "step-nuts", "step-pt", "step-ae"):
        assert browser.find_element(By.ID, section).is_displayed(), section
    images = browser.find_elements(By.CSS_SELECTOR, "img.figure")
    assert len(images) == 2 + 3 * 3  # the summary's two, and trace, rank, convergence per sampler
    for image in images:
        browser.execute_script("arguments[0].scrollIntoView();", image)
        assert image.is_displayed(), image.get_attribute("alt")
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 0
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1200, min(height + 100, 16000))
    screenshot = Path(
        os.environ.get("STANACCEL_REPORT_SCREENSHOT", tmp_path_factory.getbasetemp() / "report.png")
    )
    browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")


@pytest.mark.slow
def test_page_shows_the_samplers_statistics_and_flags_the_approximate_one(page, browser):
    from selenium.webdriver.common.by import By

    pt = browser.find_element(By.ID, "step-pt").text
    assert "swap acceptance with the next level" in pt  # a table of the levels
    assert "round trips" in pt
    assert "× Stan NUTS (nuts)" in pt
    ae = browser.find_element(By.ID, "step-ae").text
    assert "APPROXIMATE" in ae
    assert re.search(r"Measured bias against Stan NUTS \(nuts\): .* is \d", ae)
    assert "reconstruction error" in ae
    assert "APPROXIMATE" not in browser.find_element(By.ID, "step-pt").text
    overview = browser.find_element(By.ID, "overview-table").text
    assert all(name in overview for name in ("nuts", "pt", "ae"))


@pytest.mark.slow
def test_report_command_writes_where_asked_and_names_a_folder_without_run_json(run_folder, tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no run.json" in capsys.readouterr().err
    shutil.copytree(run_folder, tmp_path / "out")
    for folder in ("pt", "ae"):  # one sampler is enough to check the command
        shutil.rmtree(tmp_path / "out" / folder)
    target = tmp_path / "elsewhere" / "page.html"
    assert main(["report", str(tmp_path / "out"), "-o", str(target)]) == 1  # steps left out: said
    assert "step 'pt' is left out" in capsys.readouterr().err
    assert "step-nuts" in target.read_text()


def test_the_schedule_table_says_what_the_pilots_found_and_where_the_ladder_was_shortened():
    from stanaccel.diagnostics.report import _schedule_table

    rounds = [
        {"scans": 2, "betas": [1, 0.5, 0.125], "rejection": [0.3, 0.9], "barrier": 1.2, "round_trips": 0,
         "round_trip_rate": 0.0, "theoretical_rate": 0.1}
    ]  # fmt: skip
    pilots = [
        {"levels": 29, "acceptance": 0.008, "span": 1.0},
        {"levels": 32, "acceptance": 0.07, "span": 0.55},
    ]
    note = "the ladder stops at beta = 0.61"
    table = _schedule_table(
        {"betas": [1, 0.8, 0.61], "barrier": 4.65, "rounds": rounds, "trajectory_pilot": pilots, "note": note}
    )
    assert table["pilots"] == [
        "29 levels over 100% of the barrier accepted 0.008",
        "32 levels over 55% of the barrier accepted 0.070",
    ]
    assert table["note"] == note and len(table["rows"]) == 1
    assert _schedule_table({"betas": [1, 0], "barrier": 1.0})["pilots"] == []


def write_tempering_run(folder: Path, levels: int = 60, ess_per_second: float = 17.81) -> Path:
    """A run folder written by hand, no sampling: a Stan NUTS step and a tempering step whose ladder
    has ``levels`` levels (placed by a schedule), their ESS per second nearly equal."""
    import arviz as az
    import numpy as np

    rng = np.random.default_rng(3)
    betas = np.geomspace(1.0, 1e-3, levels).tolist()
    swaps = np.linspace(0.05, 0.6, levels - 1).tolist()  # the first pairs below 0.1: marked low
    inner = np.linspace(0.2, 0.4, levels).tolist()
    steps = []
    for name, method, ess in (("nuts", "stan_nuts", ess_per_second), ("pt", "pt", ess_per_second + 0.004)):
        step = folder / name
        step.mkdir(parents=True)
        az.from_dict(posterior={"mu": rng.normal(size=(2, 200, 2))}).to_netcdf(str(step / "posterior.nc"))
        metrics = {
            "method": method, "sampler": "Stan NUTS" if method == "stan_nuts" else "parallel tempering",
            "exact": True, "program": "mvn_mean", "chains": 2, "draws_per_chain": 200,
            "ess_bulk_min": 356.2, "ess_tail_min": 340.0, "rhat_max": 1.002, "wall_seconds": 20.0,
            "sampling_seconds": 20.0, "ess_per_second": ess, "ess_per_second_sampling": ess + 0.01,
            "acceptance": 0.8, "converged": True, "warnings": [],
        }  # fmt: skip
        if method == "pt":
            metrics["schedule"] = {
                "betas": betas, "levels": levels, "barrier": 4.2, "step_factors": [1.0] * levels,
                "rounds": [{"scans": 64, "betas": betas, "rejection": [1 - a for a in swaps], "barrier": 4.2,
                            "round_trips": 3, "round_trip_rate": 0.02, "theoretical_rate": 0.05,
                            "inner_acceptance": inner}],
            }  # fmt: skip
            chains = [
                {"swap_acceptance": swaps, "communication_barrier": 4.2, "round_trips": 3,
                 "round_trip_rate": 0.02, "inner_acceptance": inner, "betas": betas}
            ] * 2  # fmt: skip
            (step / "statistics.json").write_text(json.dumps({"chains": chains}))
        (step / "metrics.json").write_text(json.dumps(metrics))
        steps.append({"name": name, "action": "nuts" if method == "stan_nuts" else "sample",
                      "status": "done", "cached": False, "seed": 1, "seconds": 20.0})  # fmt: skip
    run = {"workflow": "levels", "status": "done", "seed": 1, "versions": {}, "steps": steps}
    (folder / "run.json").write_text(json.dumps(run))
    return folder


@pytest.fixture(scope="module")
def long_ladder(tmp_path_factory):
    from stanaccel.diagnostics.report import write_report

    folder = write_tempering_run(tmp_path_factory.mktemp("ladder") / "out")
    return write_report(folder)


@pytest.mark.slow
def test_a_long_ladder_is_a_table_of_levels_not_a_line_of_numbers(long_ladder):
    html = long_ladder.read_text()
    parts = re.findall(r'<table class="level-table">(.*?)</table>', html, re.DOTALL)
    assert len(parts) == 2  # 60 levels: two tables of 30, side by side
    assert [part.count("<tr>") for part in parts] == [31, 31]  # a header and 30 levels
    assert html.count('<td class="low">') == 6  # swap acceptance 0.05 to 0.097 (below 0.1): 6 pairs
    statistics = re.search(r'<table class="keyvalue statistics">(.*?)</table>', html, re.DOTALL).group(1)
    assert "swap acceptance" not in statistics and "ladder (beta per level)" not in statistics
    assert "communication barrier" in statistics
    assert "the ladder of 60 levels is under" in html


def test_the_levels_table_takes_what_it_has_and_leaves_mismatched_statistics_in_the_rows(tmp_path):
    from stanaccel.diagnostics.report import _kernel_statistics

    schedule = {"betas": [1.0, 0.5, 0.1], "step_factors": [1.0, 1.2, 1.5]}
    rows, levels = _kernel_statistics(tmp_path / "absent.json", schedule)  # no statistics.json
    assert rows == [] and levels["columns"] == ["level", "beta", "inner step factor"]
    assert [[c["text"] for c in row] for row in levels["parts"][0]] == [
        ["0", "1", "1"], ["1", "0.5", "1.2"], ["2", "0.1", "1.5"]
    ]  # fmt: skip
    chains = [{"swap_acceptance": [0.3, 0.05], "inner_acceptance": [0.2, 0.3], "round_trips": 2}]
    (tmp_path / "statistics.json").write_text(json.dumps({"chains": chains}))
    rows, levels = _kernel_statistics(tmp_path / "statistics.json", schedule)
    assert levels["keys"] == ["betas", "swap_acceptance"]  # 2 inner acceptances for 3 levels: a row
    assert [label for label, _ in rows][0].startswith("round trips")
    assert any(label.startswith("inner acceptance per level") for label, _ in rows)
    assert [c["low"] for c in levels["parts"][0][1]] == [False, False, True, False]


def test_ess_bars_start_at_0_when_the_values_are_nearly_equal():
    from stanaccel.diagnostics import figures

    rows = [
        {"step": "nuts", "sampler": "Stan NUTS", "ess_per_second": 17.81, "ess_per_second_sampling": 17.812,
         "is_nuts": True},
        {"step": "pt", "sampler": "PT", "ess_per_second": 17.805, "ess_per_second_sampling": 17.82,
         "is_nuts": False},
    ]  # fmt: skip
    ax = figures.ess_per_second_figure(rows).axes[0]
    low, high = ax.get_xlim()
    assert ax.get_xscale() == "linear" and low == 0 and 17.82 < high < 1.2 * 17.82
    rows[1].update(ess_per_second=0.2, ess_per_second_sampling=float("nan"))  # across decades: log
    ax = figures.ess_per_second_figure(rows).axes[0]
    low, high = ax.get_xlim()
    assert ax.get_xscale() == "log" and (low, high) == (0.1, 100)


@pytest.mark.slow
def test_a_long_ladder_fits_the_page_in_the_browser(long_ladder, browser, tmp_path_factory):
    from selenium.webdriver.common.by import By

    browser.set_window_size(1200, 1000)
    browser.get(long_ladder.as_uri())
    width = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert width[0] <= width[1], width
    levels = browser.find_element(By.CSS_SELECTOR, "#step-pt .levels")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", levels)
    tables = browser.find_elements(By.CSS_SELECTOR, "#step-pt table.level-table")
    assert len({table.location["y"] for table in tables}) == 1  # side by side
    browser.execute_script("arguments[0].scrollIntoView();", levels)
    screenshot = tmp_path_factory.getbasetemp() / "long_ladder.png"
    browser.save_screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")
