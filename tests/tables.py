"""Reading a run's output back, for the tests."""

import glob
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from transforms.cost_report import CostReport


def read_table(output: str, name: str) -> pa.Table:
    files = sorted(glob.glob(os.path.join(output, name, "*.parquet")))
    assert files, f"no {name} shards in {output}"
    return pa.concat_tables([pq.read_table(f) for f in files])


def rows(output: str, name: str) -> list[dict]:
    return read_table(output, name).to_pylist()


def report(output: str) -> dict:
    with open(os.path.join(output, "cost_report.json")) as f:
        return json.load(f)


def cost_report(output: str) -> CostReport:
    """The run's report, typed (as the summary, inspect and evaluate read it)."""
    found = CostReport.read(output)
    assert found is not None, f"no cost_report.json in {output}"
    return found


def manifest(output: str) -> dict:
    with open(os.path.join(output, "run_manifest.json")) as f:
        return json.load(f)
