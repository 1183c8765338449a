//! Infrastructure providers: what turns infrastructure clusters and machines into something
//! real. `in_memory` simulates them with real workload API servers; `docker` runs them as
//! containers on the Docker Engine; `dev_machine_pool` keeps the instances of DevMachinePools
//! of either back end.

pub mod dev_machine_pool;
pub mod docker;
pub mod in_memory;
