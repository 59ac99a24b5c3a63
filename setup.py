"""Only the optional C helper lives here; everything else is in pyproject.toml.

``lurcher.core.wire._batchhash`` hashes a batch's messages in one call. It is optional: on
a machine without a C compiler the install goes on without it and the checksums fall back
to a Python loop (``lurcher.core.wire.batch.NATIVE_CHECKSUMS`` says which is in use).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("lurcher.core.wire._batchhash",
                             ["lurcher/core/wire/_batchhash.c"], optional=True)])
