# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for ansible-test's get-pip bootstrap script, which lives on a host these machines
cannot reach: put the interpreter's bundled pip in place with ensurepip, then let pip install
what ansible-test asked for (e.g. pip==24.2) from the package index."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
# In a subprocess: ensurepip.bootstrap() in-process would set PIP_CONFIG_FILE=/dev/null for us too,
# hiding the host's pip configuration (index, CA certificate) from the install below.
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "-q"] + args))
