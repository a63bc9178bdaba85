# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: calibration_db
short_description: Read the iocost calibration database (one JSON file per hardware class)
version_added: 0.1.0
author:
  - aiinfra platform engineering (@aiinfra)
description:
  - Reads every C(*.json) file of each directory given, on the controller, in file-name order, and returns the
    entries (the C(calibration_entry) filter makes them; the P(aiinfra.io_isolation.calibration_entry_file#filter)
    and P(aiinfra.io_isolation.calibration_entry_json#filter) filters give their files' names and content).
  - A directory that does not exist is an empty database (the database starts empty). Hidden files and files not
    ending in C(.json) are ignored.
  - Every file must be a valid entry, or the lookup fails naming the file and what is wrong - not JSON, missing keys
    (C(schema), C(model), C(firmware), C(capacity_bytes), C(iocost_model), C(qos)), a schema other than V(1),
    coefficients that are not positive integers, QoS values out of range, or a file name that is not the one
    P(aiinfra.io_isolation.calibration_entry_file#filter) gives for its content (which also keeps two files from
    holding the same hardware class).
  - The lookup returns one list element per entry, so call it with C(query) or with C(lookup) and
    C(wantlist=true); a plain C(lookup) turns a database of exactly one entry into that entry instead of a list.
options:
  _terms:
    description:
      - Database directories on the controller. A relative path is relative to the playbook's directory. The
        entries of all of them are returned, and a hardware class found in two of them is an error.
      - Not given together with O(default_dir).
    type: list
    elements: path
  default_dir:
    description:
      - Return the database directory the collection's roles use by default instead of reading entries - the
        inventory-wide C(io_isolation_calibration_dir), else C(calibration-db) beside the inventory (beside the
        playbook without an inventory directory). The P(aiinfra.io_isolation.calibration#role) and
        P(aiinfra.io_isolation.io_baseline#role) roles take their defaults from it, so the location is decided in
        one place.
    type: bool
    default: false
    version_added: 0.2.0
  disks:
    description:
      - Return only the entries that can be chosen for these disks, those of their models and capacities, in the
        same order (P(aiinfra.io_isolation.iocost_plan#filter) picks the same entry from them as from the whole
        database). The disks are io_facts devices with their C(identity), as
        P(aiinfra.io_isolation.select_disks#filter) gives them.
      - The whole database is still checked and fails the lookup as without this option, but each file is read
        once per run, not once per host - the run's controller temporary directory keeps which hardware class each
        checked file holds, and a file that changed since is read again. The P(aiinfra.io_isolation.io_baseline#role)
        role looks its entries up this way.
    type: list
    elements: dict
    version_added: 0.2.0
notes:
  - Only the controller's files are read; nothing runs on the managed hosts.
seealso:
  - plugin: aiinfra.io_isolation.calibration_entry
    plugin_type: filter
  - plugin: aiinfra.io_isolation.iocost_plan
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Plan the iocost models of the data disks from the calibration database
  ansible.builtin.set_fact:
    iocost_devices: >-
      {{ data_disks | aiinfra.io_isolation.iocost_plan({}, query('aiinfra.io_isolation.calibration_db',
         playbook_dir ~ '/calibration')) }}

- name: Only the entries the selected disks can take (what the io_baseline role reads for each host)
  ansible.builtin.set_fact:
    iocost_devices: >-
      {{ data_disks | aiinfra.io_isolation.iocost_plan({}, query('aiinfra.io_isolation.calibration_db',
         playbook_dir ~ '/calibration', disks=data_disks)) }}

- name: Where the roles keep the database unless told otherwise
  ansible.builtin.debug:
    msg: "{{ lookup('aiinfra.io_isolation.calibration_db', default_dir=true) }}"

- name: The same with lookup()
  ansible.builtin.debug:
    msg: "{{ lookup('aiinfra.io_isolation.calibration_db', '/srv/calibration', wantlist=true) | length }} entries"
"""

RETURN = r"""
_list:
  description:
    - "The entries, each C({schema: 1, model, firmware, capacity_bytes, iocost_model, qos, spread, repeats, runs,
      date, kernel, fio_version, host, method, kernel_model, device}), sorted by file name (all of the first
      directory, then the next)."
  type: list
  elements: dict
"""

import importlib
import os

from ansible import constants as C
from ansible.errors import AnsibleLookupError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.lookup import LookupBase

DEFAULT_DIR_NAME = "calibration-db"


def default_dir(variables):
    """The database both roles use unless told otherwise: ``io_isolation_calibration_dir`` (the
    inventory-wide setting), else ``calibration-db`` beside the inventory (beside the playbook
    without one)."""
    def given(name):
        # A lookup sees an unset inventory_dir (inventory given as "host,") as the text "None".
        value = variables.get(name)
        return value if value not in (None, "", "None") else None

    configured = given("io_isolation_calibration_dir")
    if configured:
        return configured
    return os.path.join(given("inventory_dir") or given("playbook_dir") or ".", DEFAULT_DIR_NAME)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        # Read before set_options: the options only choose what is returned.
        want_default = boolean(kwargs.pop("default_dir", False), strict=True)
        disks = kwargs.pop("disks", None)
        self.set_options(var_options=variables, direct=kwargs)
        if want_default:
            if terms:
                raise AnsibleLookupError("calibration_db: give directories or default_dir=true, not both")
            # Lookups get the variables as written: template the ones the default is made of.
            given = {}
            for name in ("io_isolation_calibration_dir", "inventory_dir", "playbook_dir"):
                value = (variables or {}).get(name)
                if value is not None and self._templar is not None:
                    value = self._templar.template(value)
                given[name] = value
            return [default_dir(given)]
        if not terms:
            raise AnsibleLookupError("calibration_db: name at least one database directory (or ask for default_dir=true)")
        # Imported here, not with this file: the roles' defaults ask for default_dir in every worker that templates
        # them, and the database code is compiled from source in each (make bench-fleet).
        db = importlib.import_module("ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._calibration_db")
        try:
            # ansible-core's controller temporary directory is made once per run, before the workers fork, and
            # removed at its end (its AnsiballZ cache lives there too): the database index's place.
            return db.load_db(*terms, basedir=self.get_basedir(variables or {}), disks=disks,
                              index_dir=C.DEFAULT_LOCAL_TMP if disks is not None else None)
        except db.CalibrationError as e:
            raise AnsibleLookupError("calibration_db: %s" % e)
