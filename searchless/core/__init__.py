"""What every stage shares: moves, FEN tokens, value buckets, ChessBench records, bag files and experiment configs."""
