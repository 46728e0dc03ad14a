"""The decoder-only transformer (per move or board-packed) and its losses."""
