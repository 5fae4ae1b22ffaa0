"""Bad flags fail before the pipeline starts, with an error that names the flag."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.chunk_corpus import main
from pipelines.options import config_from_options
from transforms.chunking.tokens import bpe_version


def config(*flags):
    return config_from_options(PipelineOptions(["--input", "x/*", "--output", "o", *flags]))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--chunk_size=0"], "--chunk_size"),
        (["--chunk_size=40"], "--chunk_size=40"),
        (["--chunk_overlap=-1"], "--chunk_overlap"),
        (["--chunk_overlap=90"], "--chunk_overlap=90"),
        (["--boilerplate_min_docs=1"], "--boilerplate_min_docs"),
        (["--boilerplate_min_fraction=0"], "--boilerplate_min_fraction"),
        (["--context_max_tokens=0"], "--context_max_tokens"),
        (["--header_folders=-1"], "--header_folders must be >= 0"),
        (["--llm_concurrency=0"], "--llm_concurrency"),
        (["--context=llm"], "--llm_base_url"),
        (["--embedding_model=/tmp"], "--embedding_model='/tmp'"),
        (["--estimate_sample=0.5"], "--estimate_sample"),
        (["--estimate", "--estimate_sample=0"], "--estimate_sample"),
        (["--price_per_million_tokens=-1"], "--price_per_million_tokens"),
        (["--extract_timeout_s=-1"], "--extract_timeout_s"),
        (["--parent_chunk_size=100"], "--parent_chunk_size=100"),
        (["--embedding_cache=gs://b/c/*"], "--embedding_cache"),
        (["--keep_runs=0"], "--keep_runs must be at least 1"),
    ],
)
def test_bad_flag_is_named(flags, message):
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        config(*flags)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--chunk_overlap=90"], "--chunk_overlap=90"),
        (["--chunk_overlap=-1"], "--chunk_overlap"),
        (["--context=none", "--chunk_size=12"], "--chunk_size=12"),
        (["--chunk_size=40"], "--chunk_size=40"),
        (["--parent_chunk_size=100"], "--parent_chunk_size=100"),
        (["--chunk_timeout_s=-1"], "--chunk_timeout_s"),
    ],
)
def test_a_bad_token_budget_fails_before_the_model_is_built(monkeypatch, flags, message):
    """Issue 26: --chunk_overlap, the text room of --chunk_size and the other chunking flags
    were checked after prepare_model had built or loaded the ONNX model (about 15 s cold)."""
    import transforms.embedding.embed_setup

    def too_early(*args, **kwargs):
        raise AssertionError("the embedding model was prepared before the token flags were checked")

    monkeypatch.setattr(transforms.embedding.embed_setup, "prepare_model", too_early)
    monkeypatch.setattr(transforms.embedding.embed_setup, "check_device", too_early)
    with pytest.raises(ValueError, match=message):
        config(*flags)


def test_defaults_are_valid_and_fingerprinted():
    c = config("--embedding_model=none")
    assert c.budget is c.chunking.budget
    assert (c.budget.chunk_size, c.budget.chunk_overlap, c.budget.header_reserve) == (192, 32, 34)
    assert c.budget.model_tokenizer is None and c.budget.model_max_tokens is None
    assert len(c.fingerprint) == 16
    assert (
        c.fingerprint
        == config("--embedding_model=none", "--price_per_million_tokens=1").fingerprint
    )
    assert c.fingerprint != config("--embedding_model=none", "--chunk_size=256").fingerprint


def test_header_folders_is_fingerprinted_where_a_header_is_written():
    default = config("--embedding_model=none")
    assert default.context.header_folders == 0
    assert default.settings["header_folders"] == 0
    assert default.fingerprint == config("--embedding_model=none", "--header_folders=0").fingerprint
    one = config("--embedding_model=none", "--header_folders=1")
    assert one.context.header_folders == 1 and one.settings["header_folders"] == 1
    two = config("--embedding_model=none", "--header_folders=2")
    assert len({default.fingerprint, one.fingerprint, two.fingerprint}) == 3
    # no header, nothing it could change: the same chunks whatever the flag says
    none = [
        config("--embedding_model=none", "--context=none", f"--header_folders={n}") for n in (0, 2)
    ]
    assert none[0].settings["header_folders"] is None
    assert none[0].fingerprint == none[1].fingerprint


def test_a_folder_input_means_every_file_under_it(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    out = str(folder / "out")  # an output inside the input folder is fine: it is not read
    inputs = [str(folder), str(folder / "*.md"), "gs://bucket/docs/", "s3://bucket/a.md"]
    c = config_from_options(PipelineOptions([*(f"--input={i}" for i in inputs), "--output", out]))
    assert c.inputs == (
        str(folder / "**"),
        str(folder / "*.md"),
        "gs://bucket/docs/**",
        "s3://bucket/a.md",
    )
    assert c.output == out  # the output folder is a folder, not a pattern


@pytest.mark.parametrize("output", ["corpus", "."])
def test_an_output_that_holds_an_input_is_refused(tmp_path, output):
    (tmp_path / "corpus").mkdir()
    flags = ["--input", str(tmp_path / "corpus"), "--output", str(tmp_path / output)]
    with pytest.raises(ValueError, match=r"--output .* holds the input"):
        config_from_options(PipelineOptions(flags))


def test_token_engine_reaches_the_chunker_but_not_the_fingerprint():
    c = config("--embedding_model=none")
    slow = config("--embedding_model=none", "--token_engine=tiktoken")
    assert (c.chunking.token_engine, slow.chunking.token_engine) == ("auto", "tiktoken")
    assert slow.fingerprint == c.fingerprint  # the same tokens, so the same chunks
    # the manifest says what was asked for and what that meant on the launcher
    assert (slow.settings["token_engine"], c.settings["token_engine"]) == ("tiktoken", "auto")
    assert slow.settings["token_engine_on_launcher"] == "tiktoken"
    assert c.settings["token_engine_on_launcher"] == f"bpe (rs-bpe {bpe_version()})"
    with pytest.raises(ValueError, match="--token_engine='fast'"):
        type(c.chunking)(token_engine="fast")


def test_main_prints_the_error_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(
        "sys.argv", ["corpus-chunker", "--input", "x", "--output", "o", "--chunk_size=0"]
    )
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    assert "corpus-chunker: error: --chunk_size" in capsys.readouterr().err


def test_help_lists_every_project_flag(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["corpus-chunker", "--help"])
    main()
    out = capsys.readouterr().out
    for flag in (
        "--input",
        "--chunk_size",
        "--strategy_code",
        "--context",
        "--estimate",
        "--previous_output",
        "--embedding_cache",
        "--price_per_million_tokens",
        "--embedding_model",
        "--embedding_backend",
        "--embedding_cache_dir",
    ):
        assert flag in out
    assert "default 192" in out
