"""Configuration: process settings (settings.py), per-run knobs (run_config.py), prompts,
refusal messages, exemplars and pricing. Nothing is imported here, so each stays cheap."""
