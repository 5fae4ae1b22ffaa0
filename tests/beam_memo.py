"""Test-only shortcuts through two of Beam's per-call introspections, installed by
tests/conftest.py. The suite runs the whole job in process a few hundred times; each run builds
a pipeline of about 300 transforms, and two of Beam's answers that never change between those
runs were about half of a small job's CPU time.

1. DoFn specs. `apache_beam.transforms.userstate.get_dofn_specs(dofn)` finds a DoFn's state and
   timer specs by taking `inspect.signature` of every method of the DoFn (about 60 each, most of
   them Beam's own): Beam calls it when a ParDo is made, when the pipeline goes to its runner
   API form, and again for every DoFn of every bundle the FnApiRunner processes. The specs are
   a DoFn's methods' parameter defaults (`DoFn.StateParam(...)`, `DoFn.TimerParam(...)`), which
   belong to its class, or, for the DoFn that wraps a callable (`beam.Map`, `beam.FlatMap`),
   to the callable whose signature Beam reads for `process` (`_argspec_fn`, the user's function
   under Beam's wrapper lambda). The memo keys on the class and that callable; a plain function
   whose defaults are plain values by its code and defaults, so that the lambdas a pipeline
   builder makes anew each time hit.

2. Options views. `PipelineOptions(flags)`, and so every `options.view_as(cls)` (Beam calls it
   for every transform applied, about 500 times a run), builds an argparse parser of the class's
   options and parses the flags again. The parsed namespace depends on the class, the flags
   and the environment: the memo keeps a copy per (class, flags, environment) and gives each
   new view a copy of its own.

`test_beam_memo.py` checks both against Beam's own on every DoFn and options class the job
uses. The job itself (`corpus-chunker`, the benchmarks, the runner tests' worker processes, the
command-line jobs of the interrupt and bad-input tests) runs Beam unchanged; the crash tests'
killed jobs (`python -m tests.faults`) install the memos as the test process does.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import types
from collections.abc import Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.typehints.typecheck import AbstractDoFnWrapper

BEAMS_OWN = userstate.get_dofn_specs
BEAMS_OPTIONS_INIT = PipelineOptions.__init__
_found: dict[tuple, tuple[set, set]] = {}
_parsed: dict[tuple, Any] = {}


_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _plain_value(value: Any) -> bool:
    """A default compared by value without loss: None, a number, a string, or a tuple of
    them. Beam's own parameters (`DoFn.StateParam(spec)`) compare by their name alone, so
    two specs of one name but another kind or coder would be equal."""
    if isinstance(value, tuple):
        return all(_plain_value(v) for v in value)
    return type(value) in _PLAIN


def _callable_key(fn: Any) -> Any:
    """What Beam's reading of `fn`'s signature depends on: a plain function's code and
    defaults (unless it carries a signature of its own, or a default that is no plain
    value: then the function itself), a bound method's function (its signature is the
    function's less the first parameter), any other callable itself."""
    if isinstance(fn, types.MethodType):
        return ("method", _callable_key(fn.__func__))
    if (
        isinstance(fn, types.FunctionType)
        and not hasattr(fn, "__signature__")
        and not hasattr(fn, "__wrapped__")
    ):
        defaults = fn.__defaults__ or ()
        kwdefaults = tuple(sorted((fn.__kwdefaults__ or {}).items()))
        if _plain_value((defaults, tuple(v for _, v in kwdefaults))):
            return (fn.__code__, defaults, kwdefaults)
    return fn


def dofn_key(dofn: Any) -> tuple:
    """The memo's key of `dofn` (hashing it may raise TypeError: then there is none). A
    wrapper that Beam puts around a DoFn (its type checks') is keyed with the DoFn it wraps,
    whose methods it reads."""
    if isinstance(dofn, AbstractDoFnWrapper):
        return (type(dofn), dofn_key(object.__getattribute__(dofn, "dofn")), None)
    fn = getattr(dofn, "_fn", None)
    if fn is None:
        return (type(dofn), None, None)
    argspec_fn = getattr(fn, "_argspec_fn", fn)
    key = (type(dofn), _callable_key(argspec_fn), _frozen(getattr(dofn, "_fullargspec", None)))
    hash(key)
    return key


def _frozen(argspec: Any) -> Any:
    """`MapTuple`'s argspec, (names, defaults) in lists, as tuples when it holds plain values
    only; raises TypeError (no memo) otherwise."""
    if isinstance(argspec, list | tuple):
        return tuple(_frozen(v) for v in argspec)
    if not _plain_value(argspec):
        raise TypeError(f"not a plain value: {argspec!r}")
    return argspec


def cached_dofn_specs(dofn: Any) -> tuple[set, set]:
    """`BEAMS_OWN(dofn)`, computed once per DoFn class and callable read for `process`."""
    try:
        key = dofn_key(dofn)
    except TypeError:  # an unhashable callable or default
        return BEAMS_OWN(dofn)
    found = _found.get(key)
    if found is None:
        found = _found[key] = BEAMS_OWN(dofn)
    return found


def options_init(self: PipelineOptions, flags: Sequence[str] | None = None, **kwargs: Any) -> None:
    """`PipelineOptions.__init__` with the flags parsed once per options class, flags and
    environment (a default may come from it: `--beam_services` from BEAM_SERVICE_OVERRIDES).
    The rest is Beam's own (apache_beam/options/pipeline_options.py, 2.77): the flags kept,
    the keyword overrides first in `_all_options`, then every option the class's parser
    knows. What a class's parser reads besides (module state, a `type=` function's side
    effects) is taken as it was at the first parse: none of Beam's or the job's options do
    either."""
    if not isinstance(flags, (list, tuple)):  # sys.argv, an iterator, or Beam's own error
        BEAMS_OPTIONS_INIT(self, flags, **kwargs)
        return
    try:
        key = (type(self), tuple(flags), frozenset(os.environ.items()))
        parsed = _parsed.get(key)
    except TypeError:  # a flag that is not a string
        BEAMS_OPTIONS_INIT(self, flags, **kwargs)
        return
    if parsed is None:
        BEAMS_OPTIONS_INIT(self, flags, **kwargs)
        # a value that cannot be copied (an open file): parsed each time
        with contextlib.suppress(Exception):
            _parsed[key] = copy.deepcopy(self._visible_options)
        return
    logging.basicConfig()
    self._flags = flags
    self._visible_options = copy.deepcopy(parsed)
    self._all_options = kwargs
    for option_name in self._visible_option_list():
        if option_name not in self._all_options:
            self._all_options[option_name] = getattr(self._visible_options, option_name)


def install() -> None:
    """Put the memos where Beam looks them up: `get_dofn_specs` is the module's global, which
    `is_stateful_dofn`, `validate_stateful_dofn` and `apache_beam.transforms.core` read;
    `PipelineOptions.__init__` is inherited by every options class."""
    userstate.get_dofn_specs = cached_dofn_specs
    PipelineOptions.__init__ = options_init
