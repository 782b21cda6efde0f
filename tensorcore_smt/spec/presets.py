"""The architecture presets and variants, under the names the rest of the code imports:
the catalogue (spec.catalogue, built from the tables in archs/) and the variant parser
(spec.variants)."""

from __future__ import annotations

from .catalogue import PRESETS, Instruction, Preset
from .variants import ALIASES, Variant, parse_variant

__all__ = ["ALIASES", "PRESETS", "Instruction", "Preset", "Variant", "parse_variant"]
