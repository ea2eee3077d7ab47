"""The price model of a read (``cost.*`` options): a preset's list prices and the overrides,
frozen into a :class:`CostModel`.  :mod:`kafka_tiered_source.cost` turns totals into dollars
with it; the option table's ``cost.*`` rows feed it."""
from __future__ import annotations

from ..dataclass import dataclass


EGRESS_CLASSES = ("same-region", "inter-az", "inter-region", "internet")


@dataclass(frozen=True)
class Preset:
    name: str
    get_per_1000: float
    egress_per_gb: dict
    broker_inter_az_per_gb: float
    gb_bytes: int = 2 ** 30


# AWS, Google and Azure all bill transfer per GB of 2**30 bytes (AWS and Google say so in their
# billing documentation; Azure's meters are in GB of 1,024 MB).
PRESETS: dict[str, Preset] = {
    "aws-s3-standard": Preset("aws-s3-standard", 0.0004,
                              {"same-region": 0.0, "inter-az": 0.0, "inter-region": 0.02, "internet": 0.09},
                              0.02),
    "gcs-standard": Preset("gcs-standard", 0.004 / 10,
                           {"same-region": 0.0, "inter-az": 0.0, "inter-region": 0.02, "internet": 0.12},
                           0.01),
    "azure-hot": Preset("azure-hot", 0.004 / 10,
                        {"same-region": 0.0, "inter-az": 0.0, "inter-region": 0.02, "internet": 0.087},
                        0.0),
}


@dataclass(frozen=True)
class CostModel:
    """Rates of one read, from a preset and overrides.  ``gb_bytes`` is the provider's GB."""
    preset: str = "aws-s3-standard"
    egress: str = "same-region"
    get_per_1000: float = 0.0004
    egress_per_gb: float = 0.0
    broker_per_gb: float = 0.02
    gb_bytes: int = 2 ** 30
    budget_usd: float | None = None

    @classmethod
    def of(cls, preset: str = "aws-s3-standard", egress: str = "same-region", *,
           get_per_1000: float | None = None, egress_per_gb: float | None = None,
           broker_per_gb: float | None = None, budget_usd: float | None = None) -> "CostModel":
        if preset not in PRESETS:
            raise ValueError(f"unknown cost preset {preset!r}; presets: {', '.join(PRESETS)}")
        if egress not in EGRESS_CLASSES:
            raise ValueError(f"unknown egress class {egress!r}; classes: {', '.join(EGRESS_CLASSES)}")
        p = PRESETS[preset]
        return cls(preset, egress,
                   p.get_per_1000 if get_per_1000 is None else get_per_1000,
                   p.egress_per_gb[egress] if egress_per_gb is None else egress_per_gb,
                   p.broker_inter_az_per_gb if broker_per_gb is None else broker_per_gb,
                   p.gb_bytes, budget_usd)

    def dollars(self, requests: int, nbytes: int) -> float:
        return requests * self.get_per_1000 / 1000.0 + nbytes / self.gb_bytes * self.egress_per_gb

    def broker_dollars(self, nbytes: int) -> float:
        return nbytes / self.gb_bytes * self.broker_per_gb

    def describe(self) -> str:
        return (f"{self.preset}, {self.egress} egress: ${self.get_per_1000:g} per 1,000 GETs, "
                f"${self.egress_per_gb:g}/GB; broker path ${self.broker_per_gb:g}/GB")
