//! Infrastructure providers: what turns infrastructure clusters and machines into something
//! real. `in_memory` simulates them with real workload API servers; `docker` (to come) runs
//! containers, and already finds its load balancers' published ports.

pub mod docker;
pub mod in_memory;
