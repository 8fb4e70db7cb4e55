"""What a sweep leaves on disk: the Parquet schemas and writers (sink), part files (parts), sweep
folders (sweepdir) and storage folders (storage), output paths (outputs), provenance, and the
driver's heartbeat."""
