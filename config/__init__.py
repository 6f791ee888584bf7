"""Configuration: process settings (env), per-run knobs (RunnableConfig) and prompts."""

from guardrag.config.run_config import RunConfig
from guardrag.config.settings import Settings, SettingsError, load_settings

__all__ = ["RunConfig", "Settings", "SettingsError", "load_settings"]
