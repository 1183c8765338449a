//! capictl's Docker nodes and the Docker provider on the real Docker Engine (images built
//! offline first): node containers from bare to Ready, and the quick-start's life on Docker.

#[path = "../common/mod.rs"]
mod common;

mod crash;
mod nodes;
mod ownership;
mod provider;
mod self_hosted;
