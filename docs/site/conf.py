# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Sphinx configuration of the docs site (tests/run-docs-site.sh, `make docs`). It is the conf.py
# that `antsibull-docs sphinx-init --use-current` (2.28.0) writes, changed in three ways:
# - intersphinx reads one local inventory (written by the build script) instead of fetching four
#   from the network: the build is offline, and the generated pages only refer to three labels of
#   the Ansible docsite (see ansible_devel.inv.txt);
# - the guides in docs/*.md are parsed by myst-parser (GitHub-style heading anchors, tables);
# - the project's title.

project = 'aiinfra.io_isolation'
copyright = 'aiinfra.io_isolation contributors'

title = 'aiinfra.io_isolation'
html_short_title = 'aiinfra.io_isolation'

extensions = ['sphinx.ext.intersphinx', 'sphinx_antsibull_ext', 'myst_parser']

source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}

pygments_style = 'ansible'

highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False

display_version = False

html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

# Local file only (relative to the source directory): nothing is fetched at build time.
intersphinx_mapping = {
    'ansible_devel': ('https://docs.ansible.com/projects/ansible/devel/', '../ansible_devel.inv'),
}

# GitHub's anchors for the guides' links to their own sections (#using-poll-queues).
myst_heading_anchors = 3

default_role = 'any'

nitpicky = True
