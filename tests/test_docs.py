"""The documentation site builds with warnings as errors, and its pages hold what they should.

The site is built into a temporary folder (about 20 s: no notebooks run; autodoc
imports the package), in one worker of `make test` while the others run tests;
``STANACCEL_DOCS_HTML`` names a site already built (``make docs``) to check instead.
"""

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.docs


class _Text(HTMLParser):
    """The visible text of a page and the targets of its links."""

    def __init__(self):
        super().__init__()
        self.parts, self.links, self._skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "a":
            self.links.append(dict(attrs).get("href", ""))

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def read_page(path: Path) -> tuple[str, list[str]]:
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", " ".join(parser.parts)), parser.links


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    built = os.environ.get("STANACCEL_DOCS_HTML")
    if built:
        return Path(built)
    out = tmp_path_factory.mktemp("docs")
    command = [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html"]
    command += ["-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the docs build failed (warnings are errors):\n{done.stderr}"
    return out / "html"


def test_index_links_every_page_and_shows_the_methods_table(site):
    text, links = read_page(site / "index.html")
    assert "Faster Bayesian sampling of expensive Stan posteriors" in text
    for method in ("nuts", "pt", "tt", "spt", "stt", "dc", "tt-approx", "ae-hmc", "latent-nuts"):
        assert f" {method} " in f" {text} ".replace("`", " "), method
    pages = ["getting-started", "own-program", "workflows", "scale-out", "troubleshooting", "studies"]
    pages += ["design", "api", "methods/index"]
    pages += [
        f"methods/{name}" for name in ("tempering", "approximations", "latent", "tuning", "gp-density", "pde")
    ]
    for page in pages:
        assert f"{page}.html" in links, page
        assert (site / f"{page}.html").is_file(), page


def test_api_page_renders_the_docstrings_with_numpydoc(site):
    page = site / "api" / "stanaccel.sampling.html"
    text, _ = read_page(page)
    html = page.read_text(encoding="utf-8")
    for name in ("sample", "SampleResult", "ConfigError", "make_config"):
        assert f'id="stanaccel.sampling.{name}"' in html, name
    assert "Parameters" in text and '<dl class="field-list' in html  # numpydoc's sections, rendered


def test_moved_readme_sections_keep_their_content(site):
    text, _ = read_page(site / "studies.html")
    assert "Measured with" in text and "vs pCN" in text  # the studies' measured tables
    own, _ = read_page(site / "own-program.html")
    assert "One precedence rule, everywhere" in own and "What a method needs of your program" in own
