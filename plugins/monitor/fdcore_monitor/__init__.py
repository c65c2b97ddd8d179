"""fdcore-monitor: ``fdcore monitor``, a live page of one environment, and Prometheus ``/metrics``.

Every figure it shows comes from the view models of the ``fdcore`` commands
(:mod:`fdcore.environment`), so the page, ``/metrics`` and ``fdcore queue --json`` never disagree.
"""

from __future__ import annotations

__version__ = "0.1.0"
