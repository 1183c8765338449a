//! The HAProxy load balancer in front of a Docker cluster's control plane.

/// What the load balancer image starts with, before any control plane exists.
pub const INITIAL_CONFIG: &str = include_str!("../../../templates/haproxy/initial.cfg");
