"""The DirectRunner without its detour through a downloaded Prism binary.

Beam 2.77's DirectRunner offers every batch job that Prism can run (here: a job without
`RunInference`, i.e. `--embedding_model=none` and `--estimate`, and the `load` and
`compact-cache` commands) to the Prism runner first, and Prism fetches its Go binary from
GitHub at run time. Offline the fetch fails and the DirectRunner falls back to the FnApiRunner,
after about 1.5 s of CPU spent translating the job, three temporary folders left behind and
SIGINT's handler replaced by the job server's; online the job would run on an engine fetched
by the job itself, which nothing here tests, where the next run without network would not.

`pipeline(options)` builds the `beam.Pipeline` that the job and the commands run: where
`--runner` names the DirectRunner (or nothing), on the FnApiRunner exactly as the DirectRunner
ends up there (the pipeline options in the workers' provision info, so
`--direct_running_mode` and `--direct_num_workers` work as before); any other runner as named.
The FnApiRunner runs every batch job these pipelines build (no streaming source, no real-time
timer: what would send the DirectRunner to its bundle-based runner instead).
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.runner import PipelineResult

from pipelines.live_progress import runner_name

DIRECT_RUNNERS = frozenset({"", "directrunner", "switchingdirectrunner"})


class FnApiDirectRunner(SwitchingDirectRunner):
    """The DirectRunner's last step alone: the job on the FnApiRunner, with the pipeline
    options in the workers' provision info, as `SwitchingDirectRunner` starts it after
    Prism."""

    def run_pipeline(self, pipeline: beam.Pipeline, options: PipelineOptions) -> PipelineResult:
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        runner = fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(info))
        return runner.run_pipeline(pipeline, options)


def runs_direct(options: PipelineOptions) -> bool:
    """Whether `--runner` names the DirectRunner, or no runner."""
    return runner_name(options) in DIRECT_RUNNERS


def pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A `beam.Pipeline` for `options`: on `FnApiDirectRunner` where they name the
    DirectRunner or no runner, else on the runner they name."""
    return beam.Pipeline(
        runner=FnApiDirectRunner() if runs_direct(options) else None, options=options
    )
