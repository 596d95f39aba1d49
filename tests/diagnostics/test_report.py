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


def test_report_step_writes_one_self_contained_page(run_folder):
    html = (run_folder / "report.html").read_text()
    assert len(html) < 5_000_000
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"@import|@font-face|url\(", html, re.IGNORECASE)
    run = json.loads((run_folder / "run.json").read_text())
    assert [s["name"] for s in run["steps"]][-1] == "report"


def test_page_loads_without_console_errors_or_requests(page, run_folder):
    severe = [entry for entry in page["console"] if entry["level"] == "SEVERE"]
    assert severe == []
    assert page["requests"], "the performance log recorded no request at all"
    outside = [url for url in page["requests"] if not url.startswith(("file://", "data:"))]
    assert outside == []
    assert (run_folder / "report.html").as_uri() in page["requests"]


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


def test_page_shows_the_samplers_statistics_and_flags_the_approximate_one(page, browser):
    from selenium.webdriver.common.by import By

    pt = browser.find_element(By.ID, "step-pt").text
    assert "swap acceptance per neighbouring pair" in pt
    assert "round trips" in pt
    assert "× Stan NUTS (nuts)" in pt
    ae = browser.find_element(By.ID, "step-ae").text
    assert "APPROXIMATE" in ae
    assert re.search(r"Measured bias against Stan NUTS \(nuts\): .* is \d", ae)
    assert "reconstruction error" in ae
    assert "APPROXIMATE" not in browser.find_element(By.ID, "step-pt").text
    overview = browser.find_element(By.ID, "overview-table").text
    assert all(name in overview for name in ("nuts", "pt", "ae"))


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
