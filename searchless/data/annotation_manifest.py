"""The manifest of an annotation job (``searchless-annotate``'s ``manifest.json``, `artefacts.AnnotationManifest`)
and the summary lines of it: made from the counts the job itself produced (`job_results.WriteResults`), so every
runner gives the same manifest."""

from collections.abc import Sequence
import json

from apache_beam.io.filesystems import FileSystems
from apache_beam.runners.runner import PipelineResult

from searchless.core import artefacts
from searchless.core import records
from searchless.data import annotate
from searchless.data import beam_job
from searchless.data import job_results
from searchless.data import manifest as manifest_lib
from searchless.data import pgn
from searchless.engines import annotator as engine_lib
from searchless.engines import launch


def engine_names(engine_ids: list[str]) -> list[str]:
  """Each engine identity (JSON) as its name and the start of its binary's sha256."""
  return [
    f'{i.get("name", "?")}, sha256 {str(i.get("binary_sha256"))[:16]}' for i in (json.loads(e) for e in engine_ids)
  ]


def metric_timings(result: PipelineResult) -> dict[str, dict]:
  """The runner's distributions (time per board), where the runner reports metrics."""
  try:
    return manifest_lib.distributions(result, annotate.NAMESPACE)
  except NotImplementedError:  # Beam's Dask runner: 'collecting metrics will come later!'
    return {}


def _binary_sha256(engine_ids: list[dict], engine_config: engine_lib.EngineConfig) -> str | None:
  """The workers' engine binary hash where they agree, else (or with no board annotated) the driver's."""
  hashes = {identity.get('binary_sha256') for identity in engine_ids}
  return hashes.pop() if len(hashes) == 1 else launch.binary_sha256(engine_config.path)


def write(
  counts: dict[str, int],
  engines: list[str],
  timings: dict[str, dict],
  options: annotate.AnnotateOptions,
  engine_config: engine_lib.EngineConfig,
  plan: job_results.JobPlan,
  wall: float,
  command: Sequence[str] | None,
) -> artefacts.AnnotationManifest:
  engine_ids = [json.loads(identity) for identity in engines]
  per_split = {}
  for split in plan.split_names:
    per_split[split] = {
      name: counts.get(f'{name}/{split}', 0)
      for name in ('boards_seen', 'boards', 'boards_annotated', 'boards_failed', 'terminal_boards', 'action_values')
    }
  test_boards = per_split.get('test', {}).get('boards', 0) + counts.get('test_boards_dropped', 0)
  overlap = counts.get('test_boards_in_train', 0)
  manifest = artefacts.AnnotationManifest(
    code=manifest_lib.code_version(),
    command=list(command) if command is not None else manifest_lib.command_line(),
    inputs=plan.inputs,
    output_dir=options.output_dir,
    engine={**engine_config.describe(), 'id': engine_ids, 'binary_sha256': _binary_sha256(engine_ids, engine_config)},
    games={
      **options.games_manifest(counts, pgn.SKIP_REASONS, sample_games=options.sample_games),
      'corrupt_input_files': counts.get('corrupt_input_files', 0),
    },
    split={
      'test_fraction': plan.test_fraction,
      'by': 'test_input files' if options.test_input else 'hash of game',
      'dedup_by': options.dedup_by,
      'drop_test_overlap': options.drop_test_overlap,
      'test_boards_in_train': overlap,
      'test_boards_in_train_fraction': overlap / test_boards if test_boards else None,
    },
    splits=per_split,
    engine_restarts=counts.get('engine_restarts', 0),
    outputs=beam_job.outputs(options.output_dir, plan.split_names, records.ALL_KINDS),
    timings={'wall_seconds': round(wall, 3), **timings},
  )
  manifest.write(FileSystems.join(options.output_dir, artefacts.AnnotationManifest.FILE))
  return manifest


def summary(manifest: artefacts.AnnotationManifest) -> str:
  """A few human lines about a finished job."""
  g = manifest.games
  lines = [f'games: {g["read"]} read, {g["kept"]} kept' + (f', skipped {g["skipped"]}' if g['skipped'] else '')]
  for split, c in manifest.splits.items():
    lines.append(
      f'{split}: {c["boards"]} boards, {c["action_values"]} action-values, {c["boards_failed"]} failed, '
      f'{c["terminal_boards"]} terminal'
    )
  s = manifest.split
  if s['test_boards_in_train_fraction'] is not None:
    lines.append(
      f'test boards also in train: {s["test_boards_in_train"]} ({100 * s["test_boards_in_train_fraction"]:.1f}%)'
    )
  e = manifest.engine
  lines.append(
    f'engine: {", ".join(i.get("name", "?") for i in e["id"])} | {e["mode"]} {e["limit"]} | '
    f'restarts {manifest.engine_restarts}'
  )
  lines.append(f'wall time: {manifest.timings["wall_seconds"]:.1f} s')
  return '\n'.join(lines)
