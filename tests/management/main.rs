//! The embedded management cluster as a user drives it: `capictl management up` in the
//! background, then real kubectl (current and 1.20), the Python client and capictl's commands
//! (`init`, `generate`, `move`, `upgrade`, ClusterClass topologies).

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cluster;
mod crash;
mod move_and_upgrade;
mod production;
mod topology;
