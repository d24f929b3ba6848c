"""gNMI dial-in to switches: one Subscribe per switch and database on one asyncio loop, the
streamed values cached per switch and read by the switch source's poll like any other database.

Two dialects behind one interface (`SonicGnmi`, `OpenConfigGnmi`, both with `poll()`):
SONiC telemetry (COUNTERS_DB virtual paths, decoded into the same SAI hashes the Redis path
reads, so `sonic_counters.csv` is the one mapping) and OpenConfig (openconfig-interfaces/-qos/
-lldp leaves through `openconfig_counters.csv`). It only reads. A value that is not a number,
an update that is not the JSON it should be, a wrong password or a switch that stops streaming
is counted by reason and named in one log line; it never becomes a stored number.

The code lives in gnmi_* modules, lowest first: gnmi_decode (paths and values), gnmi_paths
(which paths a switch serves), gnmi_tls (the channel), gnmi_stream (the session, `GnmiLoop`),
gnmi_columns (the SONiC column reader), gnmi_sonic and gnmi_openconfig (the dialects). This
module names the dialects and re-exports what the source, the tests and the benches use.
"""

from __future__ import annotations

from exporters.switch.gnmi_decode import decode, gnmi_pb, parse_path
from exporters.switch.gnmi_openconfig import OC_CSV, OpenConfigGnmi
from exporters.switch.gnmi_sonic import (
    SONIC_FIELD_SAMPLE,
    SONIC_ON_CHANGE,
    SONIC_SAMPLE,
    SonicGnmi,
)
from exporters.switch.gnmi_stream import REASONS, GnmiLoop, Stream

DIALECTS: dict[str, type[Stream]] = {"sonic": SonicGnmi, "openconfig": OpenConfigGnmi}


__all__ = [
    "DIALECTS",
    "OC_CSV",
    "REASONS",
    "SONIC_FIELD_SAMPLE",
    "SONIC_ON_CHANGE",
    "SONIC_SAMPLE",
    "GnmiLoop",
    "OpenConfigGnmi",
    "SonicGnmi",
    "decode",
    "gnmi_pb",
    "parse_path",
]
