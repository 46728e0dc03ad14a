"""One way to run a Beam job that writes a dataset: annotation, the label import and conversion.

A driver builds its graph, then runs it inside `dataset_job`, as Beam's examples do::

    p = beam.Pipeline(options=pipeline_options)
    _ = p | 'Files' >> beam.Create(paths) | 'ReadGames' >> ... | 'Write' >> ... | 'WriteResults' >> ...
    with beam_job.dataset_job(out, roots=roots, existing=beam_job.existing_dataset(out), keeper=keeper):
      result = beam_job.run_pipeline(p)
      ...  # count, commit the files (`shards.commit`), write the manifest

`dataset_job` claims the output folder (refusing a dataset already there unless told to replace it), cleans what a
crashed earlier job left and prepares what the job keeps to resume; a job that fails, or is interrupted (Ctrl-C),
in the block abandons its output: what it wrote is deleted, and the folders it made are removed where that leaves
them empty. `run_pipeline` runs the graph and closes the runner's client (Beam's Dask runner opens one and leaves
it).

The runner's options (`beam_options`) are the same for every job: locally the DirectRunner with one worker process
per core and quiet workers; on Beam's Dask runner one element per partition unless the flags say otherwise, and
(`parallelism`) four times as many lanes as the cluster has worker threads.

A job runs as a console command through `main`: Beam's logs quiet, its workers' tracebacks kept in a log file, and
a user's error raised in a worker process still one line (`searchless.plumbing.errors`): ``beam_job.main(lambda
args: annotate.run(args), argv, 'searchless-annotate')``. A pipeline module imports `searchless.plumbing.beam_check`
first (Beam there, or one line).
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import traceback
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, WorkerOptions
from apache_beam.runners.runner import PipelineResult

from searchless.core import artefacts
from searchless.core import bags
from searchless.core import records
from searchless.data import resume
from searchless.data import shards
from searchless.plumbing import errors
from searchless.plumbing import outputs as outputs_lib

BEAM_TEMP = 'beam-temp-*'  # The temporary folders Beam's file sinks make next to their output.


def is_local_direct(options: PipelineOptions) -> bool:
  runner = options.view_as(StandardOptions).runner
  return runner in (None, 'DirectRunner', 'direct', 'FnApiRunner', 'BundleBasedDirectRunner')


def _is_dask(options: PipelineOptions) -> bool:
  runner = options.view_as(StandardOptions).runner
  return isinstance(runner, str) and runner.split('.')[-1] == 'DaskRunner'


DEFAULT_PARALLELISM = 16  # Lanes on runners that rebalance work themselves (there they only add a few elements).


def parallelism(options: PipelineOptions) -> int:
  """The default lanes: on Beam's Dask runner 4x the cluster's worker threads, else DEFAULT_PARALLELISM."""
  if not _is_dask(options):
    return DEFAULT_PARALLELISM
  from apache_beam.runners.dask.dask_runner import DaskOptions  # Needs the 'dask' extra.
  import distributed

  dask = options.view_as(DaskOptions)
  if not (dask.address or dask.scheduler_file):
    return 4 * (os.cpu_count() or 1)  # The runner starts a local cluster.
  with distributed.Client(address=dask.address, scheduler_file=dask.scheduler_file, timeout=60) as client:
    return 4 * max(1, sum(client.nthreads().values()))


def checked_options(beam_args: Sequence[str]) -> PipelineOptions:
  """The pipeline options `beam_args` give. A flag that neither the command nor Beam knows (a typo, or a flag of
  another command) is a ValueError naming it: Beam alone would drop it with a warning and run the job."""
  try:  # Registers the Dask runner's options (--dask_client_address), where Dask is installed.
    import apache_beam.runners.dask.dask_runner  # noqa: F401  # pylint: disable=unused-import
  except ImportError:
    pass
  pipeline_options = PipelineOptions(list(beam_args))
  known = set(PipelineOptions([]).get_all_options())
  unknown = sorted(set(pipeline_options.get_all_options(retain_unknown_options=True)) - known)
  if unknown:
    raise errors.BadInput(
      f"unrecognized arguments: {' '.join('--' + u for u in unknown)} (neither this command's flags, see --help,"
      ' nor a Beam pipeline option)'
    )
  return pipeline_options


def beam_options(beam_args: Sequence[str]) -> tuple[PipelineOptions, bool]:
  """The job's pipeline options (`checked_options`), and whether it runs here: locally the DirectRunner gets one
  worker process per core and quiet workers; on Beam's Dask runner one element per partition unless the flags say
  otherwise."""
  pipeline_options = checked_options(beam_args)
  local = is_local_direct(pipeline_options)
  joined = ' '.join(beam_args)
  if local:
    direct = pipeline_options.view_as(DirectOptions)
    if '--direct_running_mode' not in joined:
      direct.direct_running_mode = 'multi_processing'
    if not direct.direct_num_workers:
      direct.direct_num_workers = os.cpu_count() or 1
    if '--default_sdk_harness_log_level' not in joined:
      pipeline_options.view_as(WorkerOptions).default_sdk_harness_log_level = 'WARNING'
    # Beam's local job service relays the workers' start-up warnings; they are noise here.
    relay = logging.getLogger('apache_beam.runners.portability.local_job_service')
    if relay.getEffectiveLevel() < logging.ERROR:
      relay.setLevel(logging.ERROR)
  if _is_dask(pipeline_options) and '--dask_partition_size' not in joined and '--dask_npartitions' not in joined:
    pipeline_options = PipelineOptions([*beam_args, '--dask_partition_size', '1'])
  return pipeline_options, local


def outputs(out: str, splits: Sequence[str], kinds: Sequence[str]) -> dict:
  """{split/kind: {files, records}} of the record sets of `kinds` found in `out`'s split folders."""
  found = {}
  for split in splits:
    for kind in kinds:
      try:
        spec = bags.find(FileSystems.join(out, split), kind)
      except FileNotFoundError:
        continue
      found[f'{split}/{kind}'] = {'files': spec.split(','), 'records': len(bags.reader(spec))}
  return found


