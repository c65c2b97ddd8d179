"""A store wrapper that counts the calls made to it (:mod:`fdcore.mailbox.counting`): how a test
or a benchmark proves what a reader costs in store operations, without timing it."""

from fdcore.mailbox.counting import LISTS, CountingStore

__all__ = [
    "LISTS",
    "CountingStore",
]
