"""Trace files: the format constants (``format``), the data types (``data``), and the
readers (``reader``, ``cuda_reader``). Importing this package imports none of them, so
recording processes (which need only ``format``) stay free of numpy and protobuf."""
