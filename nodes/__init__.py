"""One module per pipeline stage; each node is `(state, config, runtime) -> partial update`."""
