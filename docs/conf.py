"""Sphinx configuration of stanaccel's documentation site (``make docs``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pkg"))  # the checkout's own code

import stanaccel  # noqa: E402

project = "stanaccel"
author = "stanaccel developers"
release = version = stanaccel.__version__

extensions = [
    "myst_parser",  # the pages, in Markdown
    "numpydoc",  # NumPy-style docstrings
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",  # the API reference, from the docstrings
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
templates_path = ["_templates"]

myst_heading_anchors = 3  # [text](page.md#a-heading) links
myst_enable_extensions = ["colon_fence"]

autosummary_generate = True
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the docstrings describe the types
numpydoc_show_class_members = False  # autodoc lists them
numpydoc_class_members_toctree = False

html_theme = "pydata_sphinx_theme"
html_title = "stanaccel"
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 5,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
# The section navigation, where a section has pages (the methods, the API); none on single pages
single = [
    "index",
    "getting-started",
    "own-program",
    "workflows",
    "scale-out",
    "studies",
    "design",
    "troubleshooting",
]
html_sidebars = {page: [] for page in single}
