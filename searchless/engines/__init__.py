"""Chess engines: finding, opening and configuring Stockfish (or any UCI engine), and the annotator valuing moves."""
