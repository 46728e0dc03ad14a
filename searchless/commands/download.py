"""searchless-download: fetch the published ChessBench checkpoints and data, and Lichess's dumps.

    searchless-download chessbench-checkpoints 270M     # then: searchless-uci --checkpoint chessbench-270M
    searchless-download chessbench-data test puzzles     # the test bags and the paper's 10k puzzles
    searchless-download chessbench-data train --shards 0-99
    searchless-download lichess-games 2024-01 --dry_run  # the URL, size and destination; nothing fetched

Files land under --out (default: $SEARCHLESS_DATA, else ~/.cache/searchless), resumably: rerun the same
command after Ctrl-C, a kill or a dropped connection. What each target fetches, and how it is checked:
`searchless.core.published` and `searchless.core.downloads`.
"""

import argparse
from collections.abc import Sequence
import os
import textwrap

import tqdm

from searchless.core import downloads
from searchless.core import published
from searchless.plumbing import cli
from searchless.plumbing import errors
from searchless.plumbing import fetch


def _size(n: int | None) -> str:
  return '?' if n is None else tqdm.tqdm.format_sizeof(n, 'B')


def _parser() -> argparse.ArgumentParser:
  targets = '\n'.join(f'  {t:24s}{textwrap.shorten(text, 200)}' for t, text in published.TARGETS.items())
  p = cli.ArgumentParser(
    prog='searchless-download',
    description=__doc__.split('\n\n')[0],
    epilog=f'targets and their items:\n{targets}\n\n'
    'the strongest published model, in two commands:\n'
    '  searchless-download chessbench-checkpoints 270M\n'
    '  searchless-uci --checkpoint chessbench-270M',
    formatter_class=type('Formatter', (cli.DefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter), {}),
  )
  p.add_argument('target', choices=published.TARGETS, metavar='TARGET', help='what to fetch (below)')
  p.add_argument('items', nargs='*', metavar='ITEM', help="the target's items (below); none: its default")
  p.add_argument(
    '--out',
    type=cli.output_dir,
    default=None,
    help=f'the data folder (default: ${published.DATA_ENV}, else ~/.cache/searchless, where checkpoint names '
    'such as chessbench-270M are looked up)',
  )
  p.add_argument('--shards', default=None, help='with chessbench-data train: a count N (the first N) or 0-99,200-299')
  p.add_argument('--jobs', type=int, default=4, help='files fetched at once')
  dead, stalled = (fetch.give_up_after(fetch.RETRIES, wait) for wait in fetch.TIMEOUT)
  p.add_argument(
    '--retries',
    type=int,
    default=fetch.RETRIES,
    help='tries again after a refused, dropped or stalled connection or a 429/5xx answer, 1, 2, 4, ... s apart '
    f'(default: {fetch.RETRIES}: a server that cannot be reached is reported within {dead:.0f} s, one that stops '
    f'sending, {fetch.TIMEOUT[1]:g} s without a byte, within {stalled:.0f} s)',
  )
  p.add_argument(
    '--base_url',
    default=None,
    help=f'a mirror: replaces the scheme and host of every URL, keeping its path (default: ${published.BASE_URL_ENV})',
  )
  p.add_argument('--dry_run', action='store_true', help='list each URL, its size and destination; fetch nothing')
  p.add_argument('--no_progress', action='store_true', help='no progress bar')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  if args.jobs < 1 or args.retries < 0:
    errors.fail('--jobs must be at least 1 and --retries at least 0')
  root = published.data_root() if args.out is None else os.path.abspath(args.out)
  base_url = args.base_url if args.base_url is not None else os.environ.get(published.BASE_URL_ENV)
  with errors.one_line_errors():
    remotes = published.remotes(args.target, args.items, shards=args.shards)
    result = downloads.download(
      remotes,
      root,
      base_url=base_url,
      jobs=args.jobs,
      retries=args.retries,
      progress=not args.no_progress,
      dry_run=args.dry_run,
    )
  if args.dry_run:
    lines = [f'{r.url}  already there: {result.root / r.final}' for r in result.present]
    lines += [
      f'{j.url}  {j.error or _size(j.size)}  -> {j.dest}' + (' (fetched; to unpack)' if j.fetched else '')
      for j in result.jobs
    ]
    lines.append(f'{len(result.jobs)} files to fetch, {_size(result.bytes)}; nothing fetched (--dry_run)')
    errors.print_or_quit('\n'.join(lines))
    if failed := [j for j in result.jobs if j.error]:
      errors.fail(f'{len(failed)} of {len(result.jobs)} files cannot be fetched (listed above)')
    return
  lines = [
    f'fetched {len(result.jobs)} files ({_size(result.bytes)}), {len(result.present)} already there, in {result.root}'
  ]
  for checked in (True, False):  # The files no checksum checked: their format did, or (a .pgn) nothing could.
    if names := [j.remote.path.as_posix() for j in result.unverified if bool(j.format) == checked]:
      more = f' and {len(names) - 10} more ({downloads.RECORD} says which)' if len(names) > 10 else ''
      said = f'{downloads.UNVERIFIED}, {downloads.FORMAT_CHECKED}' if checked else downloads.UNVERIFIED
      lines.append(f'{len(names)} {said}: {", ".join(names[:10])}{more}')
  for r in remotes:
    if r.unpack:
      name = published.NAME_PREFIX + r.final.name
      where = result.root / r.final
      usable = where == published.checkpoint_folder(name)
      lines.append(f'{name}: {where} (play it: searchless-uci --checkpoint {name if usable else where})')
  errors.print_or_quit('\n'.join(lines))


if __name__ == '__main__':
  main()
