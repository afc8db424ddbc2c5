//! What a run targets: the PostgreSQL measured (`postgres`; the throwaway cluster, with its
//! standby and the faults done to it, in `embedded`), the broker under test (`broker`),
//! the broker binary it starts, found or built (`broker_binary`), and what kind of broker it is
//! (`profile`), running brokers added as cells of a run (`external_cells`), and the TCP relay the broker reaches its database through when a fault cuts or
//! delays that link (`relay`); `session` connects to a PostgreSQL.

pub mod affinity;
pub mod broker;
pub mod broker_binary;
pub mod embedded;
pub mod external_cells;
pub mod postgres;
pub mod profile;
pub mod relay;
pub mod session;
