"""From games to records: input streams, PGN reading, board extraction and splits, the annotation and label
Beam graphs and their jobs, self-play, conversion, and the grain loader."""
