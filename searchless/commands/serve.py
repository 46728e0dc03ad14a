"""``searchless-serve``: a checkpoint as an HTTP service, a JSON API that batches concurrent queries, and a page.

    searchless-serve --checkpoint NAME [--host 127.0.0.1] [--port 8000] [--max_batch 64] [--max_wait_ms 0]
                     [--max_queue 1024] [--agent search:...] [--stockfish] [--policy P] [--dtype D]
                     [--token T | --no_token] [--allow_host NAME] [--allow_origin URL] [--max_connections 512]
                     [--header_timeout 10] [--body_timeout 10] [--keepalive_timeout 5]

Serves until SIGTERM or Ctrl-C, which answer the requests in flight first
(`searchless.play.serve`; the API in docs/serve.md). Needs the ``serve`` extra.
"""

from collections.abc import Sequence
import ctypes
import sys

from searchless.play import compilation_cache
from searchless.play import policy as policy_lib
from searchless.plumbing import cli
from searchless.plumbing import errors


def _parser() -> cli.ArgumentParser:
  p = cli.ArgumentParser(
    prog='searchless-serve',
    description='The model as an HTTP service: a JSON API that batches concurrent queries, and an analysis page.',
  )
  p.add_argument(
    '--checkpoint',
    required=True,
    help="Workdir, checkpoint dir, published-layout model dir, a shipped model's name ('pretrained') or a downloaded"
    " published one's ('chessbench-270M').",
  )
  p.add_argument(
    '--host', default='127.0.0.1', help='Address to listen on (0.0.0.0: every interface, other machines too).'
  )
  p.add_argument('--port', type=int, default=8000, help='Port to listen on (0: a free one, printed).')
  p.add_argument(
    '--policy',
    choices=policy_lib.POLICIES,
    help="Default: the checkpoint's (published: by its name, else action_value).",
  )
  cli.add_dtype(p)
  p.add_argument('--max_batch', type=int, default=64, help='Positions in one model call, at most.')
  p.add_argument(
    '--max_wait_ms',
    type=float,
    default=0.0,
    help='How long a batch that is not full waits for more positions (0: none; an idle server answers at once).',
  )
  p.add_argument(
    '--max_queue', type=int, default=1024, help='Positions waiting for the model, at most; more are answered 503.'
  )
  p.add_argument(
    '--agent',
    metavar='SPEC',
    help='A search agent, search:CHECKPOINT[,algo=mcts|alphabeta,sims=N,...], that answers POST /v1/play.',
  )
  p.add_argument(
    '--stockfish', action='store_true', help="Answer POST /v1/stockfish: Stockfish's move beside the model's (page)."
  )
  p.add_argument('--engine_path', help='The Stockfish binary for --stockfish (default: found on PATH).')
  p.add_argument(
    '--stockfish_limit', default='time=0.2', help="Stockfish's limit per position: time=S, depth=N, nodes=N."
  )
  p.add_argument(
    '--token',
    help='A secret that API clients send as "Authorization: Bearer TOKEN" (the page: open /?token=TOKEN); needed'
    ' with a --host beyond loopback, unless --no_token.',
  )
  p.add_argument(
    '--no_token', action='store_true', help='Serve beyond loopback without a token: anyone who can reach it.'
  )
  p.add_argument(
    '--allow_host',
    action='append',
    default=[],
    metavar='NAME',
    help="A Host name the server answers besides its address (a DNS name it is reached by; '*': any). Repeatable.",
  )
  p.add_argument(
    '--allow_origin',
    action='append',
    default=[],
    metavar='URL',
    help="Another site's origin whose pages may call the API (https://example.org; '*': any). Repeatable.",
  )
  p.add_argument('--max_connections', type=int, default=512, help='Open connections, at most; more are refused.')
  p.add_argument(
    '--header_timeout', type=float, default=10.0, help="Seconds for a request's head (its line and headers)."
  )
  p.add_argument('--body_timeout', type=float, default=10.0, help="Seconds for a request's body, all of it.")
  p.add_argument(
    '--keepalive_timeout', type=float, default=5.0, help='Seconds an idle kept-alive connection stays open.'
  )
  compilation_cache.add_flag(p)
  cli.add_log_level(p, 'uvicorn and the server')
  return p


M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h).


def one_malloc_arena() -> None:
  """Every thread of this process allocates from one glibc arena, not one of its own (up to 8 a core), before the
  model's threads start. Each arena keeps its own high-water mark: the first calls of 64 positions grew XLA's
  threads' arenas by 20-55 MB that the process kept (+51 MB under `benchmarks/serve_abuse.py`; with one arena,
  +14 to +33 MB), at no speed measured (RESULTS). Not glibc (another C library, another system): nothing."""
  if sys.platform.startswith('linux'):
    try:
      ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
    except (OSError, AttributeError):  # No mallopt in the C library.
      pass


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  one_malloc_arena()
  errors.require_extra('starlette', 'serve', 'searchless-serve')
  errors.require_extra('uvicorn', 'serve', 'searchless-serve')
  errors.require_extra('prometheus_client', 'serve', 'searchless-serve')
  errors.require_extra('orjson', 'serve', 'searchless-serve')
  cli.start_logging(args.log_level)
  from searchless.play.serve import server  # Imports starlette.

  with errors.one_line_errors():
    server.run(**cli.keywords(server.run, args))


if __name__ == '__main__':
  main()
