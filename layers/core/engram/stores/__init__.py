"""Data access: the only code that knows key shapes, table layouts and S3 paths."""
