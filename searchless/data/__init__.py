"""From games to records: PGN reading, board extraction and splits, the annotation graph, self-play, the grain loader."""
