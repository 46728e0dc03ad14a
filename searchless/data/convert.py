r"""Converting whole datasets between ChessBench records and board records, as a Beam job.

``to='board'``: action-value records (ours or the published files; the records
of one board may be anywhere in the input) -> ``OUTPUT_DIR/board_value_data.bag``,
one record per board (`searchless.data.boards`). Each board's value comes from
`state_values` (state-value records) when given, else from its best move. A
board whose moves are not exactly its legal moves stops the job with its FEN and
what is wrong (all of them listed in ``OUTPUT_DIR/bad_boards.jsonl``), unless
`skip_bad_boards` (then they are counted and left out).

``to='chessbench'``: board records -> ``OUTPUT_DIR/action_value_data.bag``,
``state_value_data.bag`` and ``behavioral_cloning_data.bag``, named as the
annotation pipeline names them.

Exact both ways: action-value -> board -> action-value gives the same set of
records with identical float values. It runs on the DirectRunner by default;
any Beam runner with the usual options (``--runner
DataflowRunner ...``) for the published dataset's size. The job (``searchless-convert``,
`searchless.pipelines.convert.run`, where its graph is read) writes
``OUTPUT_DIR/convert.json`` (`ConversionSummary`: counts, bytes per
action-value of input and output).

>>> ConversionSummary.format_id(), ConversionSummary.FILE
('searchless-convert/1', 'convert.json')
>>> check_inputs('in.bag', to='tensors')
Traceback (most recent call last):
...
searchless.plumbing.errors.BadInput: to must be one of ('board', 'chessbench'), got 'tensors'
"""

from collections.abc import Iterable
import dataclasses
import json
import time
from typing import Any, ClassVar

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import DoOutputsTuple, PBegin, PCollection
from bagz.beam import bagzio

from searchless.core import artefacts
from searchless.core import bags
from searchless.core import codecs
from searchless.core import records
from searchless.data import boards as boards_lib
from searchless.data import manifest as manifest_lib
from searchless.plumbing import errors

TARGETS = ('board', 'chessbench')  # What a conversion converts to.
INPUT_KIND = {'board': 'action_value', 'chessbench': records.BOARD_VALUE}  # The record kind each target reads.
BAD_BOARDS = 'bad_boards.jsonl'  # Boards whose moves are not their legal moves (to='board').


@dataclasses.dataclass(frozen=True)
class ConversionSummary(artefacts.Artefact):
  """What a conversion read and wrote (``OUTPUT_DIR/convert.json``)."""

  FORMAT: ClassVar[str] = 'searchless-convert'
  FILE: ClassVar[str] = 'convert.json'

  code: dict[str, Any]  # Package version, Python, git commit.
  input: str  # The input bag spec.
  output_dir: str  # Where the converted bags went.
  to: str  # 'board' or 'chessbench'.
  input_records: int  # Records in the input.
  outputs: dict[str, dict[str, Any]]  # Per record kind written: files, records.
  bad_boards: int  # Boards left out (to='board' with skip_bad_boards).
  action_values: int  # Action values the data holds (input for 'board', output for 'chessbench').
  bytes_per_action_value: dict[str, float]  # Of the action_value and the board_value records.
  wall_seconds: float  # Wall-clock of the job.

  def lines(self) -> str:
    """A few human lines about the conversion."""
    b = self.bytes_per_action_value
    counts = ', '.join(f'{o["records"]} {kind}' for kind, o in self.outputs.items())
    bad = f', {self.bad_boards} bad boards left out' if self.bad_boards else ''
    files = ', '.join(f for o in self.outputs.values() for f in o['files'])
    return '\n'.join(
      [
        f'{self.input_records} records -> {counts}{bad}',
        f'bytes per action-value: action_value {b["action_value"]:.1f}, board_value {b["board_value"]:.1f}'
        f' ({b["action_value"] / b["board_value"]:.2f}x smaller)',
        f'wrote {files}; summary {FileSystems.join(self.output_dir, self.FILE)}',
      ]
    )


