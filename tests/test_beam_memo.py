"""tests/beam_memo.py's memos give Beam's own answers on every DoFn and options class of the
job's pipeline."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options import pipeline_options
from apache_beam.options.pipeline_options import (
    DebugOptions,
    PipelineOptions,
    StandardOptions,
    TypeOptions,
)
from apache_beam.transforms import userstate

from tests import beam_memo


def _dofns(p: beam.Pipeline) -> list:
    found = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node) -> None:
            if isinstance(node.transform, beam.ParDo):
                found.append(node.transform.fn)

    p.visit(Visitor())
    return found


def _job_pipeline(tmp_path) -> beam.Pipeline:
    from pipelines.chunk_corpus import build_pipeline
    from pipelines.options import config_from_options

    flags = ["--input", str(tmp_path / "*.md"), "--output", str(tmp_path / "out")]
    options = PipelineOptions([*flags, "--embedding_model=none"])
    p = beam.Pipeline(options=options)
    build_pipeline(p, config_from_options(options))
    return p


def test_the_memo_is_installed_and_agrees_with_beam_on_every_dofn_of_the_job(tmp_path) -> None:
    assert userstate.get_dofn_specs is beam_memo.cached_dofn_specs
    dofns = _dofns(_job_pipeline(tmp_path))
    assert len(dofns) > 30
    for dofn in dofns:
        assert beam_memo.cached_dofn_specs(dofn) == beam_memo.BEAMS_OWN(dofn), dofn
    # a second build of the same job: its Maps' new lambdas are found in the memo
    before = len(beam_memo._found)
    for dofn in _dofns(_job_pipeline(tmp_path)):
        assert beam_memo.cached_dofn_specs(dofn) == beam_memo.BEAMS_OWN(dofn), dofn
    assert len(beam_memo._found) == before


def test_a_stateful_dofn_keeps_its_specs_and_a_map_its_callable() -> None:
    """Specs come from a DoFn's parameter defaults: a stateful DoFn's are found (and found
    again from the memo), and `beam.Map`s over different callables are told apart, lambdas
    with the same code but other defaults too, and bound methods of other functions."""
    from apache_beam.coders import VarIntCoder
    from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

    class Counting(beam.DoFn):
        COUNT = ReadModifyWriteStateSpec("count", VarIntCoder())

        def process(self, element, count=beam.DoFn.StateParam(COUNT)):  # noqa: B008 (Beam's idiom)
            yield element

    states, timers = beam_memo.cached_dofn_specs(Counting())
    assert states == {Counting.COUNT} and not timers
    assert beam_memo.cached_dofn_specs(Counting()) == ({Counting.COUNT}, set())
    assert userstate.is_stateful_dofn(Counting())
    first, second = beam.Map(str).fn, beam.Map(repr).fn
    assert beam_memo.dofn_key(first) != beam_memo.dofn_key(second)

    spec = ReadModifyWriteStateSpec("n", VarIntCoder())

    def make(default):
        return lambda element, n=default: element

    plain, stateful = beam.Map(make(None)).fn, beam.Map(make(beam.DoFn.StateParam(spec))).fn
    assert beam_memo.dofn_key(plain) != beam_memo.dofn_key(stateful)
    for dofn in (plain, stateful):
        assert beam_memo.cached_dofn_specs(dofn) == beam_memo.BEAMS_OWN(dofn)
    again = beam.Map(make(None)).fn  # a new lambda, the same code and defaults
    assert beam_memo.dofn_key(again) == beam_memo.dofn_key(plain)

    def pair():
        return beam.MapTuple(lambda key, value: value).fn  # its argspec in lists

    assert beam_memo.dofn_key(pair()) == beam_memo.dofn_key(pair())

    class Coder:
        def encode(self, value):
            return value

        def decode(self, value, strict=True):
            return value

    one, other = beam.Map(Coder().decode).fn, beam.Map(Coder().encode).fn
    assert beam_memo.dofn_key(one) == beam_memo.dofn_key(beam.Map(Coder().decode).fn)
    assert beam_memo.dofn_key(one) != beam_memo.dofn_key(other)


def _beams_own(cls: type, flags: list[str], **kwargs) -> PipelineOptions:
    options = cls.__new__(cls)
    beam_memo.BEAMS_OPTIONS_INIT(options, flags, **kwargs)
    return options


def test_options_views_are_beams_own_and_their_own() -> None:
    """A view made from the memo holds what Beam's parse gives, for every options class Beam
    defines, and a change to one view's values (a list option appended to) reaches neither the
    memo nor a later view of the same flags."""
    assert PipelineOptions.__init__ is beam_memo.options_init
    flags = [
        "--runner=FnApiRunner",
        "--experiments=a",
        "--no_pipeline_type_check",
        "--input",
        "x",
        "--direct_num_workers=2",
    ]
    classes = [
        c
        for c in vars(pipeline_options).values()
        if isinstance(c, type) and issubclass(c, PipelineOptions)
    ]
    assert len(classes) > 15
    for cls in classes:
        for _ in range(2):  # the first parse fills the memo, the second reads it
            made, own = cls(flags), _beams_own(cls, flags)
            assert vars(made._visible_options) == vars(own._visible_options), cls
            assert made._all_options == own._all_options, cls
            assert made._flags is flags
    options = PipelineOptions(flags, job_name="given")
    assert options.get_all_options()["job_name"] == "given"
    assert options.view_as(TypeOptions).pipeline_type_check is False
    assert options.view_as(StandardOptions).runner == "FnApiRunner"
    options.view_as(DebugOptions).add_experiment("b")
    assert options.view_as(DebugOptions).experiments == ["a", "b"]
    assert PipelineOptions(flags).view_as(DebugOptions).experiments == ["a"]
    assert PipelineOptions([*flags, "--runner=DirectRunner"]).view_as(StandardOptions).runner == (
        "DirectRunner"
    )


def test_specs_of_one_name_but_another_kind_and_wrapped_dofns_are_beams_own() -> None:
    """Beam's `DoFn.StateParam(spec)` compares by the spec's name alone: two methods whose
    defaults name `n` with another kind of state are not one key; a DoFn in Beam's type-check
    wrapper has the specs of the DoFn it wraps."""
    from apache_beam.coders import StrUtf8Coder, VarIntCoder
    from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec
    from apache_beam.typehints.typecheck import OutputCheckWrapperDoFn

    def holder(spec):
        class Holder:
            def f(self, element, n=beam.DoFn.StateParam(spec)):  # noqa: B008 (Beam's idiom)
                yield element

        return Holder().f

    one = beam.FlatMap(holder(ReadModifyWriteStateSpec("n", VarIntCoder()))).fn
    other = beam.FlatMap(holder(BagStateSpec("n", StrUtf8Coder()))).fn
    for dofn in (one, other):  # the first fills the memo
        assert beam_memo.cached_dofn_specs(dofn) == beam_memo.BEAMS_OWN(dofn)
    assert beam_memo.BEAMS_OWN(one) != beam_memo.BEAMS_OWN(other)

    class Counting(beam.DoFn):
        COUNT = ReadModifyWriteStateSpec("count", VarIntCoder())

        def process(self, element, count=beam.DoFn.StateParam(COUNT)):  # noqa: B008
            yield element

    class Plain(beam.DoFn):
        def process(self, element):
            yield element

    for inner in (Plain(), Counting()):
        wrapper = OutputCheckWrapperDoFn(inner, "label")
        assert beam_memo.cached_dofn_specs(wrapper) == beam_memo.BEAMS_OWN(wrapper)
    assert beam_memo.cached_dofn_specs(wrapper) == ({Counting.COUNT}, set())


def test_options_read_from_the_environment_and_uncopyable_values_are_beams_own(
    monkeypatch, tmp_path
) -> None:
    import argparse

    from apache_beam.options.pipeline_options import CrossLanguageOptions

    flags = ["--runner=FnApiRunner"]
    monkeypatch.delenv("BEAM_SERVICE_OVERRIDES", raising=False)
    assert CrossLanguageOptions(flags).beam_services == {}
    monkeypatch.setenv("BEAM_SERVICE_OVERRIDES", '{"t": "localhost:1"}')
    assert CrossLanguageOptions(flags).beam_services == {"t": "localhost:1"}

    class FileOptions(PipelineOptions):
        @classmethod
        def _add_argparse_args(cls, parser) -> None:
            parser.add_argument("--list_file", type=argparse.FileType("r"))

    listed = tmp_path / "files.txt"
    listed.write_text("a\n")
    for _ in range(2):  # an open file cannot be copied: parsed each time, as Beam does
        options = FileOptions([f"--list_file={listed}"])
        assert options.list_file.read() == "a\n"
        options.list_file.close()
