"""SONiC switches: the `switch` source (`source.py`), its config section (`config.py`), database
access over Redis or dumps (`sonic.py`), counter parsing (`counters.py`) and ECMP spread (`ecmp`)."""

from exporters.switch.config import SwitchSourceConfig
from exporters.switch.sonic import DumpSonicDb, RedisSonicDb, SwitchDown, poll
from exporters.switch.source import SwitchSource

__all__ = [
    "DumpSonicDb",
    "RedisSonicDb",
    "SwitchDown",
    "SwitchSource",
    "SwitchSourceConfig",
    "poll",
]
