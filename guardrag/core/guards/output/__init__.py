"""Guards that read a generated answer, one module each (its `GUARD`), in `registry.GUARDS`;
and the answer invariants the output node and the ingest screen share."""
