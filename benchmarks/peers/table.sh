#!/bin/bash
# One table of the side-by-side benchmark, the same for every system: work for $PEERS_SECONDS
# (0: none), then append one line to $PEERS_LOG: "request table start end" (wall-clock seconds).
# fdcore's command runner names the table in FDCORE_*; the peers' tasks pass it as arguments.
request=${FDCORE_REQUEST:-$1}
table=${FDCORE_TABLE:-$2}
start=$EPOCHREALTIME
if [ "${PEERS_SECONDS:-0}" != 0 ]; then
    # Who runs it (the takeover workload kills that process): "request table start parent".
    echo "$request $table $start $PPID" >> "$PEERS_LOG.started"
    sleep "$PEERS_SECONDS"
fi
echo "$request $table $start $EPOCHREALTIME" >> "$PEERS_LOG"
