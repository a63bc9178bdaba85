# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""An in-memory stand-in for the part of the AWX REST API (/api/v2/) that awx.awx's modules use to
create objects: list views filtered by query parameters (``or__`` alternatives included), create,
detail, patch, delete, sub-list attach/detach, survey specs, project updates, and the
``unified_job_templates`` view over every template kind.

No AWX server runs here (it needs a container platform), so playbooks/awx_objects.yml is run with the
real awx.awx modules against this: their own argument validation, name lookups and idempotence logic
run unchanged. Where AWX itself refuses input that matters to the collection, this does too, with
AWX's rules: a survey spec as JobTemplateSurveySpec validates it, a job template without a project,
playbook or inventory, a schedule without DTSTART/RRULE, a workflow node whose template is missing.
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

TEMPLATE_KINDS = {"job_templates": "job_template", "workflow_job_templates": "workflow_job_template",
                  "projects": "project", "inventory_sources": "inventory_source"}
# where a sub-list's members live
SUB_TARGETS = {"credentials": "credentials", "galaxy_credentials": "credentials", "labels": "labels",
               "instance_groups": "instance_groups", "success_nodes": "workflow_job_template_nodes",
               "failure_nodes": "workflow_job_template_nodes", "always_nodes": "workflow_job_template_nodes",
               "notification_templates_started": "notification_templates",
               "notification_templates_success": "notification_templates",
               "notification_templates_error": "notification_templates"}
SURVEY_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                "integer": int, "float": float}


class Refused(Exception):
    def __init__(self, status, body):
        Exception.__init__(self, body)
        self.status, self.body = status, body


def survey_problem(spec):
    """What AWX's JobTemplateSurveySpec validation says about a survey spec (None: accepted)."""
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if field not in spec:
            return "Field '%s' is missing from survey spec." % field
        if not isinstance(spec[field], kind):
            return "Expected %s for field '%s'." % (kind.__name__, field)
    if not spec["spec"]:
        return "'spec' doesn't contain any items."
    seen = set()
    for idx, item in enumerate(spec["spec"]):
        for field in ("type", "question_name", "variable", "required"):
            if field not in item:
                return "'%s' missing from survey question %d." % (field, idx)
            if not isinstance(item[field], bool if field == "required" else str):
                return "'%s' in survey question %d has the wrong type." % (field, idx)
        if item["variable"] in seen:
            return "'variable' '%s' duplicated in survey question %d." % (item["variable"], idx)
        seen.add(item["variable"])
        kind = item["type"]
        if kind not in SURVEY_TYPES:
            return "'%s' in survey question %d is not an allowed question type." % (kind, idx)
        default = item.get("default", "")
        if default != "" and (not isinstance(default, SURVEY_TYPES[kind]) or isinstance(default, bool)):
            return "Default value %r in survey question %d expected to be %s." % (default, idx, kind)
        for key in ("min", "max"):
            if item.get(key) is not None and (not isinstance(item[key], int) or isinstance(item[key], bool)):
                return "The %s limit in survey question %d expected to be integer." % (key, idx)
        if kind in ("multiplechoice", "multiselect"):
            if "choices" not in item:
                return "Survey question %d of type %s must specify choices." % (idx, kind)
            choices = item["choices"].split("\n") if isinstance(item["choices"], str) else item["choices"]
            if default != "" and default not in choices:
                return "Default choice must be answered from the choices listed."
    return None


class Store(object):
    """The objects by endpoint, in creation order; ids are global, as the test needs no more."""

    def __init__(self):
        self.lock = threading.Lock()
        self.objects = {}
        self.subs = {}        # (endpoint, id, sublist) -> [ids]
        self.surveys = {}     # (endpoint, id) -> spec
        self.requests = []    # (method, path) of every write
        self.next_id = 1
        self.add("organizations", {"name": "Default", "description": ""})
        self.add("credential_types", {"name": "Machine", "kind": "ssh", "managed": True})

    def add(self, endpoint, data):
        oid = self.next_id
        self.next_id += 1
        obj = dict(data, id=oid, type=TEMPLATE_KINDS.get(endpoint, endpoint.rstrip("s")),
                   url="/api/v2/%s/%d/" % (endpoint, oid), summary_fields={})
        obj["related"] = dict(("%s" % sub, "%s%s/" % (obj["url"], sub))
                              for sub in tuple(SUB_TARGETS) + ("survey_spec", "update", "copy", "workflow_nodes"))
        if endpoint == "projects":
            # AWX starts a project update on create; the module waits on it (wait: true)
            update = self.add("project_updates", {"name": data.get("name"), "status": "successful",
                                                  "failed": False, "finished": "2026-12-04T00:00:00Z"})
            obj["summary_fields"] = {"current_update": {"id": update["id"]}}
            obj.setdefault("scm_revision", "0" * 40)
        self.objects.setdefault(endpoint, {})[oid] = obj
        return obj

    def listing(self, endpoint):
        if endpoint == "unified_job_templates":
            out = []
            for name in TEMPLATE_KINDS:
                out.extend(self.objects.get(name, {}).values())
            return sorted(out, key=lambda o: o["id"])
        return list(self.objects.get(endpoint, {}).values())

    def find(self, endpoint, oid):
        for obj in self.listing(endpoint):
            if obj["id"] == oid:
                return obj
        raise Refused(404, {"detail": "Not found."})

    @staticmethod
    def matches(obj, query):
        alternatives = [(k[4:], v) for k, v in query.items() if k.startswith("or__")]
        if alternatives and not any("%s" % obj.get(k) == v for k, v in alternatives):
            return False
        for key, value in query.items():
            if key.startswith("or__") or key in ("page_size", "page"):
                continue
            have = obj.get(key)
            if ("" if have is None else "%s" % have) != value and not (have is None and value in ("", "None")):
                return False
        return True