SPLITS = ('train', 'test')  # The split folders a job writes.


def existing_dataset(output_dir: str) -> list[str]:
  """The files of an annotation job already in `output_dir` (manifest, logs, every record set of each split)."""
  found = [
    path
    for path in (
      FileSystems.join(output_dir, name)
      for name in (artefacts.AnnotationManifest.FILE, 'failures.jsonl', 'skipped.jsonl')
    )
    if FileSystems.exists(path)
  ]
  for split in SPLITS:
    for kind in records.ALL_KINDS:
      for ext in ('.bag', '.bagz'):
        found += sorted(shards.ShardSpec(FileSystems.join(output_dir, split), kind, ext).existing())
  return found


def _shown(path: str, output_dir: str) -> str:
  return os.path.relpath(path, output_dir) if '://' not in path else path


def claim(output_dir: str, existing: Sequence[str], overwrite: bool, flag: str = '--out') -> None:
  """Refuses an output folder that holds `existing` files of a dataset, or (overwrite) deletes them; makes a local
  folder, failing now (naming `flag`) where it cannot be made or written, not inside a worker."""
  if existing and not overwrite:
    names = ', '.join(_shown(p, output_dir) for p in existing[:4])
    more = f' and {len(existing) - 4} more' if len(existing) > 4 else ''
    raise errors.OutputExists(
      f'{flag} {output_dir} already holds a dataset ({names}{more}): pass --overwrite to replace '
      f'it, or choose another {flag}'
    )
  if existing:
    FileSystems.delete(list(existing))
  if '://' not in output_dir:
    try:
      os.makedirs(output_dir, exist_ok=True)
    except OSError as error:
      raise outputs_lib.OutputError(f'cannot create {output_dir} ({flag}): {error.strerror}', error.errno) from None
    if not os.access(output_dir, os.W_OK | os.X_OK):
      raise outputs_lib.OutputError(f'cannot write {output_dir} ({flag}): not writable')


def abandon(output_dir: str, roots: Iterable[str] = ()) -> None:
  """Deletes what a job wrote and did not commit (`roots`' temporary folders, Beam's file sinks' temporary
  folders), and its output folders where that leaves them empty (never what the user had there)."""
  folders = sorted({*roots, output_dir}, key=len, reverse=True)
  for root in folders:
    shards.clean(root)
    try:
      leftovers = [m.path for m in FileSystems.match([FileSystems.join(root, BEAM_TEMP)])[0].metadata_list]
    except (OSError, ValueError):  # Nothing there, or a folder that was never made.
      leftovers = []
    if leftovers := sorted({os.path.dirname(p) if '://' not in p else p for p in leftovers}):
      FileSystems.delete(leftovers)
  if '://' in output_dir:
    return
  for folder in folders:
    try:
      os.rmdir(folder)  # Only when empty.
    except OSError:
      pass


