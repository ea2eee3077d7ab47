"""The ``quota.*`` options, frozen: per-task and per-job limits on what direct reads take from
remote storage.  :mod:`kafka_tiered_source.quota` enforces them."""
from __future__ import annotations

from .fields import QuotaConfigFields


class QuotaConfig(QuotaConfigFields):
    """The ``quota.*`` options (None = unlimited; the fields are :class:`.fields.QuotaConfigFields`)."""
    __slots__ = ()

    @property
    def enabled(self) -> bool:
        return any(v is not None for v in (self.remote_bytes_per_second, self.remote_requests_per_second,
                                           self.job_remote_bytes_per_second,
                                           self.job_remote_requests_per_second))

    def per_reader(self, tasks: int) -> tuple[float | None, float | None]:
        """(bytes/s, GETs/s) for one reader of a read planned into ``tasks`` tasks."""
        tasks = max(1, int(tasks))

        def lower(own, job):
            share = job / tasks if job is not None else None
            if own is None:
                return share
            return own if share is None else min(own, share)

        return (lower(self.remote_bytes_per_second, self.job_remote_bytes_per_second),
                lower(self.remote_requests_per_second, self.job_remote_requests_per_second))
