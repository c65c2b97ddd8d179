"""Admission refusals: a stable code and one line saying what was refused and why."""

from __future__ import annotations

from fdcore.errors import FdcoreError


class AdmissionRefused(FdcoreError):
    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(f"{code}: {message}")