def _check_create(store, endpoint, data):
    """What AWX refuses at create or update that matters for the objects the collection defines."""
    if endpoint == "job_templates":
        missing = [f for f in ("project", "playbook") if not data.get(f)]
        if not data.get("inventory") and not data.get("ask_inventory_on_launch"):
            missing.append("inventory")
        if missing:
            raise Refused(400, dict((f, ["This field is required."]) for f in missing))
        store.find("projects", data["project"])
        store.find("inventories", data["inventory"])
        if not re.match(r"^[\w./-]+\.ya?ml$", data["playbook"]):
            raise Refused(400, {"playbook": ["Playbook not found for project."]})
        slices = data.get("job_slice_count", 1)
        if not isinstance(slices, int) or slices < 1:
            raise Refused(400, {"job_slice_count": ["Ensure this value is greater than or equal to 1."]})
    if endpoint == "schedules":
        rrule = data.get("rrule") or ""
        if "DTSTART" not in rrule or "RRULE:" not in rrule:
            raise Refused(400, {"rrule": ["Valid DTSTART and RRULE required in rrule."]})
        store.find("unified_job_templates", data["unified_job_template"])
    if endpoint == "workflow_job_template_nodes" and data.get("unified_job_template") is not None:
        store.find("unified_job_templates", data["unified_job_template"])
    if endpoint == "groups":
        store.find("inventories", data["inventory"])


class Handler(BaseHTTPRequestHandler):
    store = None     # set per server

    def log_message(self, *args):
        pass

    def _send(self, status, body=None):
        payload = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}

    def _route(self, method):
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        if parts[:2] != ["api", "v2"] or len(parts) < 3:
            raise Refused(404, {"detail": "Not found."})
        endpoint, rest = parts[2], parts[3:]
        store = self.store
        with store.lock:
            if method != "GET":
                store.requests.append((method, url.path))
            if not rest:
                if method == "GET":
                    query = dict(parse_qsl(url.query, keep_blank_values=True))
                    found = [o for o in store.listing(endpoint) if store.matches(o, query)]
                    return 200, {"count": len(found), "next": None, "previous": None, "results": found}
                if method == "POST":
                    data = self._body()
                    _check_create(store, endpoint, data)
                    if endpoint == "credentials":
                        data = dict(data, inputs=dict(data.get("inputs") or {}))
                    return 201, self._shown(endpoint, store.add(endpoint, data))
            oid = int(rest[0])
            obj = store.find(endpoint, oid)
            if len(rest) == 1:
                if method == "GET":
                    return 200, self._shown(endpoint, obj)
                if method == "PATCH":
                    data = self._body()
                    _check_create(store, endpoint, dict(obj, **data))
                    obj.update(data)
                    return 200, self._shown(endpoint, obj)
                if method == "DELETE":
                    del store.objects[endpoint][oid]
                    return 204, None
            sub = rest[1]
            if sub == "survey_spec":
                key = (endpoint, oid)
                if method == "GET":
                    return 200, store.surveys.get(key, {})
                if method == "POST":
                    spec = self._body()
                    problem = survey_problem(spec)
                    if problem:
                        raise Refused(400, {"error": problem})
                    store.surveys[key] = spec
                    return 200, None
                if method == "DELETE":
                    store.surveys.pop(key, None)
                    return 200, None
            if sub in SUB_TARGETS:
                ids = store.subs.setdefault((endpoint, oid, sub), [])
                if method == "GET":
                    found = [store.find(SUB_TARGETS[sub], i) for i in ids]
                    return 200, {"count": len(found), "next": None, "previous": None, "results": found}
                if method == "POST":
                    data = self._body()
                    if data.get("disassociate"):
                        ids.remove(int(data["id"]))
                    elif int(data["id"]) not in ids:
                        store.find(SUB_TARGETS[sub], int(data["id"]))
                        ids.append(int(data["id"]))
                    return 204, None
        raise Refused(405, {"detail": "Method \"%s\" not allowed." % method})

    @staticmethod
    def _shown(endpoint, obj):
        if endpoint == "credentials":
            # the API never shows secrets back
            shown = dict(obj)
            shown["inputs"] = dict((k, "$encrypted$" if k in ("ssh_key_data", "password", "become_password") else v)
                                   for k, v in obj.get("inputs", {}).items())
            return shown
        return obj

    def _handle(self, method):
        try:
            status, body = self._route(method)
        except Refused as e:
            status, body = e.status, e.body
        self._send(status, body)

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")


class FakeAWX(object):
    """``with FakeAWX() as awx:`` serves on 127.0.0.1 at ``awx.url``; ``awx.store`` holds the objects."""

    def __init__(self):
        self.store = Store()
        handler = type("BoundHandler", (Handler,), {"store": self.store})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def named(self, endpoint, name):
        found = [o for o in self.store.listing(endpoint) if o.get("name", o.get("identifier")) == name]
        assert len(found) == 1, "%s named %r: %d found" % (endpoint, name, len(found))
        return found[0]
