"""A client that leaves while its request waits (`searchless.play.serve.app.unless_gone`, `gone_cancelled`): a
real TCP connection on 127.0.0.1 whose client resets it at a moment the test sets, read by the loop's own
transport; uvicorn's part (its disconnect event and `receive`) is played by a protocol of a few lines. The real
server's leavers are in tests/integration/test_serve_guard.py and `benchmarks/serve_abuse.py`; there, the turn at
which a reset is read, against a request's checks, is a matter of timing, which this fixes."""

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from searchless.play.serve import app

from serve_process import reset_on_close


def _runners() -> list:
  """asyncio's loop, and uvloop's (uvicorn's when installed)."""
  try:
    import uvloop  # pylint: disable=import-outside-toplevel
  except ImportError:
    return [asyncio.run]
  return [asyncio.run, uvloop.run]


def _done(leave_at: str, wait: Callable[[], Awaitable[None]], runner) -> list[str]:
  """What becomes of a request whose work does `wait()` then its checks, when its client resets its connection
  (a real TCP connection on 127.0.0.1, read by the loop's transport as uvicorn's is) as the work starts
  (``start``: the reset is there at the loop's next look at its sockets) or once its checks are done (``end``)."""
  done: list[str] = []

  async def main() -> None:
    loop = asyncio.get_running_loop()
    disconnect = asyncio.Event()

    class Protocol(asyncio.Protocol):  # uvicorn's disconnect: the connection lost, its event set.
      def connection_lost(self, exc: Exception | None) -> None:
        disconnect.set()

    with socket.create_server(('127.0.0.1', 0)) as listener:
      client = socket.create_connection(listener.getsockname())
      reset_on_close(client)
      accepted, _ = listener.accept()
    await loop.connect_accepted_socket(Protocol, accepted)

    async def receive() -> dict:  # uvicorn's: once the body is read, the next message is the disconnect.
      await disconnect.wait()
      return {'type': 'http.disconnect'}

    async def work() -> str:
      if leave_at == 'start':
        client.close()
      await wait()
      done.append('checked')
      if leave_at == 'end':
        client.close()
      return 'answered'

    try:
      done.append(await app.unless_gone(receive, work()))
    except app.ClientGone:
      done.append('gone')

  runner(main())
  return done


async def _two_turns() -> None:
  for _ in range(2):
    await asyncio.sleep(0)


@pytest.mark.parametrize('runner', _runners())
def test_a_reset_there_at_the_loops_next_look_cancels_the_request_before_its_checks(runner):
  assert _done('start', app.gone_cancelled, runner) == ['gone']
  # Two turns read it, but the watcher's cancel comes after the checks ran and the answer was made.
  assert _done('start', _two_turns, runner) == ['checked', 'answered']


@pytest.mark.parametrize('runner', _runners())
def test_a_reset_after_the_checks_leaves_them_done(runner):
  assert _done('end', app.gone_cancelled, runner) == ['checked', 'answered']