@contextlib.contextmanager
def dataset_job(
  output_dir: str,
  *,
  roots: Sequence[str] = (),
  existing: Sequence[str] = (),
  overwrite: bool = False,
  flag: str = '--out',
  keeper: resume.Keeper | None = None,
) -> Iterator[None]:
  """The block runs a dataset job (`run_pipeline`), then commits its files and writes its manifest. Before it:
  claims `output_dir` (`claim`), cleans `roots` (the folders holding the job's temporary pieces) and prepares what
  the job keeps to resume (`keeper`, if any). On any error or interrupt in the block the output is abandoned
  (`abandon`; what the keeper kept stays, unless it is nothing) and the error raised again; an interrupt
  (KeyboardInterrupt) then says what was kept, or that nothing was written."""
  claim(output_dir, existing, overwrite, flag)  # Before anything runs: old and new files never mix.
  roots = sorted({output_dir, *roots})
  for root in roots:
    shards.clean(root)  # What a crashed earlier job left.
  try:
    if keeper is not None:
      keeper.prepare()
    yield
  except KeyboardInterrupt:
    if keeper is not None:
      keeper.remove_if_empty()
    abandon(output_dir, roots)
    raise KeyboardInterrupt(
      keeper.interrupted() if keeper is not None else f'nothing written to {output_dir}'
    ) from None
  except BaseException as error:
    if keeper is not None:
      with contextlib.suppress(OSError):
        keeper.remove_if_empty()
    with contextlib.suppress(OSError):
      abandon(output_dir, roots)
    if full := _no_room(error, output_dir, flag):
      said = keeper.interrupted() if keeper is not None else ''
      raise outputs_lib.OutputError(f'{full}; {said}' if said.startswith('kept') else str(full)) from None
    raise


def run_pipeline(pipeline: beam.Pipeline) -> PipelineResult:
  """Runs `pipeline` to its end and closes the client its runner opened (Beam's Dask runner's), if any."""
  result = None
  try:
    result = pipeline.run()
    result.wait_until_finish()
  finally:
    if (client := getattr(result, 'client', None)) is not None:  # Beam's Dask runner opens one and leaves it.
      client.close()
  return result


# What a full disk, a quota or a read-only folder says, wherever in the job (a worker's error is text).
_NO_ROOM = ('No space left on device', 'Disk quota exceeded', 'Read-only file system')


def _no_room(error: BaseException, output_dir: str, flag: str) -> OSError | None:
  """A one-line error naming `output_dir` and `flag` for a job that ran out of room or permission to write there
  and whose error names no file (Beam's file systems and writers name none)."""
  if isinstance(error, OSError) and error.filename is not None:
    return None
  reason = next((r for r in _NO_ROOM if r in str(error)), None)
  return outputs_lib.OutputError(f'cannot write {output_dir} ({flag}): {reason}') if reason else None


@contextlib.contextmanager
def child_stderr_to(path: str) -> Iterator[None]:
  """Inside the block, processes this one starts write their stderr to `path`; its own `sys.stderr` does not move.

  Beam's worker processes print each failed bundle's traceback to the stderr
  they inherit (file descriptor 2), whatever the log level; this sends fd 2 to
  `path` and gives `sys.stderr` a copy of the terminal's descriptor. Both are
  restored at the end.

  >>> import subprocess, tempfile
  >>> log = tempfile.mktemp()
  >>> with child_stderr_to(log):
  ...   _ = subprocess.run('echo from-a-child >&2', shell=True)
  >>> open(log).read()
  'from-a-child\\n'
  """
  original = sys.stderr
  original.flush()
  terminal = os.dup(2)
  log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  os.dup2(log, 2)
  os.close(log)
  sys.stderr = open(
    terminal, 'w', buffering=1, encoding=getattr(original, 'encoding', None) or 'utf-8', errors='backslashreplace'
  )
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(terminal, 2)
    sys.stderr.close()  # Closes `terminal`; fd 2 is the terminal again.
    sys.stderr = original


