"""fdcore-admission: local admission lanes and their handoff without a gap (docs/host.md).

:mod:`.lanes` the lock files, :mod:`.environment` what a queued row keeps of an environment,
:mod:`.queue` the rows (SQLite) and status entries (JSON), :mod:`.dispatcher` the rules of
enqueue, admission, claim, expiry and restart recovery, :mod:`.wire` the Unix socket between
processes, :mod:`.gate` the agent's side (host admission ``lanes``).
"""
