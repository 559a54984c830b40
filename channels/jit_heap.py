"""Binary min-heaps keyed by (time, seq), for the compiled engine loops (relay.py, csma_fast.py).

A heap lives in rows off..off+n-1 of two tables that share row numbers: F (floats, column 0 the
time) and I (integers, column 0 the sequence number that breaks ties, so equal times pop in the
order they were pushed, as SimPy's event queue does). Other columns ride along with their row.
"""
from __future__ import annotations

from numba import njit


@njit(cache=True)
def less(F, I, a, b):
    return F[a, 0] < F[b, 0] or (F[a, 0] == F[b, 0] and I[a, 0] < I[b, 0])


@njit(cache=True)
def swap(F, I, a, b):
    for c in range(F.shape[1]):
        F[a, c], F[b, c] = F[b, c], F[a, c]
    for c in range(I.shape[1]):
        I[a, c], I[b, c] = I[b, c], I[a, c]


@njit(cache=True)
def sift_up(F, I, off, i):
    """Restore the heap at off after its row i (the last) was written."""
    while i > 0:
        p = (i - 1) // 2
        if not less(F, I, off + i, off + p):
            break
        swap(F, I, off + i, off + p)
        i = p


@njit(cache=True)
def sift_down(F, I, off, i, n):
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and less(F, I, off + c + 1, off + c):
            c += 1
        if not less(F, I, off + c, off + i):
            break
        swap(F, I, off + i, off + c)
        i = c


@njit(cache=True)
def pop(F, I, off, n):
    """Remove the top (already read) of the heap of n rows at off; returns n - 1."""
    n -= 1
    if n > 0:
        swap(F, I, off, off + n)
        sift_down(F, I, off, 0, n)
    return n
