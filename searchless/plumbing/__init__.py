"""What every command runs on, none of the chess domain in it: paths and http(s) inputs, fetching, atomic writes,
folder locks, output folders, the command-line parser, how a command fails, progress bars and TensorBoard logs."""
