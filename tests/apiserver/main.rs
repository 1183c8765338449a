//! The embedded API server through kube-rs clients, in process: every behaviour on both stores
//! (redb and etcd), durability across a kill, and the admission webhooks served over HTTPS.

#[path = "../common/mod.rs"]
mod common;

mod admission_webhooks;
mod clients;
mod durability;
mod webhooks_served;
