"""How the torch kernels bound their temporaries: column chunks of a budget of entries."""

from __future__ import annotations

from collections.abc import Iterator

import torch

#: Default cap on the entries of the largest per-chunk temporary: (n, k) for
#: LOO-AUC, (k, n, n) for the surrogate. 2**22 float64 entries are 32 MiB.
DEFAULT_CHUNK_ELEMENTS = 1 << 22

#: On CUDA the default cap is sized by the free device memory instead: every
#: chunk costs a fixed run of kernel launches, and 2**22-entry chunks left an
#: H200 idle most of the time (a batch of 2 000 ACES-C tasks of 200x500 ran 49
#: chunks, 9 902 kernels: 26.6 ms of kernels in 226 ms; LOO-AUC 100 000 x 2 000
#: ran 50 chunks, 5.3 ms of kernels in 16.6 ms; benchmarks/results/
#: 2026-11-29-h200.txt). The share of the free memory the temporaries may take:
CUDA_CHUNK_MEMORY_FRACTION = 0.25
#: bytes of temporaries assumed per chunk entry: the peak measured on CPU
#: tensors was 10 bytes per padded cell for batched ACES-C and 6 for LOO-AUC
CHUNK_BYTES_PER_ELEMENT = 32
#: and never more than 2**30 entries per chunk, nor fewer than the CPU's default
MAX_DEVICE_CHUNK_ELEMENTS = 1 << 30


def chunk_budget(device: torch.device, chunk_elements: int | None) -> int:
    """The cap on a chunk's entries for temporaries on ``device``.

    ``chunk_elements`` when given (the caller's cap); on CUDA
    ``CUDA_CHUNK_MEMORY_FRACTION`` of the free device memory at
    ``CHUNK_BYTES_PER_ELEMENT`` bytes per entry, clamped to
    [``DEFAULT_CHUNK_ELEMENTS``, ``MAX_DEVICE_CHUNK_ELEMENTS``]; elsewhere
    ``DEFAULT_CHUNK_ELEMENTS``. Reads the free memory (``cudaMemGetInfo``, no
    stream synchronization), no tensor.
    """
    if chunk_elements is not None:
        return max(1, int(chunk_elements))
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        share = int(free * CUDA_CHUNK_MEMORY_FRACTION) // CHUNK_BYTES_PER_ELEMENT
        return min(MAX_DEVICE_CHUNK_ELEMENTS, max(DEFAULT_CHUNK_ELEMENTS, share))
    return DEFAULT_CHUNK_ELEMENTS


def column_chunks(m: int, per_column: int, budget: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` column ranges with ``per_column * (stop - start) <= budget``.

    A chunk always holds at least one column, so a single huge column still runs.
    """
    size = max(1, budget // max(1, per_column))
    for start in range(0, m, size):
        yield start, min(m, start + size)
