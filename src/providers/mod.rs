//! Infrastructure providers: what turns infrastructure clusters and machines into something
//! real. `in_memory` simulates them with real workload API servers; `docker` runs them as
//! containers on the Docker Engine; `machine_pool` keeps the instances of DevMachinePools of
//! either back end and of DockerMachinePools.

pub mod docker;
pub mod in_memory;
pub mod machine_pool;