BAD = 'bad'  # Tagged output of `GroupIntoBoards`: boards whose moves are not their legal moves.


class GroupIntoBoards(beam.PTransform):
  """Action-value records -> `BoardValue` records (main output) and bad boards (`BAD`).

  Records of one board may be anywhere in the input: they are grouped by FEN.
  Optional state-value records (`state_values`, a PCollection of (fen, value))
  give each board its own value; a board without one takes its best move's.
  A board whose moves are not exactly its legal moves goes to the `BAD` output
  as ``{'fen', 'reason', 'moves'}``.
  """

  def __init__(self, state_values: beam.PCollection | None = None):
    super().__init__()
    self._state_values = state_values

  @beam.typehints.no_annotations  # For readers: Beam has no type hint for several outputs.
  def expand(self, action_values: PCollection[records.ActionValue]) -> DoOutputsTuple:
    keyed = {'av': action_values | 'ByFen' >> beam.Map(lambda r: (r[0], (r[1], r[2])))}
    if self._state_values is not None:
      keyed['sv'] = self._state_values | 'SvByFen' >> beam.Map(lambda r: (r[0], r[1]))

    def to_board(fen_groups):
      fen, groups = fen_groups
      pairs = list(groups['av'])
      svs = list(groups.get('sv', []))
      if not pairs and not svs:
        return
      reason = boards_lib.mismatch(fen, [m for m, _ in pairs])
      if reason is None and len(set(svs)) > 1:
        reason = f'{len(svs)} different state values'
      if reason is not None:
        yield beam.pvalue.TaggedOutput(BAD, {'fen': fen, 'reason': reason, 'moves': len(pairs)})
        return
      yield boards_lib.from_action_values(fen, pairs, svs[0] if svs else None)

    return (
      keyed
      | 'GroupByFen' >> beam.CoGroupByKey()
      | 'ToBoards' >> beam.FlatMap(to_board).with_outputs(BAD, main='boards')
    )


class BoardsToChessBench(beam.PTransform):
  """`BoardValue` records -> {kind: PCollection} of the three ChessBench datasets."""

  @beam.typehints.no_annotations  # For readers: Beam has no type hint for a dict of outputs.
  def expand(self, boards: PCollection[records.BoardValue]) -> dict[str, PCollection]:
    return {
      kind: boards | f'To[{kind}]' >> beam.FlatMap(lambda b, k: boards_lib.to_chessbench(b)[k], kind)
      for kind in records.KINDS
    }


class RecordCoder(beam.coders.Coder):
  """A Beam coder of one record kind: `records.encode`'s bytes (the reference's coders' bytes)."""

  def __init__(self, kind: str):
    self._kind = kind

  def encode(self, value: tuple) -> bytes:
    return records.encode(self._kind, value)

  def decode(self, encoded: bytes) -> tuple:
    return records.decode(self._kind, encoded)

  def is_deterministic(self) -> bool:
    return True


class ReadRecords(beam.PTransform):
  """A pipeline's root -> the `kind` records of bag `spec`, decoded to `records` types."""

  def __init__(self, spec: str, kind: str):
    super().__init__()
    self._spec, self._kind = spec, kind

  def expand(self, pbegin: PBegin) -> PCollection:  # Of records.RECORD_TYPES[kind].
    return (
      pbegin
      | 'Read' >> bagzio.ReadFromBagz(bags.expand(self._spec))
      | 'Decode' >> beam.Map(lambda data, k: records.decode(k, data), self._kind)
    )


class WriteBadBoards(beam.PTransform):
  """Bad boards (`GroupIntoBoards`'s `BAD` output) -> ``OUTPUT_DIR/bad_boards.jsonl``."""

  def __init__(self, output_dir: str):
    super().__init__()
    self._output_dir = output_dir

  def expand(self, bad: PCollection[dict[str, str | int]]) -> PCollection[str]:  # The file written.
    return (
      bad
      | 'ToJson' >> beam.Map(lambda b: json.dumps(b, sort_keys=True))
      | 'Write'
      >> beam.io.WriteToText(
        FileSystems.join(self._output_dir, BAD_BOARDS.removesuffix('.jsonl')),
        file_name_suffix='.jsonl',
        shard_name_template='',
      )
    )


