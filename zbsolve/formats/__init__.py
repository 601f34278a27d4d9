"""Files zbsolve reads and writes: schedule JSON, PyTorch's compute_only CSV, Chrome traces."""
