"""A test-only shortcut through Beam's DoFn introspection, installed by tests/conftest.py.

`apache_beam.transforms.userstate.get_dofn_specs(dofn)` finds a DoFn's state and timer specs by
taking `inspect.signature` of every method of the DoFn (about 60 each, most of them Beam's
own): Beam calls it when a ParDo is made, when the pipeline goes to its runner API form, and
again for every DoFn of every bundle the FnApiRunner processes. A 3-document job of this
project makes 802 such calls, 25,000 signatures: 1.0 of its 2.5 s of CPU. The suite runs the
whole job in process a few hundred times, so that was about a quarter of `make test`.

The specs are a DoFn's methods' parameter defaults (`DoFn.StateParam(...)`,
`DoFn.TimerParam(...)`), which belong to its class, or, for the DoFn that wraps a callable
(`beam.Map`, `beam.FlatMap`), to that callable: the memo keys on both, and
`test_beam_specs.py` checks it against Beam's own function on every DoFn of the job's
pipeline. The job itself (`corpus-chunker`, the benchmarks, the runner tests' worker
processes) runs Beam unchanged: each of its processes builds one pipeline.
"""

from __future__ import annotations

from typing import Any

from apache_beam.transforms import userstate

BEAMS_OWN = userstate.get_dofn_specs
_found: dict[tuple[type, Any], tuple[set, set]] = {}


def cached_dofn_specs(dofn: Any) -> tuple[set, set]:
    """`BEAMS_OWN(dofn)`, computed once per DoFn class and wrapped callable."""
    try:
        key = (type(dofn), getattr(dofn, "_fn", None))
        found = _found.get(key)
    except TypeError:  # an unhashable wrapped callable
        return BEAMS_OWN(dofn)
    if found is None:
        found = _found[key] = BEAMS_OWN(dofn)
    return found


def install() -> None:
    """Put `cached_dofn_specs` where Beam looks it up (the module's global, which
    `is_stateful_dofn`, `validate_stateful_dofn` and `apache_beam.transforms.core` read)."""
    userstate.get_dofn_specs = cached_dofn_specs
