"""tests/beam_specs.py's memo gives Beam's own answer on every DoFn of the job's pipeline."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate

from tests import beam_specs


def _dofns(p: beam.Pipeline) -> list:
    found = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node) -> None:
            if isinstance(node.transform, beam.ParDo):
                found.append(node.transform.fn)

    p.visit(Visitor())
    return found


def test_the_memo_is_installed_and_agrees_with_beam_on_every_dofn_of_the_job(tmp_path) -> None:
    from pipelines.chunk_corpus import build_pipeline
    from pipelines.options import config_from_options

    assert userstate.get_dofn_specs is beam_specs.cached_dofn_specs
    flags = ["--input", str(tmp_path / "*.md"), "--output", str(tmp_path / "out")]
    options = PipelineOptions([*flags, "--embedding_model=none"])
    p = beam.Pipeline(options=options)
    build_pipeline(p, config_from_options(options))
    dofns = _dofns(p)
    assert len(dofns) > 30
    for dofn in dofns:
        assert beam_specs.cached_dofn_specs(dofn) == beam_specs.BEAMS_OWN(dofn), dofn


def test_a_stateful_dofn_keeps_its_specs_and_a_map_its_callable() -> None:
    """Specs come from a DoFn's parameter defaults: a stateful DoFn's are found (and found
    again from the memo), and two `beam.Map`s over different callables are told apart."""
    from apache_beam.coders import VarIntCoder
    from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

    class Counting(beam.DoFn):
        COUNT = ReadModifyWriteStateSpec("count", VarIntCoder())

        def process(self, element, count=beam.DoFn.StateParam(COUNT)):  # noqa: B008 (Beam's idiom)
            yield element

    states, timers = beam_specs.cached_dofn_specs(Counting())
    assert states == {Counting.COUNT} and not timers
    assert beam_specs.cached_dofn_specs(Counting()) == ({Counting.COUNT}, set())
    assert userstate.is_stateful_dofn(Counting())
    first, second = beam.Map(str).fn, beam.Map(repr).fn
    beam_specs.cached_dofn_specs(first)
    beam_specs.cached_dofn_specs(second)
    found = beam_specs._found
    assert (type(first), first._fn) in found and (type(second), second._fn) in found
