"""The host slot errors: each carries a stable code an operator looks up in docs/host.md."""

from __future__ import annotations

from fdcore.errors import FdcoreError


class HostSlotError(FdcoreError):
    """A host folder refused an operation; ``code`` names the rule, the text says where."""

    code = "HOST_SLOT_ERROR"

    def __init__(self, host: object, message: str) -> None:
        self.host = str(host)
        super().__init__(f"{self.code}: {self.host}: {message}")


class CapacityInvalid(HostSlotError):
    code = "HOST_SLOT_CAPACITY_INVALID"


class SlotIdInvalid(HostSlotError):
    code = "HOST_SLOT_ID_INVALID"


class LeaseInvalid(HostSlotError):
    code = "HOST_SLOT_LEASE_INVALID"


class LayoutOutdated(HostSlotError):
    code = "HOST_LAYOUT_OUTDATED"


class LayoutUnknown(HostSlotError):
    """A stored layout this code cannot place (no label, not a number, or half-migrated without
    its residue)."""

    code = "HOST_LAYOUT_UNKNOWN"


class RollbackUnsafe(HostSlotError):
    """A layout newer than this code knows: a newer release migrated the folder, and this
    older one would break rules it cannot see (such as the generations that fence leases)."""

    code = "HOST_UPGRADE_ROLLBACK_UNSAFE"


class DrainRequired(HostSlotError):
    code = "HOST_UPGRADE_DRAIN_REQUIRED"


class ShrinkRefused(HostSlotError):
    code = "HOST_SLOT_SHRINK_REFUSED"


class HostBusy(HostSlotError):
    """No lease now; trying again later may succeed (not a fault of the host folder)."""


class WorkspaceBusy(HostBusy):
    code = "WORKSPACE_BUSY"


class CapacityBusy(HostBusy):
    code = "CAPACITY_BUSY"


class SlotLost(HostSlotError):
    """The lease a caller names (request and token) is not on the host any more."""

    code = "HOST_SLOT_LOST"
