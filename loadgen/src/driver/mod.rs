//! The systems the load generator drives, behind one interface (`system`): our broker started
//! per cell and an external Queen (`queen`, over HTTP), and the peers compared against (`peer`:
//! PGMQ, PgQ, over SQL). `for_cell` is the registry: it picks the system of a cell and gives it
//! the cell's settings. Adding a peer is a file implementing `peer::Peer` and its line in
//! `peer::PEERS`; adding another kind of system is a file implementing `system::System` and
//! `system::Installed` (with its `workload::calls::Workers` for the one set of workers), and its
//! line here.

pub mod peer;
pub mod pending;
pub mod queen;
pub mod system;

use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use peer::system::PeerSystem;
use queen::external::ExternalQueen;
use queen::own::OwnBroker;
use system::System;

/// The system cell round `cr` drives, with its settings: the cell's peer; the cell's
/// `--external` broker; else the external broker of `--broker-url`; else our broker with the
/// cell's toggles and topology.
pub fn for_cell(env: &Env, cr: &CellRound<'_>) -> Box<dyn System> {
    if let Some(peer) = cr.cell.peer() {
        return Box::new(PeerSystem { peer });
    }
    if let Some(external) = cr.cell.external().and_then(|i| env.externals.get(i)) {
        return Box::new(ExternalQueen::of_cell(external));
    }
    match &env.settings.broker_url {
        Some(url) => Box::new(ExternalQueen::of_run(env, url)),
        None => Box::new(OwnBroker {
            cell: cr.cell,
            topology: cr.topology,
        }),
    }
}
