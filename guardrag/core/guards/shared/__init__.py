"""What several guards share: the normalised views, rule machinery, value finders and the
learned classifier."""
