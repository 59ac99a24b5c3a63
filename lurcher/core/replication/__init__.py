"""Replication core: Viewstamped Replication Revisited as sans-IO state machines.

Follows Liskov & Cowling, "Viewstamped Replication Revisited" (MIT-CSAIL-TR-2012-021):
normal operation (Prepare / PrepareOk / Commit, commit after f+1 of 2f+1: a majority, so
of an even number of replicas more than half), view change
(StartViewChange / DoViewChange / StartView, choosing the log with the largest last-normal
view, then the largest op-number), recovery (Recovery with a nonce / RecoveryResponse), state
transfer (GetState / NewState) and a client table (one execution per client request
number). One log entry (op) carries a batch of client requests.

Modules: ``messages`` (the values), ``codec`` (their binary form), ``journal`` (the
write-ahead journal and storage intents), ``replica`` (the state machine), ``sim`` (the
deterministic simulator and auditor), ``bench`` (core throughput), ``link`` (the
authenticated node-to-node link; its asyncio side and the node runtime are ``lurcher.cluster``).

Fault model claimed (what the simulator injects and the auditor checks against):
- crash-stop-restart of any number of replicas at any moment, with disks that lose every
  write not covered by a completed sync and may tear the last write (detected by checksum,
  the journal is cut there), including in the middle of writing a checkpoint segment; replicas
  journal an entry and their view before vouching for them (PrepareOk, DoViewChange, StartView,
  NewState, RecoveryResponse are sent only once every earlier journal write is synced), so
  acknowledged state survives any crash;
- loss of a whole disk on at most f replicas at a time: such a replica rejoins only through
  the recovery protocol (it must not vote until a quorum and the primary told it the state);
- an asynchronous network that drops, duplicates, delays and reorders messages and may
  partition replicas (symmetrically or not); paused processes; skewed timers;
- not Byzantine faults, not silent corruption of synced data (a checksum failure in the
  middle of the journal is treated like the torn tail: the journal is cut), and not more
  than f simultaneous disk losses. Safety never depends on timing; liveness needs a
  quorum of f+1 replicas up and connected for long enough.

Checkpoints and log trimming (``Config.checkpoint_every``, ``keep_below_checkpoint``): every
N executed ops a replica snapshots the service (``Service.snapshot``) with its client table
at that op. What a checkpoint guarantees:
- it covers only executed, hence committed, ops, which are the same on every replica, so
  any replica's checkpoint at op k is a valid substitute for ops 1..k anywhere;
- it is journaled as a self-contained segment and shared, and ops below it are trimmed
  from memory and storage (``Discard``), only after that segment is synced; a torn or lost
  segment leaves the previous segment, which still rebuilds the same state;
- restoring it restores the client table too, so a request executed before the checkpoint
  is still answered from the table and never executed again.
Whoever needs ops the sender trimmed gets the sender's checkpoint plus the log above it:
NewState (a lagging backup), RecoveryResponse (a lost disk), DoViewChange and StartView
(each carries the sender's log above its checkpoint, the paper's suffix optimisation;
a receiver that has not committed up to that checkpoint restores it, one that has keeps
its own prefix, which agrees because it is committed). Checkpoints are carried inline;
a deployment with large state would send their identity and fetch them in chunks.

Reconfiguration (out of scope here) would fit as epochs, as in the paper's section 7: the
configuration is an op in the log; committing it ends epoch e, replicas of epoch e+1 are
brought up to date by state transfer, every message carries its epoch and a replica ignores
messages of older epochs (answering with the newer configuration), and view numbers restart
within each epoch. Journaled ``ViewState`` would gain the epoch.
"""
