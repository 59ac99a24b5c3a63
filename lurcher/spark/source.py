"""``LurcherDataSource``: the ``lurcher`` format, wiring options to readers and writers.

Spark builds the data source (and calls ``reader``/``writer``...) in Python workers on the
driver, then pickles the returned reader or writer to executors; everything they hold is
plain data (``SourceOptions``, ``RowBounds``), never a connection.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from lurcher.spark import writer as writers
from lurcher.spark.arrow import SCHEMA
from lurcher.spark.options import LurcherSparkError, source_options
from lurcher.spark.reader import batch_reader, stream_reader

FORMAT = "lurcher"


class LurcherDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("lurcher")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """Raises LurcherSparkError for bad options (``reader.batch_reader``)."""
        return batch_reader(source_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Raises LurcherSparkError for bad options (``reader.stream_reader``)."""
        return stream_reader(source_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Raises LurcherSparkError for overwrite mode, bad columns, a missing stream/topic."""
        return writers.LurcherWriter(self._write_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if not hasattr(writers, "LurcherStreamWriter"):
            raise LurcherSparkError("lurcher writeStream needs PySpark >= 4.1")
        return writers.LurcherStreamWriter(self._write_options(schema, overwrite))

    def _write_options(self, schema: StructType, overwrite: bool):
        if overwrite:
            raise LurcherSparkError(
                "lurcher cannot overwrite a stream: use mode 'append' (messages are appended)")
        writers.check_columns(schema)
        options = source_options(self.options)
        writers.check_target(options)
        return options