# The last "package.module.Class: message" line of a traceback that Beam wraps a worker's error in.
_ERROR_LINE = re.compile(r'^(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Za-z_]\w*): (?P<message>.+)$', re.MULTILINE)


def _user_error_names(extra: Sequence[type[BaseException]] = ()) -> frozenset[str]:
  """The class names of `errors.USER_ERRORS`, `extra` and their subclasses (those imported by now): what a worker's
  traceback names when a user's input failed it."""
  names, todo = set(), [*errors.USER_ERRORS, *extra]
  while todo:
    cls = todo.pop()
    if cls.__name__ not in names:
      names.add(cls.__name__)
      todo.extend(cls.__subclasses__())
  return frozenset(names)


_WHILE_RUNNING = re.compile(r" \[while running '[^']*'\]$")  # What Beam adds to a step's error.


def worker_error(error: BaseException, extra: Sequence[type[BaseException]] = ()) -> str | None:
  """The message of the user error inside a runner's wrapped worker error (a traceback as text), if any.

  >>> from searchless.data import streams  # Where CorruptInputError, an OSError, is defined.
  >>> worker_error(RuntimeError('Traceback (most recent call last):\\n  File "x.py", line 1\\n'
  ...                           'searchless.data.streams.CorruptInputError: g.pgn.zst: zstd stream is truncated'
  ...                           " [while running 'ReadGames']"))
  'g.pgn.zst: zstd stream is truncated'
  >>> worker_error(RuntimeError('a bug')) is None
  True
  """
  names = _user_error_names(extra)
  found = [m for m in _ERROR_LINE.finditer(str(error).replace('\\n', '\n')) if m['name'] in names]
  if not found:
    return None
  return _WHILE_RUNNING.sub('', found[-1]['message'].strip())


def main(run: Callable[[list[str]], Any], argv: Sequence[str] | None, name: str, *extra: type[BaseException]) -> Any:
  """Runs a Beam command's `run(argv)` quietly: Beam's logs off, the workers' stderr to a log file kept
  (and named in the one-line error) only when the job fails, and every user error as one line.
  With ``--verbose`` in `argv`, Beam's logs and the traceback stay. Returns what `run` returned."""
  argv = list(sys.argv[1:] if argv is None else argv)
  verbose = '--verbose' in argv
  logging.getLogger().setLevel(logging.WARNING)
  if not verbose:  # Beam logs each failed bundle's traceback; the one-line error says it all.
    logging.getLogger('apache_beam').setLevel(logging.CRITICAL)
    if not any(a.startswith('--default_sdk_harness_log_level') for a in argv):
      argv = [*argv, '--default_sdk_harness_log_level=CRITICAL']  # The worker processes' own logs (one word: no
      # positional argument of the job's can take its value).
  fd, worker_log = tempfile.mkstemp(prefix=f'{name}-', suffix='.log')
  os.close(fd)
  quiet = contextlib.nullcontext() if verbose else _quiet_beam(worker_log)
  keep_log = False
  try:
    with errors.one_line_errors(*extra):
      try:
        with quiet:
          return run(argv)
      except (*errors.USER_ERRORS, *extra) as error:  # Raised here or by an in-process runner (with the step's name).
        errors.fail(_WHILE_RUNNING.sub('', str(error)))
      except Exception as error:  # pylint: disable=broad-except
        if verbose or (message := worker_error(error, extra)) is None:
          raise
        keep_log = os.path.getsize(worker_log) > 0
        errors.fail(message + (f" (workers' log: {worker_log})" if keep_log else ''))
  finally:
    if not keep_log:
      os.remove(worker_log)


@contextlib.contextmanager
def _quiet_beam(log: str) -> Iterator[None]:
  """Inside the block, child processes' stderr (`child_stderr_to`) and the tracebacks of this process's other
  threads (Beam's job service reports a worker killed by Ctrl-C from its own thread) go to `log`."""
  previous = threading.excepthook

  def to_log(hook_args: threading.ExceptHookArgs) -> None:
    with open(log, 'a', encoding='utf-8') as f:
      traceback.print_exception(hook_args.exc_type, hook_args.exc_value, hook_args.exc_traceback, file=f)

  threading.excepthook = to_log
  try:
    with child_stderr_to(log):
      yield
  finally:
    threading.excepthook = previous
