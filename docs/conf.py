"""Sphinx configuration of the aces_fast documentation.

Build (warnings are errors): ``python -m sphinx -W -b html docs docs/_build/html``.
autodoc imports the *installed* aces_fast (src/ layout), so reinstall after
editing docstrings.
"""

import aces_fast

project = "aces_fast"
author = "aces_fast developers"
copyright = "aces_fast developers"
release = aces_fast.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
]

root_doc = "index"
exclude_patterns = ["_build"]
templates_path: list = []

# API pages document the public names only (aces_fast.<name>, aces_fast.datasets,
# aces_fast.evaluation); members in source order, as the modules present them.
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc Parameters sections state types and shapes
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

html_theme = "alabaster"
html_static_path: list = []
html_theme_options = {"description": "Exact, fast ACES reranking", "fixed_sidebar": True}
