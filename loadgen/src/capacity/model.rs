//! The types of `capacity.json`. They are defined in `ackbench_reports::capacity` (the report
//! renders from the document alone, and the reports crate cannot depend on the load generator),
//! and re-exported here so the load generator's code and tests name them from one place.

pub use ackbench_reports::capacity::{
    CapacityCell, CapacityResults, Condition, Criteria, Failure, Plan, Step, CAPACITY_KIND,
    CAPACITY_SCHEMA_VERSION,
};
