"""Guards that read the customer's question, one module each (its `GUARD`), in `registry.GUARDS`."""
