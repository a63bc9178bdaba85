# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The parameters of the kernel's io.cost.model and io.cost.qos, in its order.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

In a file of their own (codecs.py uses them and re-exports them) so that the controller's calibration database
code reads them without compiling codecs.py, which ansible-core does from source in every worker process
(make bench-fleet, benchmarks/fleet/README.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

COST_COEFS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")
QOS_PARAMS = ("rpct", "rlat", "wpct", "wlat", "min", "max")
