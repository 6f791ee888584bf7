"""The ingest screen: instructions and foreign sentences hidden in knowledge-base text."""
