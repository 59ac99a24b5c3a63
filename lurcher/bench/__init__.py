"""``lurcher-bench``: Iggy's benchmark workloads against lurcher and its peers (NATS JetStream,
Redis Streams), side by side.

Layout: ``options`` (typed run options), ``workloads`` (the workload table and the actor plan
it implies), ``servers`` (starting and stopping lurcher, nats-server, redis-server),
``drivers`` (one client driver per target, used inside actor processes), ``actor`` (the
measured loop of one actor process), ``runner`` (spawns actors, progress, monitoring),
``metrics`` (per-batch records -> summaries and time series), ``report`` (JSON and tables),
``charts`` (PNG charts), ``compare`` (one workload on every target, ratios), ``cli``.
"""
