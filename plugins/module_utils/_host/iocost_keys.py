# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The parameters of the kernel's io.cost.model and io.cost.qos, in its order, and its own cost models.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

In a file of their own (codecs.py and _concerns/iocost.py use them and re-export them) so that the controller's
calibration database code and planning filters read them without compiling codecs.py or iocost.py and what they
import, which ansible-core does from source in every worker process (make bench-fleet, benchmarks/fleet/README.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

COST_COEFS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")
QOS_PARAMS = ("rpct", "rlat", "wpct", "wlat", "min", "max")

# The kernel's own cost models (autop[] in block/blk-iocost.c; hdd and ssd_dfl read back on the lab's
# 6.1 and 6.12 kernels): what a disk runs on with ctrl=auto. docs/kernel-files.md has the table.
KERNEL_CLASSES = {
    "hdd": dict(rbps=174019176, rseqiops=41708, rrandiops=370, wbps=178075866, wseqiops=42705, wrandiops=378),
    "ssd_qd1": dict(rbps=245855193, rseqiops=61575, rrandiops=6946, wbps=141365009, wseqiops=33716,
                    wrandiops=26796),
    "ssd_dfl": dict(rbps=488636629, rseqiops=8932, rrandiops=8518, wbps=427891549, wseqiops=28755, wrandiops=21940),
    "ssd_fast": dict(rbps=3102524156, rseqiops=724816, rrandiops=778122, wbps=1742780862, wseqiops=425702,
                     wrandiops=443193),
}


def kernel_class(rotational, queue_depth):
    """The class the kernel picks for a disk (ioc_autop_idx): hdd when rotational, ssd_qd1 at queue
    depth 1, else ssd_dfl (it steps to ssd_fast only while neither model nor QoS is user-set)."""
    if rotational:
        return "hdd"
    return "ssd_qd1" if queue_depth == 1 else "ssd_dfl"
