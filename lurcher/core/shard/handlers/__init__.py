"""Command handlers, one module per command group; each registers with ``registry``."""