def _size(spec: str) -> int:
  paths = bags.expand(spec).split(',')
  return sum(m.size_in_bytes for p in paths for m in FileSystems.match([p])[0].metadata_list)


def _count_checking_kind(spec: str, kind: str) -> int:
  """Number of records in `spec`; raises ValueError naming the spec unless they are `kind`."""
  reader = bags.reader(spec)
  if not len(reader):
    raise errors.BadInput(f'{spec!r} holds no records')
  codecs.check_kind(spec, kind, reader)
  return len(reader)


def _read_bad_boards(output_dir: str) -> list[dict[str, Any]]:
  with FileSystems.open(FileSystems.join(output_dir, BAD_BOARDS)) as f:
    return [json.loads(line) for line in f.read().decode('utf-8').splitlines() if line]


def check_inputs(
  input: str,  # pylint: disable=redefined-builtin
  to: str,
  state_values: str | None = None,
  skip_bad_boards: bool = False,
) -> int:
  """The number of records in `input` to convert `to` a target; a one-line error where the flags or the inputs'
  record kinds do not fit it."""
  if to not in TARGETS:
    raise errors.BadInput(f'to must be one of {TARGETS}, got {to!r}')
  if to == 'chessbench' and (state_values or skip_bad_boards):
    raise errors.BadInput('--state_values and --skip_bad_boards apply to --to board only')
  if state_values:
    _count_checking_kind(state_values, 'state_value')
  return _count_checking_kind(input, INPUT_KIND[to])


def summary(
  input: str,  # pylint: disable=redefined-builtin
  output_dir: str,
  to: str,
  kinds: Iterable[str],
  in_records: int,
  skip_bad_boards: bool,
  start: float,
) -> ConversionSummary:
  """After the job ran: what it wrote, counted and written to convert.json; boards that are not exactly their legal
  moves (unless skipped) an error, the records written removed."""
  written = {kind: bags.find(output_dir, kind) for kind in kinds}
  counts = {kind: len(bags.reader(spec)) for kind, spec in written.items()}
  bad = _read_bad_boards(output_dir) if to == 'board' else []
  action_values = in_records if to == 'board' else counts['action_value']
  board_spec = written.get(records.BOARD_VALUE, input)
  av_spec = input if to == 'board' else written['action_value']
  summary = ConversionSummary(
    code=manifest_lib.code_version(),
    input=input,
    output_dir=output_dir,
    to=to,
    input_records=in_records,
    outputs={kind: {'files': spec.split(','), 'records': counts[kind]} for kind, spec in written.items()},
    bad_boards=len(bad),
    action_values=action_values,
    bytes_per_action_value={
      'action_value': _size(av_spec) / max(action_values, 1),
      'board_value': _size(board_spec) / max(action_values, 1),
    },
    wall_seconds=round(time.time() - start, 3),
  )
  if bad and not skip_bad_boards:
    FileSystems.delete([p for spec in written.values() for p in spec.split(',')])
    first = bad[0]
    raise errors.BadInput(
      f'{len(bad)} board(s) of {input!r} have moves that are not exactly their legal moves'
      f' (first: {first["fen"]!r}: {first["reason"]}); all listed in'
      f' {FileSystems.join(output_dir, BAD_BOARDS)}; --skip_bad_boards converts the others'
    )
  summary.write(FileSystems.join(output_dir, ConversionSummary.FILE))
  return summary


def existing(output_dir: str, kinds: Iterable[str]) -> list[str]:
  """The files of an earlier conversion of `kinds` into `output_dir`."""
  found = [FileSystems.join(output_dir, name) for name in (ConversionSummary.FILE, BAD_BOARDS)]
  found = [path for path in found if FileSystems.exists(path)]
  for kind in kinds:
    try:
      found += bags.find(output_dir, kind).split(',')
    except FileNotFoundError:
      pass
  return found
