"""/v1/pgn's parser, in a process of its own: a PGN is parsed away from the server's interpreter lock.

A PGN is parsed by python-chess, in Python: the heaviest body the server takes (`inputs.MAX_PGN_PLIES` moves,
variations included) holds the interpreter for 40-60 ms. On a thread of the server it shares the interpreter's
lock with the event loop and the model's thread, and every answer meanwhile waits for that lock, in turns of
5 ms (a lone position's answer went from 3 ms to 30). In a process of its own, at a lower priority (nice 10), it
shares only the cores, and gives them up to the server first.

`Parser` (the server's side) runs ``python -m searchless.play.serve.parser`` and asks it one body at a time:
the body's length (4 bytes, big-endian) and the body on its stdin; the answer (`inputs.pgn_answer`, or
``{"bad": message, "status": 400}`` for a `inputs.BadRequest`) the same way on its stdout. A process that ends
(killed, or a fault) is started again: the body it was given is asked once more of the new one, and fails with
a `ParserFault` (500) if that one ends too.
"""

import asyncio
import os
import signal
import struct
import subprocess
import sys
import threading
from typing import IO, Any

import orjson

from searchless.play.serve import inputs

_LENGTH = struct.Struct('>I')


class ParserFault(Exception):
  """The parser's process ended while parsing a body (twice, in two processes)."""


class Parser:
  """The server's side: `answer` parses a /v1/pgn body in the parser's process (started by `start`, or by the
  first body), one body at a time. A thread of the event loop's executor waits on the pipes (with the
  interpreter's lock free); a request cancelled meanwhile (its client left) still reads its answer there, so the
  next one reads its own."""

  def __init__(self) -> None:
    self._process: subprocess.Popen[bytes] | None = None
    self._turn = threading.Lock()  # One body in the process at a time.

  def start(self) -> None:
    if self._process is None or self._process.poll() is not None:
      # Started with subprocess (posix_spawn): not forked from the threads of the server (JAX's) as uvloop would.
      self._process = subprocess.Popen(
        [sys.executable, '-m', __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=False
      )

  async def answer(self, body: bytes) -> dict[str, Any]:
    """The /v1/pgn answer to `body`; `inputs.BadRequest` as `inputs.pgn_answer` raises it."""
    answer = await asyncio.get_running_loop().run_in_executor(None, self._exchange, body)
    if 'bad' in answer:
      raise inputs.BadRequest(answer['bad'], answer['status'])
    return answer

  def _exchange(self, body: bytes) -> dict[str, Any]:
    with self._turn:
      for attempt in range(2):
        self.start()
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
          process.stdin.write(_LENGTH.pack(len(body)) + body)
          process.stdin.flush()
          (size,) = _LENGTH.unpack(_read(process.stdout, _LENGTH.size))
          return orjson.loads(_read(process.stdout, size))
        except (OSError, EOFError):
          process.kill()
          process.wait()
          if attempt:
            raise ParserFault(f'the PGN parser process ended (exit status {process.returncode}) on this body') from None
    raise AssertionError('unreachable')

  def stop(self) -> None:
    """Ends the process (at the end of its input) and waits for it."""
    with self._turn:
      process, self._process = self._process, None
      if process is None:
        return
      assert process.stdin is not None and process.stdout is not None
      process.stdin.close()
      try:
        process.wait(5)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
      process.stdout.close()


def _read(pipe: IO[bytes], size: int) -> bytes:
  data = pipe.read(size)
  if len(data) != size:
    raise EOFError(f'{len(data)} of {size} bytes')
  return data


def _serve() -> None:
  """The parser's process: answers the bodies on stdin, one after another, until its end."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which ends this process's input.
  os.nice(10)  # A core shared with the server goes to the server's answers first: the heaviest PGN waits, not them.
  read, write = sys.stdin.buffer.read, sys.stdout.buffer
  while len(head := read(_LENGTH.size)) == _LENGTH.size:
    body = read(_LENGTH.unpack(head)[0])
    try:
      answer = orjson.dumps(inputs.pgn_answer(body))
    except inputs.BadRequest as bad:
      answer = orjson.dumps({'bad': str(bad), 'status': bad.status})
    write.write(_LENGTH.pack(len(answer)) + answer)
    write.flush()


if __name__ == '__main__':
  _serve()
