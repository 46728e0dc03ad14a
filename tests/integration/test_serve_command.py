"""`searchless-serve`'s process: one malloc arena for all its threads (glibc)."""

import subprocess
import sys

import pytest

# Four threads allocate (past pymalloc's 512 bytes: glibc's malloc); glibc's malloc_info then lists one <heap> per
# arena: the count is printed.
ARENAS = """
import ctypes, sys, threading
from searchless.commands import serve
if sys.argv[1] == 'one':
  serve.one_malloc_arena()
def work():
  kept = [bytearray(4096) for _ in range(1000)]
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
  t.start()
for t in threads:
  t.join()
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
buffer, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(buffer.value.decode().count('<heap nr='))
"""


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='glibc (Linux)')
def test_the_servers_threads_allocate_from_one_arena():
  def arenas(mode: str) -> int:
    return int(subprocess.run([sys.executable, '-c', ARENAS, mode], capture_output=True, text=True, check=True).stdout)

  assert arenas('one') == 1
  assert arenas('default') > 1  # Each thread its own, without it.
