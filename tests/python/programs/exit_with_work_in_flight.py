"""A rank that issues collectives and exits without waiting for them (run by test_reliability).

Every rank issues COUNT all_reduce calls of 16384 floats and lets the interpreter exit at once.
The process must exit 0, printing one warning that names how many collectives were unwaited.
"""

import sys

import c10d_func  # noqa: F401
import torch

count = int(sys.argv[1])
world = int(__import__("os").environ["WORLD_SIZE"])
outputs = [
    torch.ops.c10d_func.all_reduce(torch.ones(16384), "sum", "", list(range(world)), world)
    for _ in range(count)
]
print("issued", len(outputs), flush=True)
