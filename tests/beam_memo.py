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
   by its code and defaults, so that the lambdas a pipeline builder makes anew each time hit.

2. Options views. `PipelineOptions(flags)`, and so every `options.view_as(cls)` (Beam calls it
   for every transform applied, about 500 times a run), builds an argparse parser of the class's
   options and parses the flags again. The parsed namespace depends on the class and the flags
   only: the memo keeps a copy per (class, flags) and gives each new view a copy of its own.

`test_beam_memo.py` checks both against Beam's own on every DoFn and options class the job
uses. The job itself (`corpus-chunker`, the benchmarks, the subprocess jobs of the crash tests,
the runner tests' worker processes) runs Beam unchanged: each of its processes builds one
pipeline.
"""

from __future__ import annotations

import copy
import logging
import types
from collections.abc import Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate

BEAMS_OWN = userstate.get_dofn_specs
BEAMS_OPTIONS_INIT = PipelineOptions.__init__
_found: dict[tuple, tuple[set, set]] = {}
_parsed: dict[tuple, Any] = {}


def _callable_key(fn: Any) -> Any:
    """What Beam's reading of `fn`'s signature depends on: a plain function's code and
    defaults (unless it carries a signature of its own), a bound method's function (its
    signature is the function's less the first parameter), any other callable itself."""
    if isinstance(fn, types.MethodType):
        return ("method", _callable_key(fn.__func__))
    if (
        isinstance(fn, types.FunctionType)
        and not hasattr(fn, "__signature__")
        and not hasattr(fn, "__wrapped__")
    ):
        kwdefaults = tuple(sorted((fn.__kwdefaults__ or {}).items()))
        return (fn.__code__, fn.__defaults__, kwdefaults)
    return fn


def dofn_key(dofn: Any) -> tuple:
    """The memo's key of `dofn` (hashing it may raise TypeError: then there is none)."""
    fn = getattr(dofn, "_fn", None)
    if fn is None:
        return (type(dofn), None, None)
    argspec_fn = getattr(fn, "_argspec_fn", fn)
    key = (type(dofn), _callable_key(argspec_fn), getattr(dofn, "_fullargspec", None))
    hash(key)
    return key


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
    """`PipelineOptions.__init__` with the flags parsed once per options class and flags.
    The rest is Beam's own (apache_beam/options/pipeline_options.py, 2.77): the flags kept, the
    keyword overrides first in `_all_options`, then every option the class's parser knows."""
    if not isinstance(flags, (list, tuple)):  # sys.argv, an iterator, or Beam's own error
        BEAMS_OPTIONS_INIT(self, flags, **kwargs)
        return
    try:
        key = (type(self), tuple(flags))
        parsed = _parsed.get(key)
    except TypeError:  # a flag that is not a string
        BEAMS_OPTIONS_INIT(self, flags, **kwargs)
        return
    if parsed is None:
        BEAMS_OPTIONS_INIT(self, flags, **kwargs)
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
