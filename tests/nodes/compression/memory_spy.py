"""What each worker had before the aggregate credited it: the error-feedback invariant's left side."""


def record_compensated(scheme) -> dict:
    """Wrap `scheme.memory.compensate` so that the returned dict holds, per worker, the
    compensated gradient (gradient plus memory) of its latest call, cloned: the memory may
    change that tensor in place afterwards."""
    had = {}
    compensate = scheme.memory.compensate

    def spy(worker, grad):
        out = compensate(worker, grad)
        had[worker] = out.clone()
        return out

    scheme.memory.compensate = spy
    return had
