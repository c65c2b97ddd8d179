"""The mailbox contract: the files agents share, as typed values, and how they are written.

Owns mailbox contract 1 and status contract 1: the id rule (:mod:`.ids`), the file models
(:mod:`.models`), their JSON codec that keeps unknown fields (:mod:`.codec`), and where each file
lives (:mod:`.layout`). Everything else in fdcore reads and writes the mailbox through these.
The rules every reader and writer keeps live here too: the most attempts and a file's bound
(:mod:`.limits`), what the copies of one schedule must agree on (:mod:`.schedules`), and the
variables a table process is told (:mod:`.table_process`).

Layer 1: imports only :mod:`fdcore.errors`.
"""
