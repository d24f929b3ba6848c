-- job_port_intervals written by the engine after each attribution (INSERT ... SELECT of the
-- window's attributed flows) instead of by job_port_intervals_mv: a view depending on
-- attributed_flows left the attribution's INSERT on one thread

DROP VIEW `job_port_intervals_mv`;
