"""The server's runtime: its configuration (``config`` loads and merges, ``configcheck``
checks keys and values against the packaged defaults, ``settings`` types them) and the
supervisor of a multi-shard server (``supervisor``). ``lurcher.server`` starts from here;
the core never imports it (it receives typed sections)."""
