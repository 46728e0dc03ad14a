"""searchless: distil a chess engine into a transformer that plays without search.

The package reads as the data flow:

* ``pgn``        - stream games out of (compressed) PGN files.
* ``boards``     - turn games into de-duplicated, split board states.
* ``engine``     - drive a UCI engine (Stockfish) to value every legal move.
* ``annotate``   - the Apache Beam transforms that tie these together.
* ``records`` / ``bags`` - the ChessBench record formats and their bag files.
* ``tokenizer`` / ``moves`` / ``values`` - the model's view of a record.
"""

import logging


class _QuietBeamImport(logging.Filter):
  """Drops Beam's import-time 'apitools not found' warning (GCS extras not installed)."""

  def filter(self, record: logging.LogRecord) -> bool:
    return 'apitools not found' not in record.getMessage()


logging.getLogger().addFilter(_QuietBeamImport())

__version__ = "0.1.0"
