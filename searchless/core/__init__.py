"""The formats every stage shares: moves, FEN tokens, value buckets, ChessBench records and bag files."""
