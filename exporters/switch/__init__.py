"""SONiC switches: the `railscope switch` source (COUNTERS_DB/APPL_DB over Redis or dumps),
counter parsing, and ECMP group spread (`ecmp`)."""

from exporters.switch.sonic import DumpSonicDb, RedisSonicDb, SwitchDown, SwitchSource, poll

__all__ = ["DumpSonicDb", "RedisSonicDb", "SwitchDown", "SwitchSource", "poll"]
