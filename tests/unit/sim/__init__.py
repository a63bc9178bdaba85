# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated host the unit tests run against (see README.md in this directory)."""
