# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Files the collection's action plugins write on the controller (the calibration and fleet reports).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile


def replace(path, data, only_if_changed=False):
    """Write ``data`` (bytes) to ``path`` whole, mode 0644; True when the file was written.

    A temporary file in the same directory renamed over the old one: a reader (a web server, a browser, the next
    job) never sees half a report. With ``only_if_changed`` an identical file is left as it is.
    """
    if only_if_changed:
        try:
            with open(path, "rb") as handle:
                if handle.read() == data:
                    return False
        except FileNotFoundError:
            pass
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True
