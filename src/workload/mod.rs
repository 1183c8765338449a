//! Everything capictl reaches inside a workload cluster: today the etcd contract the control
//! plane provider uses ([`etcd`]). Controllers reach workload clusters only through here;
//! providers implement what needs their infrastructure (the in-memory provider answers
//! [`etcd::EtcdClients`] for its simulated clusters).

pub mod etcd;
