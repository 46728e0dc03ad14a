"""``searchless-uci``: a checkpoint as a UCI engine for any chess GUI (`searchless.play.uci`).

    searchless-uci --checkpoint DIR [--policy P] [--dtype auto|float32|bfloat16]
                   [--temperature T] [--threads N] [--seed S] [--compilation_cache DIR]

Speaks UCI on stdin/stdout until ``quit`` or the end of input; logs go to stderr.
"""

import argparse
from collections.abc import Sequence

from searchless.play import compilation_cache
from searchless.play import policy as policy_lib
from searchless.play import uci
from searchless.play.uci import protocol
from searchless.plumbing import cli
from searchless.plumbing import errors


def _threads(text: str) -> int:
  """--threads: the Threads option's own range, refused here as `setoption` refuses it."""
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f'expected an integer, got {text!r}') from None
  if not 1 <= value <= protocol.MAX_THREADS:
    raise argparse.ArgumentTypeError(f'expected 1 to {protocol.MAX_THREADS} (the Threads option), got {value}')
  return value


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(
    prog='searchless-uci', description='A UCI engine over a checkpoint: the searchless player behind any chess GUI.'
  )
  p.add_argument(
    '--checkpoint',
    required=True,
    help="Workdir, checkpoint dir, published-layout model dir, a shipped model's name ('pretrained') or a downloaded"
    " published one's ('chessbench-270M': searchless-download chessbench-checkpoints 270M).",
  )
  p.add_argument(
    '--policy',
    choices=policy_lib.POLICIES,
    help="Default: the checkpoint's (published: by its name, else action_value).",
  )
  cli.add_dtype(p)
  p.add_argument('--temperature', type=float, default=0.0, help='Default of the Temperature option (0: argmax).')
  p.add_argument(
    '--threads', type=_threads, default=None, help='The Threads option at start-up (default: all available CPUs).'
  )
  p.add_argument('--seed', type=int, help='Sampling seed (default: fresh entropy).')
  p.add_argument(
    '--search',
    default='none',
    choices=uci.SEARCHES,
    help='Default of the Search option: none (the searchless player), mcts or alphabeta over its policy.',
  )
  compilation_cache.add_flag(p)
  cli.add_log_level(p)
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  cli.start_logging(args.log_level)
  with errors.one_line_errors():
    uci.run(
      args.checkpoint,
      policy=args.policy,
      dtype=args.dtype,
      temperature=args.temperature,
      threads=args.threads,
      seed=args.seed,
      compilation_cache=args.compilation_cache,
      search=args.search,
    )


if __name__ == '__main__':
  main()
