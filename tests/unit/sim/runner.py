# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""FakeRunner: the one ``Runner`` stand-in of the unit tests (commands that are not a simulator of their own).

Responses are keyed by the command's argv (a tuple: that argv exactly) or by a prefix of it (a tuple
ending in ``...``: every argv that starts so; the longest such key wins); a response is
``(rc, stdout, stderr)``, an exception to raise, or a callable ``f(argv)`` that returns or raises
one. Every call is recorded in ``calls``; ``which(name)`` answers from ``tools`` (a dict, or a
function of the name). An argv no key matches gets ``default`` (the same kinds) or, without one,
fails the test.

Like the production Runner's callers expect, ``run`` does not raise on a non-zero rc by itself: a
response that should fail the call raises (``CommandError``) itself. The instance is callable too
(``runner(argv)``), for code that takes a plain ``run`` function.
"""

import os

_UNSET = object()


class FakeRunner(object):
    def __init__(self, answers=None, tools=None, default=_UNSET):
        self.answers = {}
        for key, response in (answers or {}).items():
            self.answer(key, response)
        self.tools = tools if callable(tools) else dict(tools or {})
        self.default = default
        self.calls = []
        self.started = []

    def answer(self, argv, response):
        """Answer ``argv`` (a list or tuple; ending in ``...``: every argv starting so) with ``response``."""
        self.answers[tuple(argv)] = response
        return self

    def which(self, name):
        return self.tools(name) if callable(self.tools) else self.tools.get(name)

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        assert isinstance(argv, list), "argv must be a list"
        self.calls.append(list(argv))
        return self.respond(list(argv))

    def start(self, argv):
        """Like the production Runner's ``start``: the command answered now (recorded in ``calls`` and ``started``),
        its answer (or the exception it raises) given by ``wait()``."""
        assert isinstance(argv, list), "argv must be a list"
        self.calls.append(list(argv))
        self.started.append(list(argv))
        try:
            return _Started(self.respond(list(argv)), None)
        except Exception as e:  # pylint: disable=broad-except
            return _Started(None, e)

    def __call__(self, argv):
        return self.run(argv)

    def respond(self, argv):
        if tuple(argv) in self.answers:
            response = self.answers[tuple(argv)]
        else:
            prefixes = [k for k in self.answers if k and k[-1] is Ellipsis and tuple(argv[:len(k) - 1]) == k[:-1]]
            response = self.answers[max(prefixes, key=len)] if prefixes else self.default
        if response is _UNSET:
            raise AssertionError("unexpected command %r" % (argv,))
        if isinstance(response, BaseException):
            raise response
        if callable(response):
            return response(argv)
        return response

    def called(self, tool):
        """The recorded calls of ``tool`` (matched on argv[0]'s base name)."""
        return [c for c in self.calls if os.path.basename(c[0]) == tool]


class _Started(object):
    def __init__(self, response, error):
        self.response, self.error = response, error

    def wait(self, check=True):
        if self.error is not None:
            raise self.error
        return self.response
