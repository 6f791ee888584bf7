"""Every reference sentence the embedding detectors compare against, in one place:
domain.py for the topic gate (off-topic and greeting exemplars, other brands), attacks.py for
the input guard's semantic detector (attack families and their benign counter-exemplars)."""
