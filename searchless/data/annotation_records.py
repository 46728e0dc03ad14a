"""What annotation writes: the records of each kind made from one annotated board, and the ``--records`` sets.

>>> record_kinds('chessbench,board')
('action_value', 'state_value', 'behavioral_cloning', 'board_value')
"""

from searchless.core import records
from searchless.data import boards
from searchless.engines import annotator as engine_lib
from searchless.plumbing import errors


def action_value_records(annotation: engine_lib.BoardAnnotation) -> list[tuple[str, str, float]]:
  return [(annotation.fen, move, win_prob) for move, win_prob in annotation.action_values]


def state_value_records(annotation: engine_lib.BoardAnnotation) -> list[tuple[str, float]]:
  return [(annotation.fen, annotation.state_value)]


def behavioral_cloning_records(annotation: engine_lib.BoardAnnotation) -> list[tuple[str, str]]:
  return [] if annotation.best_move is None else [(annotation.fen, annotation.best_move)]


def board_value_records(annotation: engine_lib.BoardAnnotation) -> list[records.BoardValue]:
  return [boards.from_action_values(annotation.fen, annotation.action_values, annotation.state_value)]


RECORDS_OF = {
  'action_value': action_value_records,
  'state_value': state_value_records,
  'behavioral_cloning': behavioral_cloning_records,
  records.BOARD_VALUE: board_value_records,
}
# --records choices: the record kinds each writes.


RECORD_SETS = {'chessbench': records.KINDS, 'board': (records.BOARD_VALUE,)}


def record_kinds(spec: str, mode: str = 'per_move') -> tuple[str, ...]:
  """The record kinds a ``--records`` value names (comma-separated RECORD_SETS keys) in engine `mode`.

  In ``board`` mode (one search per board, no move values) the ChessBench set
  is its state_value and behavioral_cloning datasets.

  >>> record_kinds('chessbench,board')
  ('action_value', 'state_value', 'behavioral_cloning', 'board_value')
  >>> record_kinds('chessbench', 'board')
  ('state_value', 'behavioral_cloning')
  """
  names = [n.strip() for n in spec.split(',') if n.strip()]
  unknown = [n for n in names if n not in RECORD_SETS]
  if unknown or not names:
    raise errors.BadInput(f'--records {spec!r}: expected a comma-separated subset of {sorted(RECORD_SETS)}')
  kinds = tuple(kind for name in names for kind in RECORD_SETS[name])
  if mode == 'board':
    if 'board' in names:
      raise errors.BadInput(
        f'--records {spec!r}: --mode board values no moves, so it has no board_value records; '
        'use --records chessbench (state_value and behavioral_cloning)'
      )
    kinds = tuple(k for k in kinds if k != 'action_value')
  return kinds
