-- 019_generic_plans.sql: the batched hot procedures keep one generic plan per session instead of
-- planning their big statements again on many calls (issue 12, found with the capacity search).
--
-- PL/pgSQL caches each statement's plan, but the plan cache chooses per statement between a
-- generic plan and a custom plan built for the call's parameter values. It tries custom plans
-- first and keeps choosing them while the generic plan's estimated cost looks higher, which for
-- these array-driven statements it often does; every custom plan is a full planning. Measured
-- with pg_stat_statements (track = all, track_planning = on) in tiny-batches at 2 100 msg/s:
-- - log_pop_multi_v2's claim statement was planned on 2 064 of 8 314 calls, 1.58 ms each, in a
--   statement that executes in 0.36 ms;
-- - log_dedup_probe_v1's probe was planned on 1 031 of 5 303 calls, and on 4 373 of 5 301 once
--   autovacuum had analyzed queen.log_txns (0.38 ms each, for a 0.11 ms execution): from that
--   moment the same load ran with ack p99 5 -> 10 ms and end-to-end p99 above 100 ms, which is
--   what moved the capacity search's knee from one run to the next;
-- - the ordering loops of log_ack_multi_v1 and log_push_multi_v2 were planned on every call
--   (0.03-0.04 ms each).
-- With plan_cache_mode = force_generic_plan set on each function, their statements are planned
-- once per session. Every statement they run is keyed by ids, index-driven whatever the values
-- (the claim by candidate partition ids, the probe through the GIN dedup index behind its
-- materialisation fence, the loops over the input arrays), so the generic plan is the plan the
-- custom ones were. Contracts, arguments and locks are unchanged.

ALTER FUNCTION queen.log_pop_multi_v2 SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queen.log_dedup_probe_v1 SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queen.log_ack_multi_v1 SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queen.log_push_multi_v2 SET plan_cache_mode = force_generic_plan;
